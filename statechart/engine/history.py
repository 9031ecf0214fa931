"""History states: where a `history=` chart state resumes when it is entered again.

A move that leaves such a state while its sub-chart still runs (an `after=` edge that
interrupts it, an outer budget's route) remembers the state to come back to; a move
that leaves it through one of its sub-chart's terminals forgets it, so the next entry
starts over. `CompiledChart.descend` reads what is remembered. Pure: the run's
`history` in, the changes (recorded on the event as `remembered`) out.
"""

from __future__ import annotations

from statechart.engine.parts import Move
from statechart.engine.tables import CompiledChart


def remembered(
    compiled_chart: CompiledChart, leaf: str, history: dict[str, str], move: Move
) -> dict[str, str]:
    """What `move` from `leaf` changes in the run's history: each `history=` chart state it
    leaves -> the state to resume at ("" when its sub-chart ended: forget it)."""
    changes: dict[str, str] = {}
    for path in move.exited:
        kind = compiled_chart.histories.get(path)
        if kind is None:
            continue
        inside = path + "."
        if any(through.startswith(inside) for through in move.through):
            if path in history:
                changes[path] = ""  # left through its sub-chart's terminal: it ended
            continue
        owner = compiled_chart.owner_state(leaf)[0]  # a model state, not its think/act
        place = owner if kind == "deep" else inside + owner[len(inside) :].split(".", 1)[0]
        if history.get(path) != place:
            changes[path] = place
    return changes


def applied(history: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """`history` after `changes` (an empty place forgets)."""
    out = {**history, **changes}
    return {path: place for path, place in out.items() if place}
