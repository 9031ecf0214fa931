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
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
from msgspec.structs import replace

from statechart import failpoints, tracing
from statechart.chart.chart import Chart
from statechart.chart.names import CANCELLED
from statechart.chart.tool_context import ToolContext
from statechart.engine import recovery as resuming_
from statechart.engine import regions
from statechart.engine.calls import open_call
from statechart.engine.deadlines import Limit, limit
from statechart.engine.effects import (
    CallModel,
    Ended,
    Exhaust,
    Reconciled,
    Regions,
    RunHandler,
    RunTool,
    Sleep,
    Wait,
)
from statechart.engine.moves import typed_context
from statechart.engine.scopes import context_at
from statechart.engine.session import Session
from statechart.engine.strict import unpriced
from statechart.engine.tables import CompiledChart, compiled
from statechart.engine.timers import due_timer, woken
from statechart.engine.transition import advance, plan
from statechart.errors import ConflictError, UnpricedModelError
from statechart.models.base import Model
from statechart.records.codec import checked_reply
from statechart.records.estimate import Price
from statechart.records.live import LiveEvent
from statechart.records.run import Run, Step
from statechart.runtime import heartbeat, lineage, threads
from statechart.runtime.current import current as folded
from statechart.runtime.hooks import StepHooks
from statechart.runtime.lineage import Migration
from statechart.runtime.live import Callback, Sink
from statechart.runtime.observer import Observer
from statechart.runtime.parallel import Phase, in_regions, region_step
from statechart.runtime.stand_in import RUN, STAND_IN
from statechart.store.base import DEFAULT_LEASE_TTL, Lease, Store

Clock = Callable[[], float]
_ON = object()
"""The run itself has a step to make (`_Drive._parallel`)."""
DEFAULT_MAX_SLEEP = 60.0
"""Seconds a drive waits in process for a sleeping run's timer; past that it stops."""


async def step(
    chart: Chart,
    run: Run,
    *,
    model: Model,
    session: Session,
    clock: Clock = time.time,
    hooks: StepHooks | None = None,
) -> Step | None:
    """Advance `run` by exactly one transition; None when it is waiting or ended.

    Args:
        chart: The chart the run belongs to.
        run: The run as it is now (not stored by this function).
        model: Answers the request when the state calls the model.
        session: This visit's transcript and the executed fingerprints; build it with
            `load_session(store, run)` and keep it in line with `session.absorb(run, step)`.
        clock: The time written into the event.
        hooks: Told of the step, its effect and its record (tracing uses them).

    Returns:
        The record of the transition (event, run after it, transcript delta), or None.
    """
    return await _stepped(chart, run, model, session, clock, hooks, None)


async def _stepped(
    chart: Chart,
    run: Run,
    model: Model,
    session: Session,
    clock: Clock,
    hooks: StepHooks | None,
    observer: Observer | None,
) -> Step | None:
    """`step()`, its call told to `observer` (a streamed reply, a tool's progress)."""
    compiled_chart = compiled(chart)
    if run.regions and in_regions(compiled_chart, run, session, clock()):
        return await region_step(
            compiled_chart,
            run,
            session,
            clock,
            lambda view, sub: _stepped(chart, view, model, sub, clock, hooks, observer),
        )
    started = time.monotonic()
    if hooks is not None:
        hooks.before_step(run=run)
    if run.timers and run.wake is not None:
        fired = due_timer(compiled_chart, run, clock())
        if fired is not None:
            return (
                fired
                if hooks is None
                else hooks.after_step(before=run, record=fired, started_ns=time.time_ns())
            )
    effect = plan(compiled_chart, run, session)
    if isinstance(effect, (Wait, Ended)):
        return None
    if isinstance(effect, Sleep):
        if effect.until > clock():
            return None
        woke = woken(compiled_chart, run, clock())
        return (
            woke
            if hooks is None
            else hooks.after_step(before=run, record=woke, started_ns=time.time_ns())
        )
    span = None
    within = None if compiled_chart.untimed else limit(compiled_chart, run, effect)
    if observer is not None:
        observer.paused = 0.0
    if hooks is None:
        call = (
            _perform(effect, model)
            if observer is None
            else _observed(effect, model, observer, run, None)
        )
        outcome = await (call if within is None else _limited(call, within, observer))
    else:
        span = hooks.effect_started(run=run, effect=effect)
        call = (
            _perform(effect, model)
            if observer is None
            else _observed(effect, model, observer, run, hooks)
        )
        try:
            outcome = await (call if within is None else _limited(call, within, observer))
        except BaseException as exc:  # cancelled mid-call: the hooks hear of it
            hooks.effect_ended(outcome=exc)
            raise
        hooks.effect_ended(outcome=outcome)
    paused = observer.paused if observer is not None else 0.0  # a consumer's time is not the run's
    wall_ms = session.charge_wall(time.monotonic() - started - paused)
    started_ns = time.time_ns()
    record = advance(compiled_chart, run, effect, outcome, now=clock(), wall_ms=wall_ms, span=span)
    if hooks is None:
        return record
    return hooks.after_step(before=run, record=record, started_ns=started_ns)


