"""The run API over the driver: start, run to the end, resume, fork, decide, cancel.

Each function loads what it needs from the store, asks the engine for the
transition, and stores it; `drive()` in `driver.py` does the stepping.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import msgspec

from statechart import tracing
from statechart.chart.chart import Chart
from statechart.engine import regions
from statechart.engine.reasons import waiting_for_approval
from statechart.engine.scopes import entered_at_start
from statechart.engine.tables import compiled
from statechart.errors import EventLoopRunningError, RunNotFoundError
from statechart.io.loading import source_of
from statechart.models.base import Model
from statechart.models.registry import from_spec
from statechart.records.live import LiveEvent
from statechart.records.run import Run, Visit
from statechart.runtime import lineage
from statechart.runtime.current import load_run
from statechart.runtime.decisions import approve, cancel, reject
from statechart.runtime.driver import DEFAULT_MAX_SLEEP, Clock, drive_to_end, priced
from statechart.runtime.lineage import Migration
from statechart.store.base import DEFAULT_LEASE_TTL, Store


async def start(
    chart: Chart,
    *,
    store: Store,
    model: Model,
    context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    clock: Clock = time.time,
) -> Run:
    """Create and store a new run at the chart's initial state (nothing runs yet).

    Args:
        chart: The chart to run; it is compiled once and stored by version.
        store: Where the run and its events live.
        model: The model the run records (`resume` uses it again unless told otherwise).
        context: Initial context values, validated by the chart's context type.
        run_id: The new run's id (a random hex id by default).
        clock: The time written into the run.

    Returns:
        The stored run, at seq 0, `running` (or `waiting` if it starts at an approval).

    Raises:
        pydantic.ValidationError: `context` does not fit the chart's context type.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_to_end, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)  # stored; nothing ran yet
            assert (run.state, run.status) == ("greet.think", "running")
            run = await run_to_end(chart, run, store=store, model=model)
            assert (run.state, run.status) == ("done", "ended")


        anyio.run(main)
        ```
    """
    compiled_chart = compiled(chart)
    priced(compiled_chart, model)  # a strict cost cap needs a priced model: say so now
    run_id = run_id or uuid.uuid4().hex
    ctx = chart.context.model_validate(dict(context or {})).model_dump(mode="json")
    leaf = compiled_chart.initial_leaf
    starts = tuple((r, compiled_chart.descend(r)) for r in compiled_chart.parallels.get(leaf, ()))
    contexts = entered_at_start(compiled_chart, ctx, leaf)
    for _, start_leaf in starts:
        contexts.update(entered_at_start(compiled_chart, ctx, start_leaf))
    if leaf in compiled_chart.maps:  # a map starts an instance per item
        starts = tuple((r, at) for r, at in starts if r in contexts)
    entered = [
        p
        for at in (leaf, *(start for _, start in starts))
        for p in reversed(compiled_chart.ancestors(at))
        if compiled_chart.nodes[p].state is not None
    ]
    entered = list(dict.fromkeys(entered))
    owner, state = compiled_chart.owner_state(leaf)
    await store.save_chart(chart.version, chart.describe(), source_of(chart))
    trace, span = tracing.run_trace_context(chart.name, run_id)
    now = clock()
    armed = compiled_chart.rearmed({}, (), tuple(entered), now) if compiled_chart.timers else {}
    run = Run(
        run_id=run_id,
        chart=chart.name,
        chart_version=chart.version,
        model=model.spec,
        state=leaf,
        context=ctx,
        contexts=contexts,
        visits=dict.fromkeys(entered, 1),
        visit=Visit(state=owner, seq=0) if state.kind == "model" else None,
        lineage_root=run_id,
        created_at=now,
        trace=trace,
        **armed,
        status="waiting" if state.kind == "approval" else "running",
        reason=waiting_for_approval(owner) if state.kind == "approval" else "",
    )
    if starts:  # it starts in a parallel state: its regions start too
        fields: dict[str, Any] = {}
        regions.moved(compiled_chart, run, leaf, starts, 0, fields)
        run = msgspec.structs.replace(run, **fields)
    with tracing.ending(span):
        await store.create(run)
    return run


async def run_to_end(
    chart: Chart,
    run: Run | str,
    *,
    store: Store,
    model: Model,
    clock: Clock = time.time,
    holder: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    max_sleep: float = DEFAULT_MAX_SLEEP,
    on: Callable[[LiveEvent], Any] | None = None,
) -> Run:
    """Drive until the run waits for a human or ends.

    Args:
        chart: The run's chart.
        run: The run, or its id.
        store: Where it is stored; each transition is appended as it happens.
        model: Answers the run's model states.
        clock: The time written into events.
        holder: The lease holder's name (host, pid and a nonce by default).
        lease_ttl: Seconds another driver waits before taking over a dead holder's run.
        max_sleep: A failed call's next attempt due within this many seconds is waited for
            here; a later one returns the run `sleeping` (`resume` it when it is due).
        on: Told each call as it starts, a model's reply as it streams, a tool's progress,
            each stored step and the run waiting or ending (see `watch`).

    Returns:
        The last snapshot: `waiting` (approve or reject it, then `resume`), `ended`, or
        `sleeping` until `run.wake`.

    Raises:
        LeaseHeldError: Another driver holds the run.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_to_end, start, tool


        @tool(retry="keyed", needs_approval=True)
        def refund(order: str, amount: int, idempotency_key: str) -> str:
            "Refund an order."
            return f"refunded {amount} on {order}"


        chart = Chart(
            "refunds",
            states=(State("resolve", tools=(refund,), instructions="Refund the order."),
                    State("done", kind="terminal")),
            edges=(Edge("resolve", "done"),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("refund", order="A-7", amount=20))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            run = await run_to_end(chart, run, store=store, model=model)
            if run.status == "waiting":  # here: a call to a `needs_approval` tool
                print(run.reason)  # approve() or reject() it, then resume()
            assert run.reason == "tool 'refund' needs approval in state 'resolve'"


        anyio.run(main)
        ```
    """
    run_id = run.run_id if isinstance(run, Run) else run
    last = await drive_to_end(
        chart,
        run_id,
        store=store,
        model=model,
        clock=clock,
        holder=holder,
        lease_ttl=lease_ttl,
        max_sleep=max_sleep,
        on=on,
    )
    return last if last is not None else await load_run(chart, run_id, store=store)


async def resume(
    chart: Chart,
    run_id: str,
    *,
    store: Store,
    model: Model | None = None,
    migrate: Migration | None = None,
    clock: Clock = time.time,
    holder: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    max_sleep: float = DEFAULT_MAX_SLEEP,
    on: Callable[[LiveEvent], Any] | None = None,
) -> Run:
    """Continue a stored run from its exact state until it waits or ends.

    A call a dead driver may have started is settled by its tool's retry policy; the
    current state's `on_resume` refresh and its entering edge's guard run first.

    Args:
        chart: The run's chart.
        run_id: The stored run.
        store: Where it is stored.
        model: The model to use; by default the one the run recorded.
        migrate: Maps a run stored under another chart version onto this one.
        clock: The time written into events.
        holder: The lease holder's name.
        lease_ttl: Seconds another driver waits before taking over.
        max_sleep: A sleeping run due within this many seconds is woken here.
        on: Told of the run live, as `run_to_end`'s `on`.

    Returns:
        The last snapshot, `waiting`, `sleeping` or `ended`.

    Raises:
        ChartChangedError: The run was stored under another chart version and no
            `migrate` was given.
        LeaseHeldError: Another live driver holds the run.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        import anyio

        from statechart import Budget, Chart, Edge, ScriptedModel, SQLiteStore, State
        from statechart import call, reply, resume, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])
        path = Path(tempfile.mkdtemp()) / "runs.db"


        async def first_process() -> None:  # starts the run, then stops
            store = SQLiteStore(path)
            await start(chart, store=store, model=model, run_id="hello-1")
            store.close()


        async def second_process() -> None:
            # e.g. in another process, after a crash or an approval: the same chart and database
            store = SQLiteStore(path)
            run = await resume(chart, "hello-1", store=store, model=model)
            assert run.state == "done"
            store.close()


        anyio.run(first_process)
        anyio.run(second_process)
        ```
    """
    if model is None:
        model = await recorded_model(store, run_id)
    last = await drive_to_end(
        chart,
        run_id,
        store=store,
        model=model,
        clock=clock,
        holder=holder,
        lease_ttl=lease_ttl,
        resuming=True,
        migrate=migrate,
        max_sleep=max_sleep,
        on=on,
    )
    return last if last is not None else await load_run(chart, run_id, store=store)


async def recorded_model(store: Store, run_id: str) -> Model:
    """The model a stored run last used, recreated from its spec."""
    loaded = await store.load(run_id)
    spec = next((e.model for e in reversed(loaded.tail) if e.model is not None), None)
    return from_spec(spec or loaded.snapshot.model, run_id)


async def fork(
    chart: Chart,
    run_id: str,
    at_seq: int,
    *,
    store: Store,
    new_run_id: str | None = None,
    clock: Clock = time.time,
) -> Run:
    """Start a new run from the state `run_id` had after event `at_seq`, rebuilt from the
    log; it keeps the lineage root, so repeated keyed calls present the same keys.

    Args:
        chart: The chart the original run is stored under.
        run_id: The run to fork.
        at_seq: The event after which the fork starts.
        store: Where both runs live.
        new_run_id: The fork's id (random by default).
        clock: The time written into the fork.

    Returns:
        The fork, stored and not yet driven: drive it with `resume` or `run_to_end`.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, fork, reply, resume, run_to_end, start, tool


        @tool(retry="safe")
        def search_kb(query: str) -> str:
            "Search the knowledge base."
            return "KB-12"


        chart = Chart(
            "qa",
            states=(State("research", tools=(search_kb,), instructions="Look it up."),
                    State("done", kind="terminal")),
            edges=(Edge("research", "done"),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("search_kb", query="refund")),
                               reply(call("next_state", target="done"), content="First try.")])
        another_model = ScriptedModel([reply(call("next_state", target="done"), content="Again.")])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            run = await run_to_end(chart, run, store=store, model=model)
            # try the rest of the run again from after its event 2 (the search), with another model
            child = await fork(chart, run.run_id, 2, store=store)
            child = await resume(chart, child.run_id, store=store, model=another_model)
            assert child.parent_run == run.run_id  # the original run is untouched
            assert child.state == "done" and len(another_model.requests[0].transcript) == 2
            # the search's call and result, read from the parent


        anyio.run(main)
        ```
    """
    return await lineage.fork(
        chart, run_id, at_seq, store=store, now=clock(), new_run_id=new_run_id
    )


def run_sync(
    chart: Chart,
    *,
    store: Store,
    model: Model,
    context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    backend: str = "asyncio",
) -> Run:
    """Start (or continue, when `run_id` exists) a run and drive it, from synchronous code.

    Args:
        chart: The chart to run.
        store: Where the run lives.
        model: Answers the run's model states.
        context: Initial context values of a new run.
        run_id: A run to continue, or the id of the new one.
        backend: The anyio backend (`asyncio` or `trio`).

    Returns:
        The last snapshot, `waiting` or `ended`.

    Example:
        ```python
        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])
        assert run_sync(chart, store=MemoryStore(), model=model).state == "done"
        ```
    """

    async def main() -> Run:
        run: Run | None = None
        if run_id is not None:
            with contextlib.suppress(RunNotFoundError):
                run = await load_run(chart, run_id, store=store)
        if run is None:
            run = await start(chart, store=store, model=model, context=context, run_id=run_id)
        return await run_to_end(chart, run, store=store, model=model)

    try:
        result: Run = anyio.run(main, backend=backend)
    except RuntimeError as exc:
        if not str(exc).startswith("Already running"):
            raise
        raise EventLoopRunningError(
            f"run_sync for chart '{chart.name}' was called inside a running event loop "
            f"({exc}), e.g. in a notebook or an async function; there, use "
            "`run = await run_to_end(chart, await start(chart, store=store, model=model), "
            "store=store, model=model)` instead"
        ) from None
    return result


__all__ = ["approve", "cancel", "fork", "reject", "resume", "run_sync", "run_to_end", "start"]
