"""Budget: the caps of one level (the root chart, a state, a sub-chart).

A child can never spend past what its parents have left: every level's caps are
checked against the ledger (see `records/spent.py`) before a step starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from statechart.records.spent import KINDS


@dataclass(frozen=True)
class Budget:
    """Caps for one level. `None` means no cap for that kind.

    Where a spent level goes is the owner's `on_exhausted`: a sibling state for a
    state budget, a terminal state for the root chart. A sub-chart that runs out
    ends in its own `exhausted` terminal, which its parent maps like any exit.
    """

    max_steps: int | None = None
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_tokens: int | None = None
    max_cost_micros: int | None = None
    max_wall_seconds: float | None = None
    strict: bool = False
    """Never pass a token or cost cap of this level: each model call's `max_tokens` is
    lowered so its worst case fits, and a call whose worst case cannot fit is not made
    (see docs/concepts.md, "Hard caps")."""

    def __repr__(self) -> str:
        """The dataclass repr, with `strict` only when set: `Chart.version` hashes it, so a
        chart written before `strict` existed keeps its version."""
        shown = [f for f in self.__dataclass_fields__ if f != "strict" or self.strict]
        return f"Budget({', '.join(f'{f}={getattr(self, f)!r}' for f in shown)})"

    def caps(self) -> dict[str, int]:
        """The caps that are set, keyed like `Spent` fields (`wall_ms` in milliseconds)."""
        out: dict[str, int] = {}
        for kind in KINDS:
            if kind == "wall_ms":
                if self.max_wall_seconds is not None:
                    out[kind] = int(self.max_wall_seconds * 1000)
                continue
            cap = getattr(self, f"max_{kind}")
            if cap is not None:
                out[kind] = int(cap)
        return out

    def merged(self, other: Budget | None) -> Budget:
        """The tighter of two budgets, cap by cap."""
        if other is None:
            return self

        def tight(a: float | None, b: float | None) -> float | None:
            if a is None:
                return b
            if b is None:
                return a
            return min(a, b)

        vals = {
            f: tight(getattr(self, f), getattr(other, f))
            for f in self.__dataclass_fields__
            if f != "strict"
        }
        return Budget(**vals, strict=self.strict or other.strict)  # type: ignore[arg-type]
