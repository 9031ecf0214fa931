"""What resuming a stored run does before it drives on, as pure functions.

A state may define `on_resume` to re-read the world into the context; then
the guard of the edge that entered the state runs again, because the world
may have changed while the run was stored. A failure routes to `escalated`.
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from statechart.chart.chart import State
from statechart.engine.moves import check_guard, checked_patch, commit
from statechart.engine.routing import escalate
from statechart.engine.tables import CompiledChart
from statechart.records.run import Run, Step
from statechart.records.spent import ZERO


def takeover(compiled_chart: CompiledChart, run: Run, previous: str | None, *, now: float) -> Step:
    """The event recording that the open call may have run under a driver that stopped
    without releasing its lease; the next step settles it by the tool's retry policy."""
    head = run.pending[0].call
    assert run.visit is not None
    state = compiled_chart.nodes[run.visit.state].state
    tool = state.tool_map.get(head.name) if state is not None else None
    policy = f"retry='{tool.retry}'" if tool is not None else "its retry policy"
    why = (
        f"took over from {previous or 'a driver'}, which stopped without releasing its "
        f"lease: call {head.id} ({head.name}) may have run; settling it by {policy}"
    )
    return commit(
        compiled_chart,
        run,
        None,
        now,
        ZERO,
        trigger="takeover",
        actor="system",
        call=head,
        reason=why,
        update={"doubt": head.id},
    )


def switched(compiled_chart: CompiledChart, run: Run, spec: str, *, now: float) -> Step:
    """The event recording that the run is driven by another model from here on."""
    return commit(
        compiled_chart,
        run,
        None,
        now,
        ZERO,
        trigger="model",
        actor="system",
        model=spec,
        reason=f"model changed from {run.model} to {spec}",
        update={"model": spec},
    )


def late_result(compiled_chart: CompiledChart, run: Run, ran: Step, *, now: float) -> Step | None:
    """The record of a tool call that finished after its run was cancelled (its intent
    closes with the result), or None when `ran` was not a tool call."""
    e = ran.event
    if e.call is None or e.actor != "code" or e.trigger not in ("next_call", "results"):
        return None
    step = commit(
        compiled_chart,
        run,
        None,
        now,
        ZERO,
        trigger="late_result",
        actor="code",
        call=e.call,
        result=e.result,
        error=e.error,
        fingerprint=e.fingerprint,
        outcome=e.outcome,
        reason="the call finished after the run was cancelled",
    )
    return replace(step, closed=(e.call.id,))


def refresh_problem(
    compiled_chart: CompiledChart,
    run: Run,
    owner: str,
    state: State,
    patch: dict[str, Any],
    entering_edge: str | None,
) -> str | None:
    """Why the refreshed run may not stay where it is, or None."""
    undeclared = sorted(set(patch) - set(state.reads) - set(state.writes))
    if undeclared:
        return (
            f"on_resume of '{owner}' returned {', '.join(undeclared)}, which the state "
            "neither reads nor writes; declare them or leave them out"
        )
    checked, problem = checked_patch(compiled_chart, owner, run, patch)
    if problem is not None:
        return f"on_resume of '{owner}': {problem}"
    t = compiled_chart.user_edges.get(entering_edge) if entering_edge is not None else None
    if t is None or t.edge is None or t.edge.guard is None:
        return None
    refusal = check_guard(compiled_chart, run, t, checked)
    return (
        None
        if refusal is None
        else f"the guard that let the run into '{owner}' now refuses: {refusal}"
    )


def refreshed(
    compiled_chart: CompiledChart,
    run: Run,
    patch: dict[str, Any],
    problem: str | None,
    *,
    now: float,
) -> Step:
    """The `resume` event applying the refresh, or the escalation when `problem` is set."""
    if problem is not None:
        return escalate(
            compiled_chart, run, f"on resume: {problem}", now, ZERO, actor="system", refused=problem
        )
    owner = compiled_chart.owner_state(run.state)[0]
    checked, _ = checked_patch(compiled_chart, owner, run, patch)
    return commit(
        compiled_chart,
        run,
        None,
        now,
        ZERO,
        trigger="resume",
        actor="system",
        patch=checked,
        reason=f"resumed: on_resume of '{owner}' refreshed "
        f"{', '.join(sorted(checked)) or 'nothing'}",
    )
