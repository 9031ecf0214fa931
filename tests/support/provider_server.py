"""A scripted HTTP server on 127.0.0.1 that speaks a provider's wire format for tests:
each request gets the next queued answer, a (status, JSON body) or a stream of
server-sent events (`SSE`); requests are recorded. A request that asks to stream
gets a queued JSON reply as the same reply streamed, as a real server sends it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class SSE:
    """A `text/event-stream` answer: each (event name or None, JSON payload or a raw
    string such as `[DONE]`) sent as one event, `delay` seconds apart."""

    events: Sequence[tuple[str | None, Any]]
    delay: float = 0.0


class Provider:
    """The queue of answers and the record of requests (path, JSON body)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.url = ""

    def answer(self, body: Any, status: int = 200) -> None:
        with self.lock:
            self.answers.append((status, body))

    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, body in self.requests]


def streamed(reply: dict[str, Any]) -> SSE:
    """A chat completion or a message as its server streams it: the text in one delta,
    each call's arguments in one delta, then the usage."""
    if reply.get("object") == "chat.completion":
        return _chat_chunks(reply)
    if reply.get("type") == "message":
        return _message_events(reply)
    raise ValueError(f"cannot stream {reply!r}")


def _chat_chunks(reply: dict[str, Any]) -> SSE:
    head = {key: reply[key] for key in ("id", "created", "model")}

    def chunk(choices: list[dict[str, Any]], **more: Any) -> tuple[None, dict[str, Any]]:
        return None, {**head, "object": "chat.completion.chunk", "choices": choices, **more}

    choice = reply["choices"][0]
    message = choice["message"]
    events = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    if message.get("content"):
        events.append(chunk([{"index": 0, "delta": {"content": message["content"]}}]))
    for n, call in enumerate(message.get("tool_calls") or ()):
        delta = {"tool_calls": [{"index": n, **call}]}
        events.append(chunk([{"index": 0, "delta": delta}]))
    events.append(chunk([{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]))
    if "usage" in reply:
        events.append(chunk([], usage=reply["usage"]))
    events.append((None, "[DONE]"))
    return SSE(events)


def _message_events(reply: dict[str, Any]) -> SSE:
    usage = reply["usage"]
    start = {**reply, "content": [], "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(reply["content"]):
        if block["type"] == "text":
            opened, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = {"stop_reason": reply.get("stop_reason"), "stop_sequence": None}
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": stop,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return SSE(events)


@contextmanager
def serve() -> Iterator[Provider]:
    provider = Provider()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            with provider.lock:
                provider.requests.append((self.path, body))
                status, answer = (
                    provider.answers.pop(0)
                    if provider.answers
                    else (500, {"error": {"message": "no answer queued", "type": "test"}})
                )
            if body.get("stream") and status == 200 and isinstance(answer, dict):
                answer = streamed(answer)
            if isinstance(answer, SSE):
                self.stream(answer)
                return
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("retry-after-ms", "10")
            self.end_headers()
            self.wfile.write(data)

        def stream(self, answer: SSE) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()  # no length: HTTP/1.0, the stream ends when the server closes
            for name, payload in answer.events:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {data}\n\n".encode())
                self.wfile.flush()
                if answer.delay:
                    time.sleep(answer.delay)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    provider.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
