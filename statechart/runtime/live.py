"""Live observers of a drive: where its events go (`Sink`), the bounded buffer that
`watch` reads (`LiveStream`), and what one drive tells them (`Observer`).

Only the stored step is the truth; tokens and progress are shown once and may be
coalesced. The driver never waits for an observer except to hand over a step (or the
run waiting or ending) when the buffer is full: a slow consumer slows the run only past
a bounded buffer, and tokens never fill it.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
import anyio.from_thread
from msgspec.structs import replace

from statechart.chart.tool_context import ToolContext
from statechart.engine.effects import CallModel, RunHandler, RunTool
from statechart.records.live import (
    CallStarted,
    LiveEvent,
    Progress,
    RunEnded,
    RunWaiting,
    Token,
)
from statechart.records.messages import Chunk, Reply, Request
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
        for sink in self.sinks:
            closing = getattr(sink, "close", None)
            if isinstance(sink, Callback) and closing is not None:
                closing()

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


class Observer:
    """What one drive tells its sink: each call as it starts, a streamed reply's chunks,
    a tool's progress, the stored steps, and the run waiting or ending.

    A consumer's exception never becomes the call's outcome: it is held, nothing more is
    told, and it is raised once the step is stored (`stored`), so the log is the one an
    unwatched drive writes and the call is not lost."""

    __slots__ = ("_loop_thread", "_timed", "again", "current", "failed", "paused", "scope", "sink")

    def __init__(self, sink: Sink, again: int | None = None) -> None:
        self.sink = sink
        self.again = again
        """The seq whose call a dead drive had started (a takeover): said once, then None."""
        self.current = ""
        """The call being made; a tool's progress for any other (a thread its timeout
        abandoned) is dropped."""
        self.failed: BaseException | None = None
        """A consumer's exception, held until the step is stored."""
        self.paused = 0.0
        """Seconds this step's call waited for an async consumer: not the call's time."""
        self.scope: anyio.CancelScope | None = None
        """The time limit of the call being made, moved on by what a consumer takes."""
        self._timed = _may_wait(sink)
        self._loop_thread = threading.get_ident()

    @property
    def wants_tokens(self) -> bool:
        """Someone reads tokens: a model call is streamed."""
        return self.failed is None and bool(getattr(self.sink, "wants_tokens", True))

    async def _tell(self, event: LiveEvent) -> None:
        if self.failed is not None:
            return
        began = time.monotonic() if self._timed else 0.0
        try:
            await self.sink.send(event)
        except Exception as exc:
            self.failed = exc
        if self._timed:
            took = time.monotonic() - began
            self.paused += took
            if self.scope is not None:
                self.scope.deadline += took

    def _raise_failed(self) -> None:
        if self.failed is not None:
            error, self.failed = self.failed, None
            raise error

    async def started(self, run: Run, effect: Any) -> str:
        """Tell the sink the effect's call begins; the call's id ("" for no call)."""
        kind = type(effect)
        seq = run.seq + 1
        if kind is CallModel:
            what, name, call_id = "model", "", f"{run.run_id}:{seq}"
        elif kind is RunTool:
            what, name, call_id = "tool", effect.tool.name, effect.call.id
        elif kind is RunHandler:
            what, name, call_id = "handler", effect.state.name, f"{run.run_id}:{seq}"
        else:
            return ""
        again = self.again == run.seq
        if again:
            self.again = None
        self.current = call_id
        await self._tell(
            CallStarted(
                run_id=run.run_id,
                seq=seq,
                path=run.state,
                call=what,  # type: ignore[arg-type]
                name=name or run.model,
                call_id=call_id,
                again=again,
            )
        )
        return call_id

    async def streamed(
        self,
        model: Any,
        request: Request,
        run: Run,
        call_id: str,
        first: Callable[[float], None] | None = None,
    ) -> Reply:
        """The model's reply, streamed: each chunk to the sink as a `Token`; `first` told
        the seconds until the first chunk. A stream that ends with no `Reply` fails the
        call (`ModelError`)."""
        from statechart.errors import ModelError

        began = time.monotonic()
        tell, seq, path, run_id = self._tell, run.seq + 1, run.state, run.run_id
        answered: Reply | None = None
        pieces = model.stream(request)
        async with _closing(pieces):  # a call cut off closes its HTTP response now
            async for piece in pieces:
                if type(piece) is Chunk or isinstance(piece, Chunk):
                    if first is not None:
                        first(time.monotonic() - began)
                        first = None
                    await tell(
                        Token(
                            run_id=run_id,
                            seq=seq,
                            path=path,
                            call_id=call_id,
                            text=piece.text,
                            tool=piece.tool,
                            tool_call_id=piece.call_id,
                        )
                    )
                elif isinstance(piece, Reply):
                    answered = piece
                else:
                    raise ModelError(
                        f"{model.spec} streamed a {type(piece).__name__} in state "
                        f"'{request.state}'; a stream yields Chunks and then one Reply"
                    )
        if answered is None:
            raise ModelError(
                f"{model.spec} ended its stream in state '{request.state}' with no Reply; "
                "a stream yields its Chunks and then the whole Reply"
            )
        return answered

    def tool_context(self, run: Run, effect: RunTool, call_id: str) -> ToolContext:
        """The `ToolContext` a tool receives: its progress reaches the sink as `Progress`
        (from a worker thread, by way of the event loop) while its call is being made."""
        seq, path, run_id, tool = run.seq + 1, run.state, run.run_id, effect.tool.name
        loop = self._loop_thread

        def report(message: str, data: dict[str, Any]) -> None:
            if self.current != call_id or self.failed is not None:
                return  # the call is over (cut off, its thread abandoned), or told failed
            event = Progress(
                run_id=run_id,
                seq=seq,
                path=path,
                call_id=call_id,
                tool=tool,
                message=str(message),
                data=data,
            )
            if threading.get_ident() == loop:
                try:
                    self.sink.emit(event)
                except Exception as exc:
                    self.failed = exc
            else:
                with contextlib.suppress(RuntimeError):  # abandoned, or the loop is gone
                    anyio.from_thread.run(self._tell, event)  # waits for an async consumer

        return ToolContext(run_id=run_id, state=path, tool=tool, call_id=call_id, report=report)

    async def stored(self, step: Any) -> None:
        """Tell the sink `step` is stored; then raise a consumer's held exception."""
        self.current = ""
        if self.failed is None:
            await self.sink.put(step)
        self._raise_failed()

    def close(self) -> None:
        """The drive is over: a callback sink drops what it never got to await."""
        if isinstance(self.sink, (Callback, Tee)):
            self.sink.close()

    async def stopped(self, run: Run | None) -> None:
        """Tell the sink the drive stopped with the run waiting or ended."""
        if run is not None and self.failed is None:
            if run.status == "ended":
                await self.sink.put(RunEnded(run=run))
            elif run.status in ("waiting", "sleeping"):
                await self.sink.put(RunWaiting(run=run))
        self._raise_failed()


def _may_wait(sink: Any) -> bool:
    """Whether handing an event to `sink` may wait: an async function among its callbacks."""
    if isinstance(sink, Tee):
        return any(_may_wait(s) for s in sink.sinks)
    return isinstance(sink, Callback) and inspect.iscoroutinefunction(sink.fn)


def _closing(stream: Any) -> Any:
    """`contextlib.aclosing(stream)` when it can be closed, else nothing to do."""
    return contextlib.aclosing(stream) if hasattr(stream, "aclose") else contextlib.nullcontext()
