"""A small real OTLP/HTTP trace receiver for the tests and benchmarks: it listens on
127.0.0.1 (a free port), decodes `ExportTraceServiceRequest` bodies with
opentelemetry-proto and keeps every span it received, flattened to plain Python.

    with Receiver() as rx:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint}
        ...  # a process exports to it
        spans = rx.wait_for(lambda spans: len(spans) >= 3, timeout=10)
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class SpanEvent:
    """An event recorded on a span (`span.add_event`)."""

    name: str
    attributes: dict[str, Any]
    time_ns: int


@dataclass(frozen=True)
class SpanLink:
    """A link from a span to another span context."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One decoded span, ids as lowercase hex ('' for no parent)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    """`INTERNAL`, `CLIENT`, `SERVER`, `PRODUCER`, `CONSUMER` or `UNSPECIFIED`."""
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[SpanEvent, ...]
    links: tuple[SpanLink, ...]
    status_code: str
    """`UNSET`, `OK` or `ERROR`."""
    status_message: str
    resource: dict[str, Any]
    scope: str
    """The instrumentation scope (tracer) name."""

    def event(self, name: str) -> SpanEvent:
        """The only event called `name` (AssertionError when there is not exactly one)."""
        found = [e for e in self.events if e.name == name]
        assert len(found) == 1, f"{self.name}: events {[e.name for e in self.events]}"
        return found[0]


@dataclass
class Post:
    """What one POST looked like on the wire."""

    path: str
    content_type: str
    content_encoding: str
    size: int
    spans: int


def value(v: AnyValue) -> Any:
    """An OTLP `AnyValue` as a Python value."""
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return attributes(v.kvlist_value.values)
    return getattr(v, which)


def attributes(kvs: Sequence[KeyValue]) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in kvs}


def decode(body: bytes) -> list[ReceivedSpan]:
    """Every span in one serialized `ExportTraceServiceRequest`."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out: list[ReceivedSpan] = []
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    ReceivedSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        kind=Span.SpanKind.Name(s.kind).removeprefix("SPAN_KIND_"),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=attributes(s.attributes),
                        events=tuple(
                            SpanEvent(e.name, attributes(e.attributes), e.time_unix_nano)
                            for e in s.events
                        ),
                        links=tuple(
                            SpanLink(k.trace_id.hex(), k.span_id.hex(), attributes(k.attributes))
                            for k in s.links
                        ),
                        status_code=Status.StatusCode.Name(s.status.code).removeprefix(
                            "STATUS_CODE_"
                        ),
                        status_message=s.status.message,
                        resource=resource,
                        scope=ss.scope.name,
                    )
                )
    return out


@dataclass
class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 in a background thread (a context manager)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    """Every span received, in arrival order (read it through `snapshot()`)."""
    requests: list[Post] = field(default_factory=list)
    """Every request received, including ones that were refused."""
    errors: list[str] = field(default_factory=list)
    """Why requests were refused (bad path, content type or body)."""
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "receiver not started"
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        """The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="otlp-receiver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def clear(self) -> None:
        """Forget everything received so far."""
        with self._cond:
            self.spans.clear()
            self.requests.clear()
            self.errors.clear()

    def snapshot(self) -> tuple[list[ReceivedSpan], list[Post]]:
        """Copies of the spans and requests received so far."""
        with self._cond:
            return list(self.spans), list(self.requests)

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        """The spans received, once `predicate(spans)` holds; AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(list(self.spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = [s.name for s in self.spans]
                    raise AssertionError(f"timed out after {timeout}s; received {names}")
                self._cond.wait(left)
            return list(self.spans)

    # -- the HTTP side ------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
        encoding = (h.headers.get("Content-Encoding") or "").strip().lower()
        seen = Post(h.path, ctype, encoding, len(raw), 0)
        problem, status, decoded = "", 200, []
        if h.path != "/v1/traces":
            problem, status = f"unknown path {h.path}", 404
        elif ctype != PROTOBUF:
            problem, status = f"unsupported content type {ctype!r}", 415
        else:
            try:
                body = (
                    gzip.decompress(raw)
                    if encoding == "gzip"
                    else zlib.decompress(raw)
                    if encoding == "deflate"
                    else raw
                )
                decoded = decode(body)
            except Exception as exc:  # a bad body is a 400, never a dead receiver thread
                problem, status = f"undecodable body: {type(exc).__name__}: {exc}", 400
        seen.spans = len(decoded)
        with self._cond:
            self.requests.append(seen)
            self.spans.extend(decoded)
            if problem:
                self.errors.append(problem)
            self._cond.notify_all()
        payload = (
            ExportTraceServiceResponse().SerializeToString() if status == 200 else problem.encode()
        )
        h.send_response(status)
        h.send_header("Content-Type", PROTOBUF if status == 200 else "text/plain")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)


def tree(
    spans: Sequence[ReceivedSpan],
    attrs: Callable[[ReceivedSpan], Any] | None = None,
) -> list[Any]:
    """The spans as nested `(name, [children...])` lists, siblings by start time; roots are
    spans whose parent was not received. With `attrs`, each node is `(name, attrs(span),
    children)`."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        children.setdefault(s.parent_span_id if s.parent_span_id in ids else "", []).append(s)

    def build(parent: str) -> list[Any]:
        out: list[Any] = []
        for s in sorted(children.get(parent, []), key=lambda s: s.start_ns):
            kids = build(s.span_id)
            out.append((s.name, kids) if attrs is None else (s.name, attrs(s), kids))
        return out

    return build("")
