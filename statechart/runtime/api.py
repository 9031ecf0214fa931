"""The run API over the driver: start, run to the end, resume, fork, decide, cancel.

Each function loads what it needs from the store, asks the engine for the
transition, and stores it; `drive()` in `driver.py` does the stepping.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import Any

import anyio

from statechart import tracing
from statechart.chart.chart import Chart
from statechart.engine import human
from statechart.engine.reasons import waiting_for_approval
from statechart.engine.tables import compiled
from statechart.errors import ConflictError, RunNotFoundError
from statechart.models.base import Model
from statechart.models.registry import from_spec
from statechart.records.run import Run, Step, Visit
from statechart.runtime import lineage
from statechart.runtime.driver import Clock, drive
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
    """Create and store a new run at the chart's initial state (nothing runs yet)."""
    compiled_chart = compiled(chart)
    run_id = run_id or uuid.uuid4().hex
    ctx = chart.context.model_validate(dict(context or {})).model_dump(mode="json")
    leaf = compiled_chart.initial_leaf
    entered = [
        p
        for p in reversed(compiled_chart.ancestors(leaf))
        if compiled_chart.nodes[p].state is not None
    ]
    owner, state = compiled_chart.owner_state(leaf)
    await store.save_chart(chart.version, chart.describe())
    trace, span = tracing.run_trace_context(chart.name, run_id)
    run = Run(
        run_id=run_id,
        chart=chart.name,
        chart_version=chart.version,
        model=model.spec,
        state=leaf,
        context=ctx,
        visits=dict.fromkeys(entered, 1),
        visit=Visit(state=owner, seq=0) if state.kind == "model" else None,
        lineage_root=run_id,
        created_at=clock(),
        trace=trace,
        status="waiting" if state.kind == "approval" else "running",
        reason=waiting_for_approval(owner) if state.kind == "approval" else "",
    )
    try:
        await store.create(run)
    except BaseException as exc:
        if span is not None:
            tracing.failed(span, exc)
        raise
    finally:
        if span is not None:
            span.end()
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
) -> Run:
    """Drive until the run waits for a human or ends; return the last snapshot."""
    run_id = run.run_id if isinstance(run, Run) else run
    last: Run | None = None
    async for record in drive(
        chart, run_id, store=store, model=model, clock=clock, holder=holder, lease_ttl=lease_ttl
    ):
        last = record.run
    return last if last is not None else await store.load(run_id)


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
) -> Run:
    """Continue a stored run from its exact state until it waits or ends.

    Uses the model the run recorded unless `model` is given; refuses a run stored under
    another chart version unless `migrate` maps it; runs `on_resume` and the entering guard.
    """
    model = model or from_spec((await store.load(run_id)).model, run_id)
    last: Run | None = None
    async for record in drive(
        chart,
        run_id,
        store=store,
        model=model,
        clock=clock,
        holder=holder,
        lease_ttl=lease_ttl,
        resuming=True,
        migrate=migrate,
    ):
        last = record.run
    return last if last is not None else await store.load(run_id)


async def fork(
    chart: Chart,
    run_id: str,
    at_seq: int,
    *,
    store: Store,
    new_run_id: str | None = None,
    clock: Clock = time.time,
) -> Run:
    """Start a new run from the state `run_id` had after event `at_seq` (rebuilt from the
    log), keeping its lineage root; drive it on with `resume` or `run_to_end`."""
    return await lineage.fork(
        chart, run_id, at_seq, store=store, now=clock(), new_run_id=new_run_id
    )


async def approve(
    chart: Chart,
    run_id: str,
    *,
    store: Store,
    by: str,
    note: str = "",
    edits: dict[str, Any] | None = None,
    clock: Clock = time.time,
) -> Step:
    """Record a human approval (optionally editing the pending call's arguments)."""
    return await _decide(chart, run_id, store, True, by, note, edits, clock)


async def reject(
    chart: Chart,
    run_id: str,
    *,
    store: Store,
    by: str,
    reason: str,
    clock: Clock = time.time,
) -> Step:
    """Record a human rejection; the model hears why (or the approval state's reject edge runs)."""
    return await _decide(chart, run_id, store, False, by, reason, None, clock)


async def _decide(
    chart: Chart,
    run_id: str,
    store: Store,
    approved: bool,
    by: str,
    note: str,
    edits: dict[str, Any] | None,
    clock: Clock,
) -> Step:
    run = await store.load(run_id)
    await lineage.require_version(chart, run, store)
    record = human.decide(
        compiled(chart), run, approved=approved, by=by, note=note, edits=edits, now=clock()
    )
    return await _append_human(chart, store, run, record)


async def _append_human(chart: Chart, store: Store, run: Run, record: Step) -> Step:
    """Store a human event, with a transition span in the run's trace."""
    span = tracing.human_transition(compiled(chart), record, time.time_ns())
    if span is not None:
        record = record.with_span(format(span.get_span_context().span_id, "016x"))
    try:
        await store.append(record)
    except BaseException as exc:  # not stored (another writer came first): not a transition
        if span is not None:
            tracing.failed(span, exc)
        raise
    finally:
        if span is not None:
            span.end()
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
    """End the run in `cancelled`, even while another process drives it."""
    for _ in range(20):
        run = await store.load(run_id)
        await lineage.require_version(chart, run, store)
        record = human.cancel(compiled(chart), run, reason=reason, now=clock(), by=by)
        try:
            return await _append_human(chart, store, run, record)
        except ConflictError:  # the driver appended first: cancel from its new state
            continue
    raise ConflictError(f"run {run_id} kept advancing while cancelling; try again")


def run_sync(
    chart: Chart,
    *,
    store: Store,
    model: Model,
    context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    backend: str = "asyncio",
) -> Run:
    """Start (or continue, when `run_id` exists) a run and drive it, from synchronous code."""

    async def main() -> Run:
        run: Run | None = None
        if run_id is not None:
            with contextlib.suppress(RunNotFoundError):
                run = await store.load(run_id)
        if run is None:
            run = await start(chart, store=store, model=model, context=context, run_id=run_id)
        return await run_to_end(chart, run, store=store, model=model)

    result: Run = anyio.run(main, backend=backend)
    return result