async def _limited(call: Awaitable[Any], limit: Limit, observer: Observer | None = None) -> Any:
    """The outcome of the effect's `call`, a `CallTimeoutError` when `limit` cut it off
    (the time an observer's consumer takes is added to the limit)."""
    with anyio.move_on_after(limit.seconds) as scope:
        if observer is None:
            return await call
        observer.scope = scope
        try:
            return await call
        finally:
            observer.scope = None
    if scope.cancelled_caught:
        return limit.error()
    return None  # pragma: no cover  (the scope only ends early by its deadline)


async def _observed(
    effect: Any, model: Model, observer: Observer, run: Run, hooks: StepHooks | None
) -> Any:
    """`_perform`, watched: the call told to the observer as it starts, a model's reply
    streamed (when the model can) and a tool given a `ToolContext` that reports progress."""
    call_id = await observer.started(run, effect)
    kind = type(effect)
    try:
        if kind is CallModel and hasattr(model, "stream") and observer.wants_tokens:
            try:
                first = getattr(hooks, "first_chunk", None)
                return checked_reply(
                    await observer.streamed(model, effect.request, run, call_id, first)
                )
            except Exception as exc:
                return exc
        if kind is RunTool and effect.tool.context_parameter is not None:
            return await _perform(effect, model, observer.tool_context(run, effect, call_id))
        return await _perform(effect, model)
    finally:
        observer.active.discard(call_id)  # over: a thread it left behind reports nothing


async def _perform(effect: Any, model: Model, context: ToolContext | None = None) -> Any:
    """The outcome of the effect's call: its value, or the exception it raised."""
    try:
        if isinstance(effect, CallModel):
            return checked_reply(await model.complete(effect.request))
        if isinstance(effect, RunTool):
            answer = STAND_IN.get()
            if answer is not None:
                return answer(effect)
            tool = effect.tool
            if effect.doubt == "reconcile":
                try:
                    found = await _reconciled(tool, effect)
                except Exception as exc:
                    return Reconciled(None, failed=exc)
                if found is not None:
                    return Reconciled(found)
            if tool.threaded:
                out = await threads.call(
                    tool.fn, **tool.keywords(effect.parsed, effect.key, context)
                )
            else:
                out = await tool.invoke(effect.parsed, effect.key, context)
            failpoints.hit("tool.returned")
            return out
        if isinstance(effect, RunHandler):
            assert effect.state.handler is not None
            answer = STAND_IN.get()
            if answer is not None:
                found = answer(effect)
                if found is not RUN:
                    return found
            return await threads.call(effect.state.handler, effect.context)
    except Exception as exc:
        return exc
    return None


