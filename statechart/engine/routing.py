"""Where a run goes when it cannot go on: exhaustion routing and escalation.

Both are pure: they build the next run and its event from the compiled chart.
Routing to an exhaustion target is free; an escalation charges its step.
"""

from __future__ import annotations

from statechart.chart.names import ESCALATED, ROOT
from statechart.engine.moves import commit, drop_queue
from statechart.engine.reasons import NOT_EXECUTED
from statechart.engine.tables import CompiledChart, Move, exhaust, go
from statechart.records.run import Actor, Run, Step
from statechart.records.spent import Spent


def route_exhausted(
    compiled_chart: CompiledChart, run: Run, which: str, now: float, wall: Spent
) -> Step:
    """Route a run whose level ran out (`level:kind`) to that level's target; a free step."""
    level = which.rsplit(":", 1)[0]
    trigger, note = exhaust(level), ""
    if level != ROOT and run.routed > 2 * len(compiled_chart.levels) + 2:
        trigger, note = exhaust(ROOT), "; routing went round in a loop"
    t = compiled_chart.resolve(run.state, trigger)
    assert t is not None, (run.state, which)
    move = compiled_chart.move(run.state, t, run.history)
    capped = _over_visits(compiled_chart, run, move)
    if capped is not None:
        # Routing must not pass a visit cap: escalate at the routed level instead, and if
        # that passes a cap too, go to the root's target.
        note = f"; '{capped}' is at its max_visits"
        for fallback in (go(compiled_chart.nodes[t.source].prefix + ESCALATED), exhaust(ROOT)):
            t = compiled_chart.resolve(run.state, fallback) or t
            move = compiled_chart.move(run.state, t, run.history)
            if _over_visits(compiled_chart, run, move) is None:
                break
    reason = f"budget exhausted at {which}{note}; routed to '{move.leaf}'"
    messages = drop_queue(run, dropped_head(run)) if run.pending else ()
    return commit(
        compiled_chart,
        run,
        move,
        now,
        wall,
        trigger=t.trigger,
        actor="system",
        reason=reason,
        exhausted=which,
        messages=messages,
        update={"pending": (), "routed": run.routed + 1},
    )


def _over_visits(compiled_chart: CompiledChart, run: Run, move: Move) -> str | None:
    """The first state this move would enter past its `max_visits`."""
    for path in move.counted:
        state = compiled_chart.nodes[path].state
        cap = state.max_visits if state is not None else None
        if cap is not None and run.visits.get(path, 0) >= cap:
            return path
    return None


def escalate(
    compiled_chart: CompiledChart,
    run: Run,
    why: str,
    now: float,
    usage: Spent,
    *,
    actor: Actor,
    error: str | None = None,
    refused: str | None = None,
    timeout: float | None = None,
) -> Step:
    """Route to the escalated state of the chart that owns the run's state, with `why`
    (`timeout`: the limit that cut off the call that failed, if one did)."""
    messages = drop_queue(run, dropped_head(run)) if run.pending else ()
    here = compiled_chart.owner_state(run.state)[0]
    t = compiled_chart.resolve(run.state, go(compiled_chart.nodes[here].prefix + ESCALATED))
    assert t is not None
    return commit(
        compiled_chart,
        run,
        compiled_chart.move(run.state, t, run.history),
        now,
        usage,
        trigger=t.trigger,
        actor=actor,
        reason=why,
        error=error,
        refused=refused,
        messages=messages,
        update={"pending": ()},
        timeout=timeout,
    )


def dropped_head(run: Run) -> str:
    """The result for a queued head that will not run now: it may have run if in doubt."""
    if run.doubt is not None and run.pending and run.pending[0].call.id == run.doubt:
        return (
            "not run again: this call may have run before its driver stopped; "
            "check its effect before repeating it"
        )
    return NOT_EXECUTED


# -- commit -------------------------------------------------------------------------------
