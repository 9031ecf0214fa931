"""Durable timers: a failed call put to sleep until its next attempt, and waking it.

`retry_later` is the step of a failed call its `Retry` gives another attempt: the event
carries the error and when the attempt is due (`wake`), and the run is `sleeping` until
then. Nothing waits in memory: a driver that dies during the wait leaves a stored run
that any later driver (`resume`, a worker) wakes when the time has come, with `woken`.
Both are pure: `now` is handed in.
"""

from __future__ import annotations

import time as _time

from statechart.chart.retry import Retry
from statechart.engine.moves import commit, drop_queue, try_move
from statechart.engine.routing import dropped_head, escalate
from statechart.engine.tables import CompiledChart
from statechart.errors import CallTimeoutError
from statechart.records.messages import ToolCall
from statechart.records.run import Actor, Run, Step, Visit
from statechart.records.spent import ZERO, Spent

AFTER_FIRED = "its after edge to"
"""What the reason of an `after=` edge's move says (the replay finds timers by it)."""


def retry_later(
    compiled_chart: CompiledChart,
    run: Run,
    policy: Retry | None,
    failure: BaseException,
    now: float,
    usage: Spent,
    *,
    actor: Actor,
    what: str,
    call: ToolCall | None = None,
    visit: Visit | None = None,
) -> Step | None:
    """The step that puts the run to sleep until the failed call's next attempt; None when
    `policy` gives it none (no policy, attempts used up, a failure it does not retry)."""
    failed = run.attempt + 1
    if policy is None or not policy.again(failure, failed):
        return None
    wake = now + policy.interval(failed, f"{run.run_id}:{run.seq + 1}")
    reason = (
        f"{what} failed (attempt {failed} of {policy.attempts}); the next attempt is due at "
        f"{clock_time(wake)}"
    )
    update = {"status": "sleeping", "wake": wake, "attempt": failed, "reason": reason}
    if visit is not None:
        update["visit"] = visit
    return commit(
        compiled_chart,
        run,
        None,
        now,
        usage,
        trigger="retry",
        actor=actor,
        call=call,
        error=f"{type(failure).__name__}: {failure}",
        timeout=failure.seconds if isinstance(failure, CallTimeoutError) else None,
        wake=wake,
        reason=reason,
        update=update,
    )


def woken(compiled_chart: CompiledChart, run: Run, now: float) -> Step:
    """The step that wakes a sleeping run whose time has come (free: no step is charged)."""
    assert run.status == "sleeping", run.status
    due = run.wake if run.wake is not None else now
    return commit(
        compiled_chart,
        run,
        None,
        now,
        ZERO,
        trigger="wake",
        actor="system",
        reason=f"the timer due at {clock_time(due)} fired",
        update={"status": "running", "wake": min(run.timers.values(), default=None), "reason": ""},
    )


def due_timer(compiled_chart: CompiledChart, run: Run, now: float) -> Step | None:
    """The step that takes the first armed `after=` edge whose time has come, when one has
    (none while the run sleeps or has ended). It is free, like a routing; a move the edge
    cannot make (a cap, a visit limit) escalates with the reason."""
    if run.status in ("sleeping", "ended") or not run.timers or run.wake is None or run.wake > now:
        return None
    armed = {  # a timer the chart no longer has (a migrated run) never fires
        t.label: t.seconds
        for label in run.timers
        for t in compiled_chart.timers.get(label.partition("->")[0], ())
        if t.label == label
    }
    due = sorted((at, label) for label, at in run.timers.items() if label in armed and at <= now)
    if not due:
        return None
    label = due[0][1]
    source, _, target = label.partition("->")
    seconds = armed[label]
    why = f"state '{source}' was active for {seconds:g} s or more: {AFTER_FIRED} '{target}' fired"
    found = try_move(compiled_chart, run, target, {}, timed=True)
    if isinstance(found, str):
        return escalate(compiled_chart, run, f"{why}, but {found}", now, ZERO, actor="system")
    messages = drop_queue(run, dropped_head(run)) if run.pending else ()
    return commit(
        compiled_chart,
        run,
        found,
        now,
        ZERO,
        trigger=found.transition.trigger,
        actor="system",
        reason=why,
        messages=messages,
        update={"pending": ()},
    )


def clock_time(epoch: float) -> str:
    """An epoch time as the UTC clock shows it, to the millisecond."""
    whole = _time.strftime("%Y-%m-%d %H:%M:%S", _time.gmtime(epoch))
    return f"{whole}.{int(epoch % 1 * 1000):03d} UTC"
