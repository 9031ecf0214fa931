"""Relaying a drive's live events to other processes on this machine, so an inspector
shows a run's streamed text while another process drives it.

Nothing is stored: a driving process sends small datagrams to every listener's Unix
socket in a directory named after the store (a SQLite file's path, a PostgreSQL DSN),
at most every `INTERVAL` seconds per run, each carrying the call's whole text so far
(its last `TAIL` characters), so a lost datagram loses nothing the next one does not
repeat. A listener that is gone is noticed (its socket refuses) and forgotten. The
stored step stays the only truth: a `stored` message tells listeners to read it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from statechart.records.live import CallStarted, LiveEvent, Progress, RunEnded, RunWaiting, Token
from statechart.records.run import Step
from statechart.store.base import Store

INTERVAL = 0.05
"""Seconds between two datagrams about one run's text (tokens in between are joined)."""
TAIL = 6000
"""Characters of a call's text a datagram carries (its end)."""
MAX_DATAGRAM = 1 << 17
"""Bytes a datagram may carry (a longer one is cut to the text's end)."""
RESCAN = 0.5
"""Seconds a driver trusts its list of listeners before reading the directory again."""


def where(store: Store) -> Path | None:
    """The directory a store's live datagrams go through, or None for a store that lives
    in one process (`MemoryStore`)."""
    path = getattr(store, "path", None)
    name = os.path.realpath(path) if isinstance(path, str) else getattr(store, "dsn", None)
    if not isinstance(name, str):
        return None
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"statechart-live-{os.getuid()}" / digest


class Relay:
    """A sink (`on=`) that sends what a drive does to the listeners of its store."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._listeners: list[str] = []
        self._scanned = 0.0
        self._call: dict[str, Any] = {}
        self._sent = 0.0
        self._dirty = False

    @property
    def wants_tokens(self) -> bool:
        """An inspector listens on this machine now (the directory is read again: this
        is asked once a model call): only then is a model call streamed for the relay."""
        self._scan()
        return bool(self._listeners)

    def emit(self, event: LiveEvent) -> None:
        kind = type(event)
        if kind is Token:
            assert isinstance(event, Token)
            call = self._call
            if event.tool:
                calls = call.setdefault("calls", {})
                tool, sent = calls.get(event.tool_call_id, (event.tool, ""))
                calls[event.tool_call_id] = (tool, (sent + event.text)[-TAIL:])
            else:
                call["text"] = (call.get("text", "") + event.text)[-TAIL:]
                call["chars"] = call.get("chars", 0) + len(event.text)
            self._dirty = True
            if time.monotonic() - self._sent >= INTERVAL:
                self._flush()
        elif kind is CallStarted:
            assert isinstance(event, CallStarted)
            self._call = {
                "kind": "call",
                "run_id": event.run_id,
                "seq": event.seq,
                "path": event.path,
                "call": event.call,
                "name": event.name,
                "call_id": event.call_id,
                "again": event.again,
                "text": "",
                "chars": 0,
            }
            self._flush()
        elif kind is Progress:
            assert isinstance(event, Progress)
            self._call["progress"] = event.message
            self._dirty = True
            if time.monotonic() - self._sent >= INTERVAL:
                self._flush()

    async def send(self, event: LiveEvent) -> None:
        self.emit(event)

    async def put(self, event: LiveEvent) -> None:
        if isinstance(event, Step):
            self._send(
                {
                    "kind": "stored",
                    "run_id": event.run.run_id,
                    "seq": event.event.seq,
                    "state": event.run.state,
                    "status": event.run.status,
                }
            )
            self._call, self._dirty = {}, False
        elif isinstance(event, (RunWaiting, RunEnded)):
            run = event.run
            self._send({"kind": event.kind, "run_id": run.run_id, "seq": run.seq})

    def _flush(self) -> None:
        if self._call:
            self._send(self._call)
        self._dirty = False
        self._sent = time.monotonic()

    def _send(self, message: dict[str, Any]) -> None:
        self._rescan()
        if not self._listeners:
            return
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        if len(data) > MAX_DATAGRAM:  # text of many calls, or wide characters: keep the ends
            message = {**message, "text": str(message.get("text", ""))[-TAIL // 4 :]}
            message.pop("calls", None)
            data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        for listener in list(self._listeners):
            try:
                self._sock.sendto(data, listener)
            except OSError as exc:
                if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):  # its listener is gone
                    self._listeners.remove(listener)
                    with contextlib.suppress(OSError):
                        os.unlink(listener)
                # EAGAIN (a listener behind) or too long: this one is lost; the next repeats it

    def _rescan(self) -> None:
        if time.monotonic() - self._scanned > RESCAN:
            self._scan()

    def _scan(self) -> None:
        self._scanned = time.monotonic()
        try:
            self._listeners = [str(p) for p in self.directory.glob("*.sock")]
        except OSError:
            self._listeners = []

    def close(self) -> None:
        """Send what is pending and release the socket."""
        if self._dirty:
            self._flush()
        self._sock.close()


def relay_for(store: Store) -> Relay | None:
    """A relay for drives on `store`, or None when the store lives in one process."""
    directory = where(store)
    return Relay(directory) if directory is not None else None


@contextlib.asynccontextmanager
async def listening(
    store: Store, quiet: float = 15.0
) -> AsyncIterator[AsyncIterator[dict[str, Any] | None]]:
    """Receive the live messages of every run driven on `store` on this machine (none
    for a store that lives in one process); None after each `quiet` seconds with none."""
    directory = where(store)
    if directory is None:
        yield _nothing(quiet)
        return
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{uuid.uuid4().hex[:12]}.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.bind(str(path))
    try:
        yield _received(sock, quiet)
    finally:
        sock.close()
        with contextlib.suppress(OSError):
            path.unlink()


async def _received(sock: socket.socket, quiet: float) -> AsyncIterator[dict[str, Any] | None]:
    while True:
        readable = False
        with anyio.move_on_after(quiet):  # inside the generator: cut off, it goes on
            await anyio.wait_readable(sock)
            readable = True
        if not readable:
            yield None
            continue
        try:
            data = sock.recv(MAX_DATAGRAM)
        except BlockingIOError:
            continue
        with contextlib.suppress(ValueError):
            message = json.loads(data)
            if isinstance(message, dict):
                yield message


async def _nothing(quiet: float) -> AsyncIterator[dict[str, Any] | None]:
    while True:
        await anyio.sleep(quiet)
        yield None
