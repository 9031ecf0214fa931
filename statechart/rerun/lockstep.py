"""One recorded run re-driven against a chart, step for step beside its record.

The new run is driven by the real driver on a `MemoryStore`, its model and tools answered
by the run's cassette, its clock set to the time of the recorded step it is about to
make, and a person's recorded decisions made again when the new run reaches them. Each
step it stores is compared with the recorded step of the same place (of the same region,
in a parallel state); the first that differs is the divergence.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import ValidationError

from statechart.chart.chart import Chart
from statechart.engine import CANCEL, CompiledChart, compiled
from statechart.engine.timers import AFTER_FIRED
from statechart.errors import StatechartError
from statechart.records.run import Event, Run, Step
from statechart.rerun.cassette import UNSEEN, Cassette, Recording, Renames, owner_of
from statechart.rerun.verdict import Verdict, classify
from statechart.runtime.api import start
from statechart.runtime.current import current
from statechart.runtime.decisions import approve, cancel, reject
from statechart.runtime.driver import drive
from statechart.runtime.stand_in import standing_in
from statechart.store.memory import MemoryStore

ENVIRONMENT = frozenset({"takeover", "model", "resume", "late_result"})
"""Recorded steps that tell what happened around the run (a driver taking over, a switch
of model, a resume's refresh, a late result), not what the chart decided: not compared."""
_UNFINISHED = ("running", "sleeping")


def _timed(e: Event) -> bool:
    """Whether the recorded step `e` is a timer firing (a wake, an `after=` edge)."""
    return e.trigger == "wake" or (e.actor == "system" and AFTER_FIRED in e.reason)


def _next_wake(run: Run) -> float | None:
    """When the run's next timer is due (its own, or one of its regions'), if any."""
    found = [run.wake, *(r.wake for r in run.regions.values())]
    found += list(run.timers.values())
    due = [t for t in found if t is not None]
    return min(due) if due else None


class _Clock:
    """The replay's clock: the time of the recorded step being made."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def lanes(compiled_chart: CompiledChart) -> tuple[str, ...]:
    """The paths of the parallel and map states: their regions' steps are matched per region."""
    return tuple(compiled_chart.parallels) + tuple(compiled_chart.maps)


def lane_of(path: str, parallel: tuple[str, ...]) -> str | None:
    """The region `path` is in (`gather.web` for `gather.web.search.think`), if any."""
    for p in parallel:
        if path.startswith(p + "."):
            head = path[len(p) + 1 :].split(".", 1)[0]
            return f"{p}.{head}"
    return None


class Lockstep:
    """The comparison of one replay: the recorded steps still to meet, and the verdict."""

    def __init__(
        self,
        chart: Chart,
        recording: Recording,
        renames: Renames,
        *,
        run_handlers: bool = False,
    ) -> None:
        self.chart = chart
        self.compiled_chart = compiled(chart)
        self.recording = recording
        self.renames = renames
        self.cassette = Cassette(recording, renames, run_handlers=run_handlers)
        self.expected = [e for e in recording.events if e.trigger not in ENVIRONMENT]
        self.parallel = lanes(self.compiled_chart)
        self.clock = _Clock(recording.base.created_at)
        self.last = recording.base.created_at
        """The time of the last recorded step met: when the next one started."""
        self.agreed = 0
        self.compared = 0
        """Events of the new run compared so far (its own takeovers etc. included)."""
        self.run_id = recording.base.run_id

    def _verdict(self, outcome: Any, **fields: Any) -> Verdict:
        return Verdict(run_id=self.run_id, outcome=outcome, agreed=self.agreed, **fields)

    def _lane(self, path: str) -> str | None:
        return lane_of(path, self.parallel) if self.parallel else None

    def _tick(self) -> None:
        """Set the clock for the next step: when the recorded one started (the last one's
        time), or, for a timer that fired, when it fired."""
        at = self.last
        if self.expected and _timed(self.expected[0]):
            at = max(at, self.expected[0].time)
        self.clock.now = max(self.clock.now, at)

    def _agrees(self, new: Event, old: Event) -> bool:
        r = self.renames
        return (
            new.trigger == r.trigger(old.trigger)
            and owner_of(new.source) == owner_of(r(old.source))
            and owner_of(new.target) == owner_of(r(old.target))
            and (new.refused is None) == (old.refused is None)
            and new.exhausted == old.exhausted
            and (new.call is None) == (old.call is None)
            and (new.call is None or old.call is None or new.call.name == old.call.name)
        )

    def matched(self, new: Event) -> Verdict | None:
        """None when the new run's event `new` agrees with the recorded step of its place;
        else the verdict."""
        self.compared += 1
        if new.trigger in ENVIRONMENT:
            return None  # the new run's own takeover, model switch or resume refresh
        lane = self._lane(new.source)
        at = next(
            (i for i, e in enumerate(self.expected) if self._lane(self.renames(e.source)) == lane),
            None,
        )
        old = None if at is None else self.expected[at]
        unseen = new.error is not None and new.error.startswith(UNSEEN)
        miss = self.cassette.miss_of(new) if unseen else None
        if old is not None and miss is None and self._agrees(new, old):
            del self.expected[at]  # type: ignore[arg-type]
            self.agreed += 1
            self.last = max(self.last, old.time)
            self._tick()
            return None
        if old is None and self.recording.status in _UNFINISHED:
            return self._agree("agrees up to where the recorded run stops (still unfinished)")
        kind, detail = classify(self.compiled_chart, new, old, self.renames, miss)
        return self._verdict(
            "diverge",
            kind=kind,
            seq=old.seq if old is not None else new.seq,
            state=self.compiled_chart.owner_state(new.source)[0]
            if new.source in self.compiled_chart.nodes
            else new.source,
            detail=detail,
        )

    def _agree(self, detail: str = "") -> Verdict:
        return self._verdict("agree", detail=detail)

    async def run(self) -> Verdict:
        """Replay the recording; the verdict."""
        base = self.recording.base
        if base.seq != 0 or base.parent_run is not None:
            return self._verdict(
                "cannot_say",
                detail=f"run {self.run_id} is a fork (of {base.parent_run}): replay the run "
                "it was forked from",
            )
        if any(e.trigger == "migrate" for e in self.recording.events):
            return self._verdict(
                "cannot_say", detail="the run was migrated to another chart version on the way"
            )
        store = MemoryStore(encode=False)
        self._tick()
        try:
            await start(
                self.chart,
                store=store,
                model=self.cassette,
                context=base.context,
                run_id=self.run_id,
                clock=self.clock,
            )
        except ValidationError as exc:
            return self._verdict(
                "diverge",
                kind="context_refused",
                seq=0,
                state=owner_of(base.state),
                detail=f"the recorded first context does not fit the new chart's context: {exc}",
            )
        with standing_in(self.cassette.answer):
            return await self._driven(store)

    async def _driven(self, store: MemoryStore) -> Verdict:
        resuming = False
        stuck = -1
        while True:
            steps = drive(
                self.chart,
                self.run_id,
                store=store,
                model=self.cassette,
                clock=self.clock,
                resuming=resuming,
                max_sleep=0.0,  # asleep: the clock is moved on below, never slept on
            )
            async with contextlib.aclosing(steps):
                async for step in steps:
                    verdict = self.matched(step.event)
                    if verdict is not None:
                        return verdict
                    if self._cancel_next():
                        break
            run = current(self.chart, await store.load(self.run_id))
            resuming = False
            wake = _next_wake(run) if run.status not in ("ended", "waiting") else None
            if wake is not None and run.seq != stuck and not self._cancel_next():
                stuck = run.seq  # asleep until `wake`: the replay's time jumps there
                self.clock.now = max(self.clock.now, wake)
                continue
            if not self.expected:
                return self._agree()
            nxt = self.expected[0]
            if nxt.actor != "human":
                return self._stopped(
                    run,
                    nxt,
                    f"the new run is {run.status} in '{run.state}' ({run.reason}); the "
                    f"recorded run went on: {nxt.source} -> {nxt.target} ({nxt.trigger})",
                )
            try:
                step = await self._decided(store, run, nxt)
            except StatechartError as exc:
                return self._stopped(
                    run,
                    nxt,
                    f"a person's recorded decision ({nxt.trigger} by {nxt.by}) does not "
                    f"apply to the new run: {exc}",
                )
            verdict = self.matched(step.event)
            if verdict is not None:
                return verdict
            resuming = True  # as `resume` drives it after a decision: refresh, guard again

    def _stopped(self, run: Run, nxt: Event, detail: str) -> Verdict:
        """The new run stopped where its record went on with `nxt`."""
        return self._verdict(
            "diverge", kind="changed", seq=nxt.seq, state=owner_of(run.state), detail=detail
        )

    def _cancel_next(self) -> bool:
        """Whether the next recorded step is a person cancelling the run."""
        return bool(self.expected) and (
            self.expected[0].actor == "human" and self.expected[0].trigger == CANCEL
        )

    async def _decided(self, store: MemoryStore, run: Run, e: Event) -> Step:
        """The recorded decision `e` made again on the new run."""
        region = self._lane(self.renames(e.source)) if run.regions else None
        by = e.by or ""
        if e.trigger == CANCEL:
            return await cancel(
                self.chart, self.run_id, store=store, reason=e.reason, by=by, clock=self.clock
            )
        verb = "approved" if e.trigger == "approved" or e.trigger.startswith("approve") else None
        prefix = f"{e.trigger} by {by}"
        note = e.reason[len(prefix) + 2 :] if e.reason.startswith(prefix + ": ") else ""
        if verb is not None:
            edits = (
                dict(e.call.arguments)
                if e.call is not None
                and isinstance(e.call.arguments, dict)
                and (e.result or "").startswith("edited arguments")
                else None
            )
            return await approve(
                self.chart,
                self.run_id,
                store=store,
                by=by,
                note=note,
                edits=edits,
                clock=self.clock,
                region=region,
            )
        return await reject(
            self.chart,
            self.run_id,
            store=store,
            by=by,
            reason=note,
            clock=self.clock,
            region=region,
        )
