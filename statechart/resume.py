"""What resuming a stored run does before it drives on, as pure functions.

A state may define `on_resume` to re-read the world into the context; then
the guard of the edge that entered the state runs again, because the world
may have changed while the run was stored. A failure routes to `escalated`.
"""

from __future__ import annotations

from typing import Any

from .budget import ZERO
from .chart import State
from .machine import CompiledChart
from .moves import check_guard, checked_patch, commit
from .replay import edges
from .run import Run, Step
from .step import escalate


def refresh_problem(
    cc: CompiledChart, run: Run, owner: str, state: State, patch: dict[str, Any],
    entering_edge: str | None,
) -> str | None:
    """Why the refreshed run may not stay where it is, or None."""
    undeclared = sorted(set(patch) - set(state.reads) - set(state.writes))
    if undeclared:
        return (f"on_resume of '{owner}' returned {', '.join(undeclared)}, which the state "
                "neither reads nor writes; declare them or leave them out")
    checked, problem = checked_patch(cc, owner, run, patch)
    if problem is not None:
        return f"on_resume of '{owner}': {problem}"
    t = edges(cc).get(entering_edge) if entering_edge is not None else None
    if t is None or t.edge is None or t.edge.guard is None:
        return None
    refusal = check_guard(cc, run, t, checked)
    return None if refusal is None else f"the guard that let the run into '{owner}' " \
        f"now refuses: {refusal}"


def refreshed(
    cc: CompiledChart, run: Run, patch: dict[str, Any], problem: str | None, *, now: float,
) -> Step:
    """The `resume` event applying the refresh, or the escalation when `problem` is set."""
    if problem is not None:
        return escalate(cc, run, f"on resume: {problem}", now, ZERO, actor="system",
                        refused=problem)
    owner = cc.owner_state(run.state)[0]
    checked, _ = checked_patch(cc, owner, run, patch)
    return commit(cc, run, None, now, ZERO, trigger="resume", actor="system", patch=checked,
                  reason=f"resumed: on_resume of '{owner}' refreshed "
                  f"{', '.join(sorted(checked)) or 'nothing'}")