async def _reconciled(tool: Any, effect: RunTool) -> Any:
    hook = tool.reconcile
    return await threads.call(hook, **tool.reconcile_keywords(effect.parsed, effect.key))


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
    max_sleep: float = DEFAULT_MAX_SLEEP,
    on: Callable[[LiveEvent], Any] | Sink | None = None,
) -> AsyncGenerator[Step, None]:
    """Step the run until it waits or ends, storing and yielding each transition's record.

    Holds the run's lease throughout (`LeaseHeldError` if another driver has it), renewed
    every third of `lease_ttl` by the event loop's heartbeat, also while a call is in
    flight. If the last holder never released it, an open intent is settled by its
    tool's retry policy.
    With `resuming`, the current state's `on_resume` refresh and entering guard run first.
    A run put to sleep until a failed call's next attempt is woken in this process when
    that is due within `max_sleep` seconds; a later one ends the drive, the run `sleeping`
    (resume it when it is due, or let a worker).
    Close the iterator (`contextlib.aclosing`) when you stop early, to release the lease.
    With `on=`, a function (or a `watch` stream) is told each call as it starts, a model's
    reply as it streams, a tool's progress, each stored step and the run waiting or
    ending (`statechart.records.live`).

    Yields:
        The record of every transition, once it is stored.
    """
    run_id = run if isinstance(run, str) else run.run_id
    lease = await store.acquire(run_id, holder or default_holder(), lease_ttl)
    # a takeover not yet recorded keeps the lease looking abandoned (`dirty`)
    d = _Drive(chart, compiled(chart), store, model, clock, lease, dirty=lease.took_over)
    d.max_sleep = max_sleep
    d.observer = observer(on, lease)
    heartbeat.join(d)
    try:
        async for opening in d.prelude(run_id, resuming, migrate):
            yield opening
        d.dirty = False
        while (record := await d.next()) is not None:
            yield record
        if d.observer is not None:
            await d.observer.stopped(d.run)
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):  # closing the iterator early is no failure
            d.failure = exc
        raise
    finally:
        await d.close()


async def drive_to_end(
    chart: Chart,
    run_id: str,
    *,
    each: Callable[[Step], bool] | None = None,
    store: Store,
    model: Model,
    clock: Clock = time.time,
    holder: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    resuming: bool = False,
    migrate: Migration | None = None,
    lease: Lease | None = None,
    max_sleep: float = DEFAULT_MAX_SLEEP,
    on: Callable[[LiveEvent], Any] | Sink | None = None,
) -> Run | None:
    """`drive` until the run waits or ends (or `each(record)` returns True); the run after
    the last stored step, or None when nothing was stepped. The same as iterating `drive`,
    one coroutine fewer a step. Given a `lease` already taken (a worker's claim), it drives
    under that one and releases it at the end."""
    if lease is None:
        lease = await store.acquire(run_id, holder or default_holder(), lease_ttl)
    d = _Drive(chart, compiled(chart), store, model, clock, lease, dirty=lease.took_over)
    d.max_sleep = max_sleep
    d.observer = observer(on, lease)
    heartbeat.join(d)
    last: Run | None = None
    told = False  # `each` raising is the caller's stop, not the drive's failure
    try:
        async with contextlib.aclosing(d.prelude(run_id, resuming, migrate)) as openings:
            async for opening in openings:
                last = opening.run
                told = True
                if each is not None and each(opening):
                    return last
                told = False
        d.dirty = False
        while (record := await d.next()) is not None:
            last = record.run
            told = True
            if each is not None and each(record):
                break
            told = False
        else:
            if d.observer is not None:
                await d.observer.stopped(d.run)
    except BaseException as exc:
        if not told:
            d.failure = exc
        raise
    finally:
        await d.close()
    if d.cancelled and d.run is not None and last is not None and d.run.seq > last.seq:
        return d.run  # another writer came first: the run as it left it
    return last


