"""Where a run goes when it cannot go on: exhaustion routing and escalation.

Both are pure: they build the next run and its event from the compiled chart.
Routing to an exhaustion target is free; an escalation charges its step.
"""

from __future__ import annotations

from statechart.chart.names import ESCALATED
from statechart.engine.moves import NOT_EXECUTED, commit, drop_queue
from statechart.engine.tables import CompiledChart, Move, exhaust, go
from statechart.records.run import Actor, Run, Step
from statechart.records.spent import Spent


def route_exhausted(cc: CompiledChart, run: Run, which: str, now: float, wall: Spent) -> Step:
    """Route a run whose level ran out (`level:kind`) to that level's target; a free step."""
    level = which.rsplit(":", 1)[0]
    trigger, note = exhaust(level), ""
    if level and run.routed > 2 * len(cc.levels) + 2:
        trigger, note = exhaust(""), "; routing went round in a loop"
    t = cc.resolve(run.state, trigger)
    assert t is not None, (run.state, which)
    move = cc.move(run.state, t)
    capped = _over_visits(cc, run, move)
    if capped is not None:
        # Routing must not pass a visit cap: escalate at the routed level instead, and if
        # that passes a cap too, go to the root's target.
        note = f"; '{capped}' is at its max_visits"
        for fallback in (go(cc.nodes[t.source].prefix + ESCALATED), exhaust("")):
            t = cc.resolve(run.state, fallback) or t
            move = cc.move(run.state, t)
            if _over_visits(cc, run, move) is None:
                break
    reason = f"budget exhausted at {which or 'root'}{note}; routed to '{move.leaf}'"
    delta = drop_queue(run, dropped_head(run)) if run.pending else ()
    return commit(
        cc,
        run,
        move,
        now,
        wall,
        trigger=t.trigger,
        actor="system",
        reason=reason,
        exhausted=which,
        delta=delta,
        update={"pending": (), "routed": run.routed + 1},
    )


def _over_visits(cc: CompiledChart, run: Run, move: Move) -> str | None:
    """The first state this move would enter past its `max_visits`."""
    for path in move.counted:
        state = cc.nodes[path].state
        cap = state.max_visits if state is not None else None
        if cap is not None and run.visits.get(path, 0) >= cap:
            return path
    return None


def escalate(
    cc: CompiledChart,
    run: Run,
    why: str,
    now: float,
    usage: Spent,
    *,
    actor: Actor,
    error: str | None = None,
    refused: str | None = None,
) -> Step:
    """Route to the escalated state of the chart that owns the run's state, with `why`."""
    delta = drop_queue(run, dropped_head(run)) if run.pending else ()
    here = cc.owner_state(run.state)[0]
    t = cc.resolve(run.state, go(cc.nodes[here].prefix + ESCALATED))
    assert t is not None
    return commit(
        cc,
        run,
        cc.move(run.state, t),
        now,
        usage,
        trigger=t.trigger,
        actor=actor,
        reason=why,
        error=error,
        refused=refused,
        delta=delta,
        update={"pending": ()},
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
