"""Human decisions from any process: `approve`, `reject` and `cancel` only append a
`human` event (free: no step, no wall time) and leave driving to `resume`."""

from __future__ import annotations

import time
from typing import Any

from statechart import tracing
from statechart.chart.chart import Chart
from statechart.engine import human
from statechart.engine.tables import compiled
from statechart.errors import ConflictError
from statechart.records.run import Run, Step
from statechart.runtime import lineage
from statechart.runtime.current import current
from statechart.runtime.driver import Clock
from statechart.store.base import Store


async def approve(
    chart: Chart,
    run_id: str,
    *,
    store: Store,
    by: str,
    note: str = "",
    edits: dict[str, Any] | None = None,
    clock: Clock = time.time,
    region: str | None = None,
) -> Step:
    """Record a human approval; the run becomes runnable, `resume` drives it.

    Args:
        chart: The run's chart (the stored version must match).
        run_id: A run waiting for approval.
        store: Where it is stored.
        by: Who approved, written into the event.
        note: Why, written into the event.
        edits: New values for the pending call's arguments, checked by its tool's schema.
        clock: The time written into the event.
        region: In a parallel state, the waiting region decided on (e.g. `gather.web`);
            needed only when several regions wait.

    Returns:
        The record of the `human` event.

    Raises:
        NotWaitingError: The run (or `region`) is not waiting for approval.
        RunError: The edits do not fit the tool's arguments, or several regions wait and
            `region` is not given (nothing is written).

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import approve, call, reply, resume, run_to_end, start, tool

        BANK: list[int] = []


        @tool(retry="keyed", needs_approval=True)
        def refund(order: str, amount: int, idempotency_key: str) -> str:
            "Refund an order."
            BANK.append(amount)
            return f"refunded {amount} on {order}"


        chart = Chart(
            "refunds",
            states=(State("resolve", tools=(refund,), instructions="Refund the order."),
                    State("done", kind="terminal")),
            edges=(Edge("resolve", "done"),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("refund", order="A-7", amount=20)),
                               reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            run = await run_to_end(chart, run, store=store, model=model)
            assert run.status == "waiting"  # its model asked for `refund(amount=20)`
            await approve(chart, run.run_id, store=store, by="dana", edits={"amount": 15})
            run = await resume(chart, run.run_id, store=store, model=model)  # refunds 15
            assert (run.state, BANK) == ("done", [15])


        anyio.run(main)
        ```
    """
    return await _decide(chart, run_id, store, True, by, note, edits, clock, region)


async def reject(
    chart: Chart,
    run_id: str,
    *,
    store: Store,
    by: str,
    reason: str,
    clock: Clock = time.time,
    region: str | None = None,
) -> Step:
    """Record a human rejection: the model hears `reason` (or an approval state's
    `on_reject` edge is taken).

    Args:
        chart: The run's chart (the stored version must match).
        run_id: A run waiting for approval.
        store: Where it is stored.
        by: Who rejected, written into the event.
        reason: Why, written into the event and told to the model.
        clock: The time written into the event.
        region: In a parallel state, the waiting region decided on; needed only when
            several regions wait.

    Returns:
        The record of the `human` event.

    Raises:
        NotWaitingError: The run (or `region`) is not waiting for approval.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reject, reply, resume, run_to_end, start, tool


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
        model = ScriptedModel([reply(call("refund", order="A-7", amount=20)),
                               reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            run = await run_to_end(chart, run, store=store, model=model)
            assert run.status == "waiting"  # its model asked for `refund(amount=20)`
            await reject(chart, run.run_id, store=store, by="dana", reason="refund at most 10")
            run = await resume(chart, run.run_id, store=store, model=model)  # the model reads why
            assert "refund at most 10" in model.requests[-1].transcript[-1].content
            assert run.state == "done"


        anyio.run(main)
        ```
    """
    return await _decide(chart, run_id, store, False, by, reason, None, clock, region)


async def _decide(
    chart: Chart,
    run_id: str,
    store: Store,
    approved: bool,
    by: str,
    note: str,
    edits: dict[str, Any] | None,
    clock: Clock,
    region: str | None,
) -> Step:
    run = await _current(chart, run_id, store)
    record = human.decide(
        compiled(chart),
        run,
        approved=approved,
        by=by,
        note=note,
        edits=edits,
        now=clock(),
        region=region,
    )
    return await _append_human(chart, store, run, record)


async def _current(chart: Chart, run_id: str, store: Store) -> Run:
    """The run as it is now, refused when stored under another chart version."""
    loaded = await store.load(run_id)
    await lineage.require_version(chart, loaded.snapshot, store)
    return current(chart, loaded)


async def _append_human(chart: Chart, store: Store, run: Run, record: Step) -> Step:
    """Store a human event, with a transition span in the run's trace."""
    span = tracing.human_transition(compiled(chart), record, time.time_ns())
    if span is not None:
        record = record.with_span(format(span.get_span_context().span_id, "016x"))
    with tracing.ending(span):  # not stored (another writer came first): a failed span
        await store.append(record)
        tracing.stored(span, record)
    return record


async def cancel(
    chart: Chart,
    run_id: str,
    *,
    store: Store,
    reason: str,
    by: str = "",
    clock: Clock = time.time,
) -> Step:
    """End the run in `cancelled`, even while another process drives it.

    Args:
        chart: The run's chart (the stored version must match).
        run_id: The run to end.
        store: Where it is stored.
        reason: Why, written into the event.
        by: Who cancelled.
        clock: The time written into the event.

    Returns:
        The record of the `cancel` event.

    Raises:
        RunEndedError: The run had already ended.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State, cancel, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=ScriptedModel([]))
            record = await cancel(chart, run.run_id, store=store, reason="duplicate", by="dana")
            assert (record.run.state, record.run.status) == ("cancelled", "ended")


        anyio.run(main)
        ```
    """
    for _ in range(20):
        run = await _current(chart, run_id, store)
        record = human.cancel(compiled(chart), run, reason=reason, now=clock(), by=by)
        try:
            return await _append_human(chart, store, run, record)
        except ConflictError:  # the driver appended first: cancel from its new state
            continue
    raise ConflictError(f"run {run_id} kept advancing while cancelling; try again")