@dataclass(slots=True)
class _Drive:
    """One drive of one run: what it holds between steps and what releasing must know."""

    chart: Chart
    compiled_chart: CompiledChart
    store: Store
    model: Model
    clock: Clock
    lease: Lease
    dirty: bool = False
    """True while a takeover is not yet recorded: release leaves the lease abandoned."""
    in_flight: bool = False
    """True while a tool call may be running: release leaves the lease abandoned."""
    run: Run | None = None
    session: Session = field(default_factory=Session)
    trace: tracing.RunTrace | None = None
    hooks: StepHooks | None = None
    observer: Observer | None = None
    """Told of each call, streamed token, progress report and stored step (`on=`)."""
    failure: BaseException | None = None
    cancelled: bool = False
    """Set once another writer cancelled the run: nothing more is stepped."""
    due: float = 0.0
    """When the lease is next to be renewed (monotonic seconds)."""
    beating: bool = True
    """False once the drive is closing: the lease is renewed no more."""
    max_sleep: float = 60.0
    """A sleeping run due within this many seconds is woken in this drive."""
    backlog: list[Step] = field(default_factory=list)
    """Steps a parallel state's regions stored, not yet handed out."""
    renewing: anyio.Lock | None = None
    """Held while renewing: releasing waits for a renewal under way. Made by the first
    renewal (a lock costs ~800 bytes, and most drives end before their first)."""

    def __post_init__(self) -> None:
        self.due = time.monotonic() + self.every

    @property
    def every(self) -> float:
        """Seconds between renewals: a third of the lease's TTL."""
        return self.lease.ttl / 3

    async def renew(self) -> None:
        """Extend the lease (`LeaseLostError` once another driver holds it)."""
        if self.renewing is None:
            self.renewing = anyio.Lock()
        async with self.renewing:
            if self.beating:
                await self.store.renew(self.lease)
                self.due = time.monotonic() + self.every

    async def prelude(
        self, run_id: str, resuming: bool, migrate: Migration | None
    ) -> AsyncGenerator[Step, None]:
        """Read and check everything first; then store the events a drive opens with: a
        migration, a takeover, a resume refresh, a switch of model (each only if due)."""
        loaded = await self.store.load(run_id)
        run = self.run = folded(self.chart, loaded)
        migrated = await lineage.checked_version(self.chart, run, self.store, migrate, self.clock())
        current = migrated.run if migrated is not None else run
        self.session = await load_session(self.store, current)
        self.session.price = priced(self.compiled_chart, self.model)
        refresh = await _refresh_inputs(self.chart, current, self.store) if resuming else None
        # The last span to link to: only a run that was traced from its start has one.
        last = (
            list(loaded.tail[-1:]) or (await self.store.events(run_id, after=run.seq - 1))[-1:]
            if run.seq and run.trace
            else []
        )
        traced = tracing.RunTrace(
            self.compiled_chart, run, self.model.spec, last[0].span if last else None
        )
        if traced.on:
            self.trace = self.hooks = traced
        else:  # nothing records: its (no-op) span ends now, and the drive keeps nothing
            traced.close(None)
        compiled_chart, now = self.compiled_chart, self.clock
        openers: list[Callable[[Run], Step | list[Step] | None]] = [
            lambda r: migrated,
            lambda r: _takeover(compiled_chart, r, self.lease, now),
            lambda r: (
                None
                if refresh is None
                else resuming_.refreshed(compiled_chart, r, *refresh, now=now())
            ),
            lambda r: (
                resuming_.switched(compiled_chart, r, self.model.spec, now=now())
                if self.model.spec != r.model and r.status != "ended"
                else None
            ),
        ]
        for opener in openers:
            found = opener(self.run)
            for record in found if isinstance(found, list) else (found,):
                if record is not None:
                    yield await self._stored(self._made(self.run, record))
            if opener is openers[1]:
                self.dirty = False  # the takeover, if any, is stored

    async def next(self) -> Step | None:
        """Make and store the next transition; None once the run waits or ends."""
        if self.backlog:
            return self.backlog.pop(0)
        run = self.run
        if run is None or self.cancelled:
            return None
        if run.regions:
            found = await self._parallel(run)
            if found is not _ON:
                return cast("Step | None", found)
        if run.status == "sleeping":
            return await self._woken(run)
        if run.timers and run.wake is not None:
            fired = due_timer(self.compiled_chart, run, self.clock())
            if fired is not None:  # an `after=` edge whose time has come
                return await self._timed(self._made(run, fired))
        if time.monotonic() >= self.due:  # steps with no I/O never yield to the heartbeat
            await self.renew()
        self.in_flight = run.state.endswith(".act")
        if self.hooks is None and self.observer is None:
            record = await self._step(run)
        else:
            record = await _stepped(
                self.chart, run, self.model, self.session, self.clock, self.hooks, self.observer
            )
        if record is None:
            self.in_flight = False
            return None
        try:
            stored = await self._stored(record, conflict_told=False)
        except ConflictError as exc:
            return await self._after_cancel(record, exc)
        if stored.opened is not None:
            failpoints.hit("intent.recorded")
        self.in_flight = False
        return stored

    async def _parallel(self, run: Run) -> Step | object | None:
        """In a parallel state: drive its regions at once (`runtime.parallel`) and hand out
        the steps they stored; `_ON` when the run itself has a step to make (the join, a
        route), None once it waits."""
        fired = self._own_timer(run)
        if fired is not None:
            return await self._timed(fired)
        if run.status == "waiting":
            return None
        if run.status == "running" and not isinstance(
            plan(self.compiled_chart, run, self.session), Regions
        ):
            return _ON
        phase = Phase(self)
        records = await phase.run()
        if records:
            self.backlog = records[1:]
            return records[0]
        if self.run is not None and not self.cancelled:
            fired = self._own_timer(self.run)  # it came due while the regions went on
            if fired is not None:
                return await self._timed(fired)
        if phase.blocked is not None and self.run is not None and not self.cancelled:
            spent = Exhaust(phase.blocked)  # a level around the state is spent: route it
            record = advance(self.compiled_chart, self.run, spent, None, now=self.clock())
            return await self._stored(self._made(self.run, record))
        return None

    def _own_timer(self, run: Run) -> Step | None:
        """The move of the parallel state's own `after=` edge, once its time has come
        (whatever its regions are doing: running, asleep or waiting for a person)."""
        own = min(run.timers.values(), default=None)
        if own is None or own > self.clock():
            return None
        fired = due_timer(self.compiled_chart, run, self.clock())
        return None if fired is None else self._made(run, fired)

    async def performed(self, run: Run, effect: Any) -> Any:
        """The outcome of `effect`'s call (made for `run`), cut off at its time limit, told
        to the observer if there is one."""
        within = None if self.compiled_chart.untimed else limit(self.compiled_chart, run, effect)
        observer = self.observer
        if observer is None:
            call = _perform(effect, self.model)
        else:
            call = _observed(effect, self.model, observer, run, None)
        return await (call if within is None else _limited(call, within, observer))

    async def stepped(self, run: Run, session: Session) -> Step | None:
        """`step()` of `run` (a region's view) with this drive's hooks and observer."""
        return await _stepped(
            self.chart, run, self.model, session, self.clock, self.hooks, self.observer
        )

    async def _step(self, run: Run) -> Step | None:
        """`step()` with no hooks, its effect performed in line (no coroutine for a
        transition that needs no I/O)."""
        started = time.monotonic()
        effect = plan(self.compiled_chart, run, self.session)
        kind = type(effect)
        outcome: Any = None
        within = None if self.compiled_chart.untimed else limit(self.compiled_chart, run, effect)
        if type(effect) is CallModel and within is None:
            try:
                outcome = checked_reply(await self.model.complete(effect.request))
            except Exception as exc:
                outcome = exc
        elif kind is RunTool or kind is RunHandler or kind is CallModel:
            call = _perform(effect, self.model)
            outcome = await (call if within is None else _limited(call, within))
        elif kind is Wait or kind is Ended or kind is Sleep:
            return None
        wall_ms = self.session.charge_wall(time.monotonic() - started)
        return advance(self.compiled_chart, run, effect, outcome, now=self.clock(), wall_ms=wall_ms)

    async def _woken(self, run: Run) -> Step | None:
        """Wake a sleeping run once its timer is due (waiting for it here when it is due
        within `max_sleep`); None, the run left sleeping, when it is due later."""
        until = run.wake if run.wake is not None else 0.0
        left = until - self.clock()
        if left > self.max_sleep:
            return None
        if left > 0:
            await anyio.sleep(left)  # the heartbeat renews the lease meanwhile
        if time.monotonic() >= self.due:
            await self.renew()
        return await self._timed(self._made(run, woken(self.compiled_chart, run, self.clock())))

    async def _timed(self, record: Step) -> Step | None:
        """Store a timer's step; None when another writer came first and cancelled the
        run (or decided on it) meanwhile: the drive stops, the run as that writer left it."""
        try:
            return await self._stored(record, conflict_told=False)
        except ConflictError as exc:
            self._refused(record, exc)
            self.run = folded(self.chart, await self.store.load(record.run.run_id))
            self.cancelled = True  # whoever came first decides; a resume continues from it
            return None

    def _made(
        self, before: Run, record: Step, *, enter: bool = True, hooks: StepHooks | None = None
    ) -> Step:
        """A record the engine made outside `step()`, shown to the hooks as a step
        (`hooks`: a region's lane of them, in a parallel state)."""
        hooks = hooks or self.hooks
        if hooks is None:
            return record
        if enter:
            hooks.before_step(run=before)
        return hooks.after_step(before=before, record=record, started_ns=time.time_ns())

    async def _stored(
        self, record: Step, *, conflict_told: bool = True, hooks: StepHooks | None = None
    ) -> Step:
        """Append `record` (one durable row), tell the hooks, and move the run on; with
        `conflict_told=False` a conflict is the caller's to tell (`_after_cancel`)."""
        assert self.run is not None
        hooks = hooks or self.hooks
        try:
            await self.store.append(record, self.lease)
        except BaseException as exc:
            if hooks is not None and (conflict_told or not isinstance(exc, ConflictError)):
                hooks.step_stored(record=record, error=exc)
            raise
        if hooks is not None:
            hooks.step_stored(record=record)
        self.session.absorb(self.run, record)
        self.run = record.run
        if self.observer is not None:
            await self.observer.stored(record)
        return record

    def _refused(self, record: Step, error: BaseException) -> None:
        """Tell the hooks the store refused `record` (its span ends as an error)."""
        if self.hooks is not None:
            self.hooks.step_stored(record=record, error=error)

    async def _after_cancel(self, ran: Step, conflict: ConflictError) -> Step | None:
        """Another writer came first: if it cancelled the run, keep the result of the call
        that finished after the cancel (a `late_result` event, traced on the call's span);
        otherwise re-raise."""
        try:
            latest = folded(self.chart, await self.store.load(ran.run.run_id))
        except BaseException as exc:
            self._refused(ran, exc)
            raise
        if latest.state != CANCELLED:
            self._refused(ran, conflict)
            raise conflict
        self.run, self.cancelled = latest, True
        late = resuming_.late_result(self.compiled_chart, latest, ran, now=self.clock())
        if late is None:
            self._refused(ran, conflict)
            return None
        stored = await self._stored(self._made(latest, late, enter=False))
        self.in_flight = False
        self.run = latest
        return stored

    async def close(self) -> None:
        """End the drive's spans, then release the lease (clean unless a call or a takeover
        is in doubt)."""
        self.beating = False
        heartbeat.leave(self)
        if self.observer is not None:
            self.observer.close()
        if self.trace is not None:
            self.trace.close(self.run, self.failure)
        with anyio.CancelScope(shield=True):
            if self.renewing is None:  # never renewed: no renewal can be under way
                await self._release()
            else:
                async with self.renewing:
                    await self._release()

    async def _release(self) -> None:
        await self.store.release(
            self.lease,
            clean=not (self.in_flight or self.dirty),
            failed=isinstance(self.failure, Exception),  # not a cancellation
        )


