"""History states: where a `history=` chart state resumes when it is entered again.

A move that leaves such a state while its sub-chart still runs (an `after=` edge that
interrupts it, an outer budget's route) remembers the state to come back to; a move that
leaves it through one of its sub-chart's terminals forgets it, so the next entry starts
over. `CompiledChart._move` works the changes out as the move goes (so a move that
leaves a state and enters it again re-enters as it should), `CompiledChart.descend`
reads them, the event records them (`Event.remembered`) and replay applies them.
"""

from __future__ import annotations


def place(path: str, kind: str, owner: str) -> str:
    """Where the `kind` (`shallow`/`deep`) history state at `path` resumes, left while
    `owner` (a user state inside it, never a think/act sub-state) was active."""
    inside = path + "."
    return owner if kind == "deep" else inside + owner[len(inside) :].split(".", 1)[0]


def applied(history: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """`history` after `changes` (an empty place forgets)."""
    out = {**history, **changes}
    return {path: where for path, where in out.items() if where}
