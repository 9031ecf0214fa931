"""The driver: a dumb loop that performs each effect, folds its outcome, and persists.

All awaiting happens here, between transitions, on anyio (asyncio or trio).
`step()` performs one transition and returns its record; `drive()` yields
the record of every transition after handing it to the store.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from . import human
from .chart import Chart
from .effects import CallModel, Ended, Memory, RunHandler, RunTool, Wait, plan
from .errors import RunNotFoundError
from .models.base import Message, Model
from .run import Run, Step, Visit
from .step import advance
from .store.base import Store

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
    run = Run(
        run_id=run_id, chart=chart.name, chart_version=chart.version, model=model.spec,
        state=leaf, context=ctx, visits=dict.fromkeys(entered, 1),
        visit=Visit(state=owner, seq=0) if state.kind == "model" else None,
        lineage_root=run_id, created_at=clock(),
        status="waiting" if state.kind == "approval" else "running",
        reason=f"waiting for approval in '{owner}'" if state.kind == "approval" else "",
    )
    await store.create(run)
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
    outcome = await _perform(effect, model)
    wall_ms = session.carry.charge(time.monotonic() - started)
    return advance(cc, run, memory, effect, outcome, now=clock(), wall_ms=wall_ms)


async def _perform(effect: Any, model: Model) -> Any:
    try:
        if isinstance(effect, CallModel):
            return await model.complete(effect.request)
        if isinstance(effect, RunTool):
            return await effect.tool.invoke(effect.parsed, effect.key)
        if isinstance(effect, RunHandler):
            assert effect.state.handler is not None
            return await effect.state.handler(effect.context)
    except Exception as exc:
        return exc
    return None


async def drive(
    chart: Chart, run: Run | str, *, store: Store, model: Model, clock: Clock = time.time,
) -> AsyncIterator[Step]:
    """Step the run until it waits or ends, storing and yielding each transition's record."""
    if isinstance(run, str):
        run = await store.load(run)
    session = await load_session(store, run)
    while True:
        record = await step(chart, run, model=model, session=session, clock=clock)
        if record is None:
            return
        await store.append(record)
        session.absorb(run, record)
        run = record.run
        yield record


async def load_session(store: Store, run: Run) -> Session:
    """Rebuild what `drive` keeps in memory from the store (on start and on resume)."""
    transcript = await store.transcript(run.run_id, run.visit.seq) if run.visit else []
    return Session(transcript=transcript, fingerprints=await store.fingerprints(run.run_id))


async def run_to_end(
    chart: Chart, run: Run | str, *, store: Store, model: Model, clock: Clock = time.time,
) -> Run:
    """Drive until the run waits for a human or ends; return the last snapshot."""
    last = run if isinstance(run, Run) else await store.load(run)
    async for record in drive(chart, last, store=store, model=model, clock=clock):
        last = record.run
    return last


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
    record = human.decide(chart.compiled, run, approved=approved, by=by, note=note, edits=edits,
                          now=clock())
    await store.append(record)
    return record


async def cancel(
    chart: Chart, run_id: str, *, store: Store, reason: str, clock: Clock = time.time,
) -> Step:
    """End the run in `cancelled`."""
    run = await store.load(run_id)
    record = human.cancel(chart.compiled, run, reason=reason, now=clock())
    await store.append(record)
    return record


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
