"""A parallel state's regions driven at once: one task per region, the I/O concurrent.

Each region's step is planned and advanced by the engine on the run as the region sees
it (`engine.regions.project`), against the run as it is *now* and under one lock, then
folded back and stored: so the seq stays gapless, every append fences as usual, and
the shared ledger is always current. A call in flight holds a reservation (one step, one
call, and under strict caps its worst case in tokens and cost) that the other regions
plan with, so concurrent calls never pass a cap together. A region stops when it ends,
waits, sleeps beyond `max_sleep`, or finds a level around the parallel state spent; the
run itself then moves on (the join, a failed region's route, the outer budget's route).
Traced, each region tells its steps to a lane of the tracing hooks (its own transition
under way, the one tree of state spans); an observer (`on=`, `watch`) hears the calls as
they go. Only hooks that cannot follow several calls at once make the regions take turns.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from msgspec.structs import replace

from statechart import failpoints
from statechart.engine.effects import (
    CallModel,
    Ended,
    Exhaust,
    Regions,
    RunHandler,
    RunTool,
    Sleep,
    Wait,
)
from statechart.engine.regions import joined, merged, project
from statechart.engine.session import Session
from statechart.engine.tables import CompiledChart
from statechart.engine.timers import due_timer, woken
from statechart.engine.transition import advance, plan
from statechart.errors import ConflictError
from statechart.records.run import Run, Step
from statechart.records.spent import Spent
from statechart.runtime.current import current as folded

if TYPE_CHECKING:
    from statechart.runtime.driver import _Drive

_IO = (CallModel, RunTool, RunHandler)


def reservation(effect: Any) -> Spent:
    """What a call in flight will at least charge, and under strict caps at most use."""
    if isinstance(effect, CallModel):
        worst = effect.worst
        if worst is None:
            return Spent(steps=1, model_calls=1)
        return Spent(
            steps=1,
            model_calls=1,
            input_tokens=worst.input_tokens,
            output_tokens=worst.max_tokens or 0,
            cost_micros=worst.cost_micros or 0,
        )
    if isinstance(effect, RunTool):
        return Spent(steps=1, tool_calls=1)
    return Spent(steps=1)


def in_regions(compiled_chart: CompiledChart, run: Run, session: Session, now: float) -> bool:
    """The run's next step is one of its regions' (not the join, a route, its own timer)."""
    if run.status == "sleeping":
        return True
    if run.status != "running" or (run.timers and run.wake is not None and run.wake <= now):
        return False
    return isinstance(plan(compiled_chart, run, session), Regions)


async def region_step(
    compiled_chart: CompiledChart,
    run: Run,
    session: Session,
    clock: Callable[[], float],
    step_one: Callable[[Run, Session], Awaitable[Step | None]],
) -> Step | None:
    """One step of the first region that can make one, in the regions' order (what
    `step()` does in a parallel state), or the run's route when a level around the state
    is spent; None when no region can step."""
    blocked = None
    for path, region in run.regions.items():
        if region.status not in ("running", "sleeping"):
            continue
        view = project(run, path)
        sub = session.region(path)
        if region.status == "running":
            effect = plan(compiled_chart, view, sub)
            if isinstance(effect, Exhaust) and outside(effect.which, path):
                blocked = blocked or effect.which
                continue
        record = await step_one(view, sub)
        if record is not None:
            return replace(record, run=merged(compiled_chart, run, path, record.run))
    if blocked is not None:
        return advance(compiled_chart, run, Exhaust(blocked), None, now=clock())
    return None


def outside(which: str, path: str) -> bool:
    """The spent level of `which` (`level:kind`) is around region `path`, not in it."""
    level = which.rsplit(":", 1)[0]
    return not (level == path or level.startswith(path + "."))


@dataclass
class Phase:
    """One stretch of a drive in a parallel state: its regions' tasks and what they share."""

    drive: _Drive
    lock: anyio.Condition = field(
        default_factory=lambda: anyio.Condition(anyio.Lock(fast_acquire=True))
    )
    """Held to plan, advance and store a step (an uncontended acquire does not yield)."""
    waiting: int = 0
    """Regions waiting on `lock` for a change: told only when there are some."""
    reserved: dict[str, tuple[str, Spent]] = field(default_factory=dict)
    """Region -> (leaf, reservation) of its call in flight."""
    records: list[Step] = field(default_factory=list)
    """The steps stored, in order: the drive yields them once the phase is over."""
    scope: anyio.CancelScope | None = None
    blocked: str | None = None
    """`level:kind` of a level around the parallel state a region found spent."""
    lanes: dict[str, Any] = field(default_factory=dict)
    """Each region's lane of the tracing hooks."""
    width: int | None = None
    """A map's `max_concurrency`: regions stepping at once (None: all)."""
    queue: list[str] = field(default_factory=list)
    """Regions not yet let in, in order."""
    active: int = 0
    """Regions let in and not yet stopped."""
    mark: float = field(default_factory=time.monotonic)
    """When wall time was last charged: concurrent calls charge the time that passed
    once, to the step stored next."""

    def wall(self) -> int:
        """Milliseconds of wall time to charge the step stored now."""
        now = time.monotonic()
        ms = self.drive.session.charge_wall(now - self.mark)
        self.mark = now
        return ms

    @property
    def serial(self) -> bool:
        """The regions take turns: hooks that cannot follow several calls at once (the
        tracing hooks can: each region gets a lane of them)."""
        hooks = self.drive.hooks
        return hooks is not None and not hasattr(hooks, "lane")

    def lane(self, path: str) -> Any:
        """The hooks region `path` tells of its steps (its lane of the tracing hooks), if
        any."""
        hooks = self.drive.hooks
        if hooks is None:
            return None
        found = self.lanes.get(path)
        if found is None:
            found = self.lanes[path] = getattr(hooks, "lane")()  # noqa: B009 (not in StepHooks)
        return found

    async def run(self) -> list[Step]:
        """Drive every region that can go on until none can; the steps stored."""
        d = self.drive
        assert d.run is not None
        state = d.compiled_chart.maps.get(d.run.state)
        self.width = state.max_concurrency if state is not None else None
        live = [p for p, r in d.run.regions.items() if r.status in ("running", "sleeping")]
        self.queue = list(live)
        async with anyio.create_task_group() as tg:
            self.scope = tg.cancel_scope
            for path in live:
                tg.start_soon(self.limited, path)
        d.in_flight = False
        return self.records

    def session(self, path: str) -> Session:
        """The region's own session: its visit's transcript; fingerprints are the run's."""
        return self.drive.session.region(path)

    def ledger(self, run: Run, path: str) -> dict[str, Spent] | None:
        """The run's ledger with the other regions' calls in flight reserved, if any."""
        others = [(leaf, spent) for p, (leaf, spent) in self.reserved.items() if p != path]
        if not others:
            return None
        ledger = run.ledger
        for leaf, spent in others:
            ledger = self.drive.compiled_chart.charged(ledger, leaf, spent)
        return ledger

    def done(self, run: Run) -> bool:
        """The run must move on itself: the regions joined, or one failed."""
        regions = run.regions
        if regions and not any(r.status == "ended" for r in regions.values()):
            return False  # nothing ended: nothing to join (the common case, made cheap)
        return not regions or joined(self.drive.compiled_chart, run.state, regions) is not None

    async def wait(self) -> None:
        """Wait (holding `lock`) until another region's step changes the run."""
        self.waiting += 1
        try:
            await self.lock.wait()
        finally:
            self.waiting -= 1

    def notify(self) -> None:
        """Tell the waiting regions that the run changed."""
        if self.waiting:
            self.lock.notify_all()

    async def limited(self, path: str) -> None:
        """Step region `path` once a map's `max_concurrency` allows, in item order."""
        if self.width is None:
            await self.region(path)
            return
        async with self.lock:
            while self.queue[0] != path or self.active >= self.width:
                await self.wait()
            self.queue.pop(0)
            self.active += 1
            self.notify()
        try:
            await self.region(path)
        finally:
            with anyio.CancelScope(shield=True):
                async with self.lock:
                    self.active -= 1
                    self.notify()

    async def region(self, path: str) -> None:
        """Step region `path` until it cannot go on."""
        d = self.drive
        session = self.session(path)
        while not d.cancelled:
            async with self.lock:
                effect, view = await self._next(path, session)
                if effect is None:
                    return
                if self.serial:
                    await self._serial(path, view, session)
                    self.mark = time.monotonic()
                    continue
                self.reserved[path] = (view.state, reservation(effect))
                if isinstance(effect, RunTool):
                    d.in_flight = True
                hooks = self.lane(path)
                span = None
                if hooks is not None:
                    hooks.before_step(run=view)
                    span = hooks.effect_started(run=view, effect=effect)
            try:
                outcome = await d.performed(view, effect)
            except BaseException as exc:  # cut off (the join came first): its span ends
                if hooks is not None:
                    hooks.effect_ended(outcome=exc)
                raise
            if hooks is not None:
                hooks.effect_ended(outcome=outcome)
            async with self.lock:
                self.reserved.pop(path, None)
                seen = project(d.run, path) if d.run and path in d.run.regions else None
                if d.cancelled or seen is None:
                    if hooks is not None:  # its transition will not be made
                        hooks.effect_ended(outcome=anyio.get_cancelled_exc_class()())
                    return
                started = time.time_ns()
                record = advance(
                    d.compiled_chart,
                    seen,
                    effect,
                    outcome,
                    now=d.clock(),
                    wall_ms=self.wall(),
                    span=span,
                )
                if hooks is not None:
                    record = hooks.after_step(before=seen, record=record, started_ns=started)
                await self._store(path, record, hooks)

    async def _next(self, path: str, session: Session) -> tuple[Any, Run]:
        """The region's next call to make, after making the steps that need no I/O (and
        the waking of its timers); (None, run) once it cannot go on."""
        d = self.drive
        while True:
            run = d.run
            if run is None or d.cancelled or self.done(run) or path not in run.regions:
                return None, run  # type: ignore[return-value]
            if time.monotonic() >= d.due:
                await d.renew()
            view = project(run, path)
            region = run.regions[path]
            now = d.clock()
            own = min(run.timers.values(), default=None)  # the parallel state's after= edge
            if own is not None and own <= now:
                return None, view  # the run leaves the state by it: the regions stop
            if region.status == "sleeping":
                wake = min(region.wake or now, own if own is not None else math.inf)
                if wake - now > d.max_sleep:
                    return None, view
                if wake > now:
                    with anyio.move_on_after(wake - now):
                        await self.wait()  # a step elsewhere may change the run
                    continue
                woke = woken(d.compiled_chart, view, now)
                await self._store(path, d._made(view, woke, hooks=self.lane(path)), self.lane(path))
                continue
            if region.status != "running":
                return None, view
            if view.timers and view.wake is not None and view.wake <= now:
                fired = due_timer(d.compiled_chart, view, now)
                if fired is not None:
                    hooks = self.lane(path)
                    await self._store(path, d._made(view, fired, hooks=hooks), hooks)
                    continue
            ledger = self.ledger(run, path)
            planned = project(run, path, ledger) if ledger is not None else view
            effect = plan(d.compiled_chart, planned, session)
            if isinstance(effect, Exhaust) and outside(effect.which, path):
                if ledger is not None:  # others' calls may settle it either way: wait
                    await self.wait()
                    continue
                self.blocked = effect.which
                return None, view  # the run routes itself out of the parallel state
            if isinstance(effect, (Wait, Ended, Sleep)):
                return None, view
            if isinstance(effect, _IO):
                return effect, planned
            record = advance(d.compiled_chart, view, effect, None, now=now, wall_ms=self.wall())
            hooks = self.lane(path)
            await self._store(path, d._made(view, record, hooks=hooks), hooks)  # its span

    async def _serial(self, path: str, view: Run, session: Session) -> None:
        """One step of the region with the lock held: traced or observed as one."""
        d = self.drive
        d.in_flight = view.state.endswith(".act")
        record = await d.stepped(view, session)
        d.in_flight = False
        if record is not None:
            await self._store(path, record)

    async def _store(self, path: str, record: Step, hooks: Any = None) -> None:
        """Fold the region's step into the run and store it (never cut off half-way); a
        writer that came first (a cancel) stops the phase, the run as it left it."""
        d = self.drive
        assert d.run is not None and self.scope is not None
        whole = replace(record, run=merged(d.compiled_chart, d.run, path, record.run))
        with anyio.CancelScope(shield=True):
            try:
                stored = await d._stored(whole, hooks=hooks)
            except ConflictError:
                d.run = folded(d.chart, await d.store.load(d.run.run_id))
                d.cancelled = True
                self.scope.cancel()
                return
        if stored.opened is not None:
            failpoints.hit("intent.recorded")
        self.records.append(stored)
        if self.done(stored.run):
            self.scope.cancel()  # the others' calls in flight are dropped: the run moves on
        self.notify()
