"""Where a drive's live events go: the `Sink` protocol, `Callback` (`on=`), `Tee`, and
the bounded buffer that `watch` reads (`LiveStream`); `observer.py` makes the events.

Only the stored step is the truth; tokens and progress are shown once and may be
coalesced. The driver never waits for an observer except to hand over a step (or the
run waiting or ending) when the buffer is full: a slow consumer slows the run only past
a bounded buffer, and tokens never fill it.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
import anyio.from_thread
from msgspec.structs import replace

from statechart.records.live import (
    LiveEvent,
    Progress,
    Token,
)
from statechart.records.run import Run

DEFAULT_BUFFER = 256
"""Events a `watch` stream holds for a slow consumer before the run waits for it."""
DEFAULT_INTERVAL = 0.01
"""Seconds a `watch` consumer may lag behind flowing tokens (they arrive joined)."""


class Sink(Protocol):
    """Where a drive's live events go."""

    def emit(self, event: LiveEvent) -> None:
        """A tool's progress, perhaps from inside a running tool: never waits."""

    async def send(self, event: LiveEvent) -> None:
        """A call started or a token: may await an async consumer, never waits for room."""

    async def put(self, event: LiveEvent) -> None:
        """A stored step, or the run waiting or ending: may wait for room."""

    # A sink may also say `wants_tokens = False` (nobody reads them now): the model is
    # then asked with `complete()`, not streamed.


class Callback:
    """The sink of `on=`: each event passed to a function, in order; what it returns,
    if awaitable, is awaited. Progress a tool reports from the event loop cannot be
    awaited there: an async function's handling of it is awaited before the next event."""

    __slots__ = ("_pending", "fn")

    wants_tokens = True

    def __init__(self, fn: Callable[[LiveEvent], Any]) -> None:
        self.fn = fn
        self._pending: list[Any] = []

    def emit(self, event: LiveEvent) -> None:
        out = self.fn(event)
        if inspect.isawaitable(out):
            self._pending.append(out)

    async def send(self, event: LiveEvent) -> None:
        while self._pending:
            await self._pending.pop(0)
        out = self.fn(event)
        if inspect.isawaitable(out):
            await out

    put = send

    def close(self) -> None:
        """The drive is over: what an async function was handed and never awaited (the
        drive failed first) is closed, not left to warn."""
        while self._pending:
            pending = self._pending.pop(0)
            if inspect.iscoroutine(pending):
                pending.close()


class Tee:
    """A sink that hands each event to several sinks, in order."""

    __slots__ = ("sinks",)

    def __init__(self, *sinks: Sink) -> None:
        self.sinks = sinks

    @property
    def wants_tokens(self) -> bool:
        return any(getattr(sink, "wants_tokens", True) for sink in self.sinks)

    def emit(self, event: LiveEvent) -> None:
        for sink in self.sinks:
            sink.emit(event)

    async def send(self, event: LiveEvent) -> None:
        for sink in self.sinks:
            await sink.send(event)

    def close(self) -> None:
        """The drive is over: each callback drops what it never got to await."""
        for sink in self.sinks:
            if isinstance(sink, Callback):
                sink.close()

    async def put(self, event: LiveEvent) -> None:
        for sink in self.sinks:
            await sink.put(event)


class LiveStream:
    """The events of one watched run, in order, for one consumer (`async for`).

    Holds at most `size` events before the run waits for the consumer (a step is never
    dropped); tokens of one call, and progress reports of one call, arriving while the
    consumer is behind are joined into the one still waiting. While tokens flow, the
    consumer is woken at most every `interval` seconds and reads what came meanwhile as
    one token (a task switch per token would cost more than the token); anything else
    wakes it at once. Once the consumer closes it, events are dropped and the run goes
    on unobserved.
    """

    def __init__(self, size: int = DEFAULT_BUFFER, interval: float = DEFAULT_INTERVAL) -> None:
        if size < 1:
            raise ValueError(f"a live buffer of {size} events holds nothing; give at least 1")
        self.size = size
        self.interval = interval
        self._patient = False
        """The consumer sleeps at most `interval`: a token need not wake it."""
        self._items: deque[LiveEvent] = deque()
        self._waker: anyio.Event | None = None
        self._room: anyio.Event | None = None
        self._done = False
        self._error: BaseException | None = None
        self.closed = False
        """True once the consumer closed the stream: the run goes on unobserved."""
        self.run: Run | None = None
        """The run once the drive stopped (`watch` sets it)."""

    @property
    def wants_tokens(self) -> bool:
        """Someone still reads: a closed stream wants nothing."""
        return not self.closed

    @property
    def finished(self) -> bool:
        """The drive stopped: no event will come after those held."""
        return self._done

    def emit(self, event: LiveEvent) -> None:
        if self.closed:
            return
        items = self._items
        if items:
            last = items[-1]
            kind = type(event)
            if kind is Token and type(last) is Token:
                if last.call_id == event.call_id and last.tool_call_id == event.tool_call_id:  # type: ignore[union-attr]
                    items[-1] = replace(last, text=last.text + event.text)  # type: ignore[union-attr]
                    return
            elif kind is Progress and type(last) is Progress and last.call_id == event.call_id:  # type: ignore[union-attr]
                items[-1] = event
                return
        items.append(event)
        if self._waker is not None and not (
            self._patient and (type(event) is Token or type(event) is Progress)
        ):
            self._waker.set()
            self._waker = None

    async def send(self, event: LiveEvent) -> None:
        self.emit(event)

    async def put(self, event: LiveEvent) -> None:
        while not self.closed and len(self._items) >= self.size:
            self._room = self._room or anyio.Event()
            await self._room.wait()
        self.emit(event)

    def finish(self, error: BaseException | None = None) -> None:
        """No more events: the drive ended (with `error` if it failed)."""
        self._done, self._error = True, error
        if self._waker is not None:
            self._waker.set()
            self._waker = None

    def raise_unseen(self) -> None:
        """Raise the drive's failure if the consumer never read it."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        """The consumer stops reading: drop what is held and never hold the run again."""
        self.closed = True
        self._items.clear()
        if self._room is not None:
            self._room.set()
            self._room = None

    def __aiter__(self) -> AsyncIterator[LiveEvent]:
        return self

    async def __anext__(self) -> LiveEvent:
        items = self._items
        while not items:
            if self._done or self.closed:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                raise StopAsyncIteration
            self._waker = anyio.Event()
            if self._patient:  # tokens are flowing: wake by the clock, read them joined
                with anyio.move_on_after(self.interval):
                    await self._waker.wait()
                self._waker = None
                self._patient = bool(items)
            else:
                await self._waker.wait()
        event = items.popleft()
        if self._room is not None and len(items) < self.size:
            self._room.set()
            self._room = None
        if type(event) is Token and self.interval > 0:
            self._patient = True
        return event

    async def aclose(self) -> None:
        """Stop reading (what `break` out of `async for` does not do by itself)."""
        self.close()