def _takeover(compiled_chart: CompiledChart, run: Run, lease: Lease, clock: Clock) -> list[Step]:
    """The takeover events, when the last holder died while a head call could run: the
    run's, or in a parallel state one per region with a call in flight, in region order."""
    if not (lease.took_over and run.status == "running" and lease.previous_seq == run.seq):
        return []
    out = []
    for path in run.regions or (None,):
        seen = run if path is None else regions.project(run, path)
        head = open_call(seen)
        if (
            seen.status == "running"
            and head is not None
            and seen.state.endswith(".act")
            and seen.doubt != head.call.id
        ):
            record = resuming_.takeover(compiled_chart, seen, lease.previous, now=clock())
            if path is not None:
                whole = regions.merged(compiled_chart, run, path, record.run)
                record = replace(record, run=whole)
            out.append(record)
            run = record.run
    return out


def observer(on: Callable[[LiveEvent], Any] | Sink | None, lease: Lease) -> Observer | None:
    """What a drive tells `on` (a function or a sink), if anything; a call a dead
    holder had started is told as started `again`."""
    if on is None:
        return None
    is_sink = hasattr(on, "emit") and hasattr(on, "send") and hasattr(on, "put")
    sink = cast(Sink, on) if is_sink else Callback(cast(Callable[[LiveEvent], Any], on))
    return Observer(sink, lease.previous_seq if lease.took_over else None)


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
    compiled_chart = compiled(chart)
    owner, state = compiled_chart.owner_state(run.state)
    patch: dict[str, Any] = {}
    problem = None
    if state.on_resume is not None:
        try:
            shown = context_at(compiled_chart, run, owner)
            found = await threads.call(state.on_resume, typed_context(compiled_chart, owner, shown))
            patch = dict(found or {})
        except Exception as exc:
            problem = f"on_resume of '{owner}' raised {type(exc).__name__}: {exc}"
    if problem is None:
        guarded = any(
            t.dest == owner and t.edge is not None and t.edge.guard is not None
            for t in compiled_chart.user_edges.values()
        )
        entering = await lineage.entering_edge(store, run, owner) if guarded else None
        problem = resuming_.refresh_problem(compiled_chart, run, owner, state, patch, entering)
    if state.on_resume is None and problem is None:
        return None
    return patch, problem


