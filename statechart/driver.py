"""The driver: a dumb loop that performs each effect, folds its outcome, and persists.

All awaiting happens here, between transitions, on anyio (asyncio or trio).
`step()` performs one transition and returns its record; `drive()` yields
the record of every transition after handing it to the store.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from opentelemetry.trace import Span

from . import failpoints, human, lineage, tracing
from . import resume as resuming_
from .chart import CANCELLED, Chart
from .effects import CallModel, Ended, Memory, Reconciled, RunHandler, RunTool, Wait, plan
from .errors import ConflictError, RunNotFoundError
from .intents import open_call
from .lineage import Migration
from .machine import CompiledChart
from .models.base import Message, Model
from .models.registry import from_spec
from .moves import typed_context
from .replay import edges
from .run import Run, Step, Visit, fields_set
from .step import advance
from .store.base import DEFAULT_LEASE_TTL, Lease, Store

Clock = Callable[[], float]


async def start(
    chart: Chart, *, store: Store, model: Model, context: Mapping[str, Any] | None = None,
    run_id: str | None = None, clock: Clock = time.time,
) -> Run:
    """Create and store a new run at the chart's initial state (nothing runs yet)."""
    cc = chart.compiled
    run_id = run_id or uuid.uuid4().hex
    ctx = chart.context.model_validate(dict(context or {})).model_dump(mode="json")
    leaf = cc.initial_leaf
    entered = [p for p in reversed(cc.ancestors(leaf)) if cc.nodes[p].state is not None]
    owner, state = cc.owner_state(leaf)
    await store.save_chart(chart.version, chart.describe())
    trace, span = tracing.run_trace_context(chart.name, run_id)
    run = Run(
        run_id=run_id, chart=chart.name, chart_version=chart.version, model=model.spec,
        state=leaf, context=ctx, visits=dict.fromkeys(entered, 1),
        visit=Visit(state=owner, seq=0) if state.kind == "model" else None,
        lineage_root=run_id, created_at=clock(),
        trace=trace,
        status="waiting" if state.kind == "approval" else "running",
        reason=f"waiting for approval in '{owner}'" if state.kind == "approval" else "",
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


@dataclass
class _Carry:
    """Sub-millisecond wall time not yet charged, so many short steps still add up."""

    ms: float = 0.0

    def charge(self, seconds: float) -> int:
        self.ms += seconds * 1000.0
        whole = int(self.ms)
        self.ms -= whole
        return whole


@dataclass
class Session:
    """What `drive` keeps in memory for one run: this visit's transcript, fingerprints."""

    transcript: list[Message] = field(default_factory=list)
    fingerprints: set[str] = field(default_factory=set)
    carry: _Carry = field(default_factory=_Carry)
    trace: tracing.RunTrace | None = None
    """The open spans of the drive, when it is traced."""
    span: Span | None = None
    """The span of the transition `step()` just made, ended once it is stored."""

    def absorb(self, before: Run, step: Step) -> None:
        """Keep the transcript and fingerprints in line with the run after `step`."""
        after = step.run
        if after.visit is None or before.visit is None or after.visit.seq != before.visit.seq:
            self.transcript = []
        elif step.delta:
            self.transcript.extend(step.delta)
        if step.event.fingerprint is not None:
            self.fingerprints.add(step.event.fingerprint)


async def step(
    chart: Chart, run: Run, *, model: Model, session: Session, clock: Clock = time.time,
) -> Step | None:
    """Advance `run` by exactly one transition; None when it is waiting or ended.

    `session` holds this visit's transcript and the executed fingerprints; build it with
    `load_session(store, run)` and keep it in line with `session.absorb(run, step)`.
    """
    cc = chart.compiled
    started = time.monotonic()
    memory = Memory(session.transcript, session.fingerprints)
    effect = plan(cc, run, memory)
    if isinstance(effect, (Wait, Ended)):
        return None
    rt = session.trace if session.trace is not None and session.trace.on else None
    if rt is None:
        outcome = await _perform(effect, model)
    else:
        if isinstance(effect, CallModel):
            span = rt.effect_start(run)
        elif isinstance(effect, RunTool):
            span = rt.effect_start(run, effect.tool.name, effect.call.id, effect.arguments)
        else:
            span = rt.effect_start(run, handler=True)
        try:
            outcome = await _perform(effect, model)
        except BaseException as exc:  # cancelled mid-call: the call's span says so
            rt.effect_end(span, exc)
            raise
        rt.effect_end(span, outcome)
    wall_ms = session.carry.charge(time.monotonic() - started)
    start_ns = time.time_ns()
    record = advance(cc, run, memory, effect, outcome, now=clock(), wall_ms=wall_ms)
    if rt is None:
        return record
    session.span = rt.transition(run, record, start_ns)
    return _stamped(record, session.span)


def _stamped(record: Step, span: Span | None) -> Step:
    """The record with its transition span's id written into its event, which `advance`
    has just built and nobody else holds yet (so no copy is made)."""
    if span is not None:
        record.event.__dict__["span"] = format(span.get_span_context().span_id, "016x")
        object.__setattr__(record.event, "__pydantic_fields_set__",
                           fields_set(record.event.__pydantic_fields_set__ | {"span"}))
    return record


async def _perform(effect: Any, model: Model) -> Any:
    try:
        if isinstance(effect, CallModel):
            return await model.complete(effect.request)
        if isinstance(effect, RunTool):
            if effect.doubt == "reconcile":
                try:
                    found = await effect.tool.reconciled(effect.parsed, effect.key)
                except Exception as exc:
                    return Reconciled(None, failed=exc)
                if found is not None:
                    return Reconciled(found)
            out = await effect.tool.invoke(effect.parsed, effect.key)
            failpoints.hit("tool.returned")
            return out
        if isinstance(effect, RunHandler):
            assert effect.state.handler is not None
            return await effect.state.handler(effect.context)
    except Exception as exc:
        return exc
    return None


async def drive(
    chart: Chart, run: Run | str, *, store: Store, model: Model, clock: Clock = time.time,
    holder: str | None = None, lease_ttl: float = DEFAULT_LEASE_TTL, resuming: bool = False,
    migrate: Migration | None = None,
) -> AsyncGenerator[Step, None]:
    """Step the run until it waits or ends, storing and yielding each transition's record.

    Holds the run's lease throughout (`LeaseHeldError` if another driver has it). If the
    last holder never released it, an open intent is settled by its tool's retry policy.
    With `resuming`, the current state's `on_resume` refresh and entering guard run first.
    Close the iterator (`contextlib.aclosing`) when you stop early, to release the lease.
    """
    run_id = run if isinstance(run, str) else run.run_id
    cc = chart.compiled
    lease = await store.acquire(run_id, holder or default_holder(), lease_ttl)
    in_flight = False
    dirty = lease.took_over  # a takeover not yet recorded: keep the lease looking abandoned
    rt: tracing.RunTrace | None = None
    failure: BaseException | None = None
    try:
        # Everything is read (and checked) before anything is written.
        run = await store.load(run_id)
        migrated = await lineage.checked_version(chart, run, store, migrate, clock())
        current = migrated.run if migrated is not None else run
        session = await load_session(store, current)
        refresh = await _refresh_inputs(chart, current, store) if resuming else None
        # The last span to link to: only a run that was traced from its start has one.
        last = (await store.events(run_id, after=run.seq - 1))[-1:] if (
            run.seq and run.trace) else []
        rt = session.trace = tracing.RunTrace(cc, run, model.spec,
                                              last[0].span if last else None)
        for kind in ("migrate", "takeover", "refresh", "model"):
            found_pre: Step | None = None
            if kind == "migrate":
                found_pre = migrated
            elif kind == "takeover":
                found_pre = _takeover(cc, run, lease, clock)
            elif kind == "refresh":
                dirty = False  # the takeover, if any, is recorded
                if refresh is not None:
                    found_pre = resuming_.refreshed(cc, run, *refresh, now=clock())
            elif model.spec != run.model and run.status != "ended":
                found_pre = resuming_.switched(cc, run, model.spec, now=clock())
            if found_pre is None:
                continue
            rt.enter(run)
            span = rt.transition(run, found_pre, time.time_ns())
            record = _stamped(found_pre, span)
            try:
                await store.append(record, lease)
            except BaseException as exc:
                rt.transition_end(span, record, stored=False, error=exc)
                raise
            rt.transition_end(span, record)
            session.absorb(run, record)
            run = record.run
            yield record
        dirty = False
        while True:
            in_flight = run.state.endswith(".act")
            rt.enter(run)
            found = await step(chart, run, model=model, session=session, clock=clock)
            if found is None:
                in_flight = False
                return
            record = found
            try:
                await store.append(record, lease)
            except ConflictError as exc:
                rt.transition_end(session.span, record, stored=False, error=exc)
                latest = await store.load(run_id)
                if latest.state != CANCELLED:
                    raise
                late = resuming_.late_result(cc, latest, record, now=clock())
                if late is not None:  # the call finished after the cancel: keep its result
                    late_span = rt.transition(latest, late, time.time_ns())
                    late = _stamped(late, late_span)
                    await store.append(late, lease)
                    rt.transition_end(late_span, late)
                    in_flight = False
                    yield late
                run = latest
                return
            except BaseException as exc:
                rt.transition_end(session.span, record, stored=False, error=exc)
                raise
            rt.transition_end(session.span, record)
            if record.opened is not None:
                failpoints.hit("intent.recorded")
            in_flight = False
            session.absorb(run, record)
            run = record.run
            yield record
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):  # closing the iterator early is no failure
            failure = exc
        raise
    finally:
        if rt is not None:
            rt.close(run if isinstance(run, Run) else None, failure)
        with anyio.CancelScope(shield=True):
            await store.release(lease, clean=not (in_flight or dirty))


