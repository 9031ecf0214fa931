"""The driver: a dumb loop that performs each effect, folds its outcome, and persists.

All awaiting happens here, between transitions, on anyio (asyncio or trio).
`step()` performs one transition and returns its record; `drive()` yields
the record of every transition after handing it to the store.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from opentelemetry.trace import Span

from statechart import failpoints, tracing
from statechart.chart.chart import Chart
from statechart.chart.names import CANCELLED
from statechart.engine import recovery as resuming_
from statechart.engine.advance import advance
from statechart.engine.calls import open_call
from statechart.engine.effects import (
    CallModel,
    Ended,
    Memory,
    Reconciled,
    RunHandler,
    RunTool,
    Wait,
    plan,
)
from statechart.engine.moves import typed_context
from statechart.engine.replay import edges
from statechart.engine.tables import CompiledChart, compiled
from statechart.errors import ConflictError
from statechart.models.base import Model
from statechart.records.messages import Message
from statechart.records.run import Run, Step, fields_set
from statechart.runtime import lineage
from statechart.runtime.lineage import Migration
from statechart.store.base import DEFAULT_LEASE_TTL, Lease, Store

Clock = Callable[[], float]


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
    chart: Chart,
    run: Run,
    *,
    model: Model,
    session: Session,
    clock: Clock = time.time,
) -> Step | None:
    """Advance `run` by exactly one transition; None when it is waiting or ended.

    `session` holds this visit's transcript and the executed fingerprints; build it with
    `load_session(store, run)` and keep it in line with `session.absorb(run, step)`.
    """
    cc = compiled(chart)
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
        object.__setattr__(
            record.event,
            "__pydantic_fields_set__",
            fields_set(record.event.__pydantic_fields_set__ | {"span"}),
        )
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
    chart: Chart,
    run: Run | str,
    *,
    store: Store,
    model: Model,
    clock: Clock = time.time,
    holder: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    resuming: bool = False,
    migrate: Migration | None = None,
) -> AsyncGenerator[Step, None]:
    """Step the run until it waits or ends, storing and yielding each transition's record.

    Holds the run's lease throughout (`LeaseHeldError` if another driver has it). If the
    last holder never released it, an open intent is settled by its tool's retry policy.
    With `resuming`, the current state's `on_resume` refresh and entering guard run first.
    Close the iterator (`contextlib.aclosing`) when you stop early, to release the lease.
    """
    run_id = run if isinstance(run, str) else run.run_id
    cc = compiled(chart)
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
        last = (
            (await store.events(run_id, after=run.seq - 1))[-1:] if (run.seq and run.trace) else []
        )
        rt = session.trace = tracing.RunTrace(cc, run, model.spec, last[0].span if last else None)
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
    if (
        lease.took_over
        and lease.previous_seq == run.seq
        and head is not None
        and run.state.endswith(".act")
        and run.doubt != head.call.id
    ):
        return resuming_.takeover(cc, run, lease.previous, now=clock())
    return None


def default_holder() -> str:
    """A lease holder name that says which process holds it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def _refresh_inputs(
    chart: Chart,
    run: Run,
    store: Store,
) -> tuple[dict[str, Any], str | None] | None:
    """On resume: the state's `on_resume` patch, then whether the guard of the edge that
    entered it still allows it; None when there is nothing to record."""
    if run.status != "running":
        return None
    cc = compiled(chart)
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
        guarded = any(
            t.dest == owner and t.edge is not None and t.edge.guard is not None
            for t in edges(cc).values()
        )
        entering = await lineage.entering_edge(store, run, owner) if guarded else None
        problem = resuming_.refresh_problem(cc, run, owner, state, patch, entering)
    if state.on_resume is None and problem is None:
        return None
    return patch, problem


async def load_session(store: Store, run: Run) -> Session:
    """Rebuild what `drive` keeps in memory from the store (on start and on resume)."""
    transcript = await lineage.visit_transcript(store, run) if run.visit else []
    return Session(transcript=transcript, fingerprints=await lineage.fingerprints(store, run))
