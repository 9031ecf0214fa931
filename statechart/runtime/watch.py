"""`watch`: drive a run in the background and read what it does as it happens."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from statechart.chart.chart import Chart
from statechart.models.base import Model
from statechart.records.run import Run
from statechart.runtime.api import recorded_model
from statechart.runtime.driver import DEFAULT_MAX_SLEEP, Clock, drive_to_end
from statechart.runtime.lineage import Migration
from statechart.runtime.live import DEFAULT_BUFFER, DEFAULT_INTERVAL, LiveStream
from statechart.store.base import DEFAULT_LEASE_TTL, Store


@asynccontextmanager
async def watch(
    chart: Chart,
    run: Run | str,
    *,
    store: Store,
    model: Model | None = None,
    resuming: bool = False,
    buffer: int = DEFAULT_BUFFER,
    interval: float = DEFAULT_INTERVAL,
    stop_on_close: bool = False,
    migrate: Migration | None = None,
    clock: Clock = time.time,
    holder: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    max_sleep: float = DEFAULT_MAX_SLEEP,
) -> AsyncIterator[LiveStream]:
    """Drive `run` until it waits or ends, and stream what it does, live.

    The stream yields `CallStarted`, `Token` (a model's reply as it is written, when the
    model can stream), `Progress` (from a tool's `ToolContext`), `Step` (each transition
    once stored: the only truth), and last `RunWaiting` or `RunEnded`. Each names its
    run, seq and state path. A consumer that falls behind holds the run only once
    `buffer` events wait for it (tokens of one call are joined meanwhile, steps never
    dropped); while tokens flow the consumer reads them joined, at most every `interval`
    seconds. Leaving the block before the end leaves the run going, unobserved, and
    waits for it; with `stop_on_close` the drive stops there instead (the run stays as
    its last stored step, for `resume`). A drive that fails raises from the stream; an
    exception in the block stops the drive and is raised as it is.

    Args:
        chart: The run's chart.
        run: The run, or its id (stored already: `start` it first).
        store: Where it is stored.
        model: The model; by default the one the run recorded.
        resuming: Run the current state's `on_resume` and entering guard first (as
            `resume` does).
        buffer: Events held for a slow consumer before the run waits for it.
        interval: While tokens flow, the consumer is woken at most this often (seconds)
            and reads what came meanwhile as one `Token`; 0 wakes it for each.
        stop_on_close: Stop driving when the block is left early.
        migrate: Maps a run stored under another chart version onto this one.
        clock: The time written into events.
        holder: The lease holder's name.
        lease_ttl: Seconds another driver waits before taking over.
        max_sleep: A sleeping run due within this many seconds is woken here.

    Yields:
        The stream (`async for event in stream`); `stream.run` is the run once it
        stopped.

    Example:
        ```python
        import anyio

        from statechart import (
            Budget, Chart, Edge, MemoryStore, ScriptedModel, State, Token, call, reply,
            start, watch,
        )

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"), content="Hi there!")])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            said = []
            async with watch(chart, run, store=store, model=model) as events:
                async for event in events:
                    if isinstance(event, Token) and not event.tool:
                        said.append(event.text)  # as the model writes it
            assert "".join(said) == "Hi there!"
            assert events.run is not None and events.run.state == "done"


        anyio.run(main)
        ```
    """
    run_id = run if isinstance(run, str) else run.run_id
    stream = LiveStream(buffer, interval)
    async with anyio.create_task_group() as group:

        async def driving() -> None:
            try:
                chosen = model if model is not None else await recorded_model(store, run_id)
                stream.run = await drive_to_end(
                    chart,
                    run_id,
                    store=store,
                    model=chosen,
                    clock=clock,
                    holder=holder,
                    lease_ttl=lease_ttl,
                    resuming=resuming,
                    migrate=migrate,
                    max_sleep=max_sleep,
                    on=stream,
                )
            except anyio.get_cancelled_exc_class():
                stream.finish()
                raise
            except BaseException as exc:  # raised from the stream as it is, not in a group
                stream.finish(exc)
                return
            stream.finish()

        group.start_soon(driving)
        failed: BaseException | None = None
        try:
            yield stream
        except BaseException as exc:  # raised again below, not wrapped in an ExceptionGroup
            failed = exc
            group.cancel_scope.cancel()
        finally:
            if stop_on_close and not stream.finished:
                group.cancel_scope.cancel()
            stream.close()
    if failed is not None:
        raise failed
    stream.raise_unseen()