def _takeover(cc: CompiledChart, run: Run, lease: Lease, clock: Clock) -> Step | None:
    """The takeover event, when the last holder died while the head call could run."""
    head = open_call(run)
    if (lease.took_over and lease.previous_seq == run.seq and head is not None
            and run.state.endswith(".act") and run.doubt != head.call.id):
        return resuming_.takeover(cc, run, lease.previous, now=clock())
    return None


def default_holder() -> str:
    """A lease holder name that says which process holds it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def _refresh_inputs(
    chart: Chart, run: Run, store: Store,
) -> tuple[dict[str, Any], str | None] | None:
    """On resume: the state's `on_resume` patch, then whether the guard of the edge that
    entered it still allows it; None when there is nothing to record."""
    if run.status != "running":
        return None
    cc = chart.compiled
    owner, state = cc.owner_state(run.state)
    patch: dict[str, Any] = {}
    problem = None
    if state.on_resume is not None:
        try:
            found = await state.on_resume(typed_context(cc, owner, run.context))
            patch = dict(found or {})
        except Exception as exc:
            problem = f"on_resume of '{owner}' raised {type(exc).__name__}: {exc}"
    if problem is None:
        guarded = any(t.dest == owner and t.edge is not None and t.edge.guard is not None
                      for t in edges(cc).values())
        entering = await lineage.entering_edge(store, run, owner) if guarded else None
        problem = resuming_.refresh_problem(cc, run, owner, state, patch, entering)
    if state.on_resume is None and problem is None:
        return None
    return patch, problem


async def load_session(store: Store, run: Run) -> Session:
    """Rebuild what `drive` keeps in memory from the store (on start and on resume)."""
    transcript = await lineage.visit_transcript(store, run) if run.visit else []
    return Session(transcript=transcript, fingerprints=await lineage.fingerprints(store, run))


async def run_to_end(
    chart: Chart, run: Run | str, *, store: Store, model: Model, clock: Clock = time.time,
    holder: str | None = None, lease_ttl: float = DEFAULT_LEASE_TTL,
) -> Run:
    """Drive until the run waits for a human or ends; return the last snapshot."""
    run_id = run.run_id if isinstance(run, Run) else run
    last: Run | None = None
    async for record in drive(chart, run_id, store=store, model=model, clock=clock,
                              holder=holder, lease_ttl=lease_ttl):
        last = record.run
    return last if last is not None else await store.load(run_id)


async def resume(
    chart: Chart, run_id: str, *, store: Store, model: Model | None = None,
    migrate: Migration | None = None, clock: Clock = time.time, holder: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
) -> Run:
    """Continue a stored run from its exact state until it waits or ends.

    Uses the model the run recorded unless `model` is given; refuses a run stored under
    another chart version unless `migrate` maps it; runs `on_resume` and the entering guard.
    """
    model = model or from_spec((await store.load(run_id)).model, run_id)
    last: Run | None = None
    async for record in drive(chart, run_id, store=store, model=model, clock=clock,
                              holder=holder, lease_ttl=lease_ttl, resuming=True,
                              migrate=migrate):
        last = record.run
    return last if last is not None else await store.load(run_id)


async def fork(
    chart: Chart, run_id: str, at_seq: int, *, store: Store, new_run_id: str | None = None,
    clock: Clock = time.time,
) -> Run:
    """Start a new run from the state `run_id` had after event `at_seq` (rebuilt from the
    log), keeping its lineage root; drive it on with `resume` or `run_to_end`."""
    return await lineage.fork(chart, run_id, at_seq, store=store, now=clock(),
                              new_run_id=new_run_id)


async def approve(
    chart: Chart, run_id: str, *, store: Store, by: str, note: str = "",
    edits: dict[str, Any] | None = None, clock: Clock = time.time,
) -> Step:
    """Record a human approval (optionally editing the pending call's arguments)."""
    return await _decide(chart, run_id, store, True, by, note, edits, clock)


async def reject(
    chart: Chart, run_id: str, *, store: Store, by: str, reason: str, clock: Clock = time.time,
) -> Step:
    """Record a human rejection; the model hears why (or the approval state's reject edge runs)."""
    return await _decide(chart, run_id, store, False, by, reason, None, clock)


async def _decide(
    chart: Chart, run_id: str, store: Store, approved: bool, by: str, note: str,
    edits: dict[str, Any] | None, clock: Clock,
) -> Step:
    run = await store.load(run_id)
    await lineage.require_version(chart, run, store)
    record = human.decide(chart.compiled, run, approved=approved, by=by, note=note, edits=edits,
                          now=clock())
    return await _append_human(chart, store, run, record)


async def _append_human(chart: Chart, store: Store, run: Run, record: Step) -> Step:
    """Store a human event, with a transition span in the run's trace."""
    span = tracing.human_transition(chart.compiled, record, time.time_ns())
    record = _stamped(record, span)
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
    chart: Chart, run_id: str, *, store: Store, reason: str, by: str = "",
    clock: Clock = time.time,
) -> Step:
    """End the run in `cancelled`, even while another process drives it."""
    for _ in range(20):
        run = await store.load(run_id)
        await lineage.require_version(chart, run, store)
        record = human.cancel(chart.compiled, run, reason=reason, now=clock(), by=by)
        try:
            return await _append_human(chart, store, run, record)
        except ConflictError:  # the driver appended first: cancel from its new state
            continue
    raise ConflictError(f"run {run_id} kept advancing while cancelling; try again")


def run_sync(
    chart: Chart, *, store: Store, model: Model, context: Mapping[str, Any] | None = None,
    run_id: str | None = None, backend: str = "asyncio",
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