async def load_session(store: Store, run: Run) -> Session:
    """Rebuild what `drive` keeps in memory from the store (on start and on resume).

    Args:
        store: Where the run lives.
        run: The run as loaded.

    Returns:
        The current visit's transcript and every executed call's fingerprint.
    """
    transcript = await lineage.visit_transcript(store, run) if run.visit else []
    session = Session(transcript=transcript, fingerprints=await lineage.fingerprints(store, run))
    for path, region in run.regions.items():
        if region.visit is not None:
            seen = regions.project(run, path)
            session.region(path).transcript = await lineage.visit_transcript(store, seen, path)
    return session


def priced(compiled_chart: CompiledChart, model: Model) -> Price | None:
    """The model's price (`model.price`, if it has one); `UnpricedModelError` when a
    strict cost cap needs one and the model has none."""
    price = getattr(model, "price", None)
    level = unpriced(compiled_chart)
    if level is not None and not isinstance(price, Price):
        raise UnpricedModelError(
            f"level '{level}' of chart '{compiled_chart.chart.name}' has a strict cost cap, "
            f"but model '{model.spec}' has no price, so no call's cost can be bounded; give "
            "the model a price (prices= on the adapters, price= on ScriptedModel and "
            "FunctionModel) or drop strict=True"
        )
    return price if isinstance(price, Price) else None
