"""What one drive tells its observers (`Observer`): each call as it starts, a streamed
reply's chunks, a tool's progress, the stored steps, and the run waiting or ending.

Only the stored step is the truth; the rest is told once. A consumer's exception never
becomes a call's outcome, and the time an async consumer takes is not the call's.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread

from statechart.chart.tool_context import ToolContext
from statechart.engine.effects import CallModel, RunHandler, RunTool
from statechart.records.live import CallStarted, LiveEvent, Progress, RunEnded, RunWaiting, Token
from statechart.records.messages import Chunk, Reply, Request
from statechart.records.run import Run
from statechart.runtime.live import Callback, Sink, Tee


class Observer:
    """What one drive tells its sink: each call as it starts, a streamed reply's chunks,
    a tool's progress, the stored steps, and the run waiting or ending.

    A consumer's exception never becomes the call's outcome: it is held, nothing more is
    told, and it is raised once the step is stored (`stored`), so the log is the one an
    unwatched drive writes and the call is not lost."""

    __slots__ = ("_loop_thread", "_timed", "active", "again", "failed", "paused", "scope", "sink")

    def __init__(self, sink: Sink, again: int | None = None) -> None:
        self.sink = sink
        self.again = again
        """The seq whose call a dead drive had started (a takeover): said once, then None."""
        self.active: set[str] = set()
        """The calls being made (several at once in a parallel state's regions); a tool's
        progress for any other (a thread its timeout abandoned) is dropped."""
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
        self.active.add(call_id)
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
            if call_id not in self.active or self.failed is not None:
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
