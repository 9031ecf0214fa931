"""Budget: the caps of one level (the root chart, a state, a sub-chart).

A child can never spend past what its parents have left: every level's caps are
checked against the ledger (see `records/spent.py`) before a step starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from statechart.errors import MissingBudgetError
from statechart.records.spent import KINDS


@dataclass(frozen=True)
class Budget:
    """Caps for one budget level: the root chart, a state or a sub-chart. `None` is no cap.

    Every step is charged to each level around it (`Run.ledger`). Where a spent level
    goes is its owner's `on_exhausted`: a sibling for a state, a terminal for the root
    chart. A sub-chart that runs out ends in its own `exhausted` terminal, which its
    parent maps like any exit. See docs/concepts.md, "Caps and budgets".

    Example:
        ```python
        from statechart import Budget, Chart, Edge, State, tool


        @tool(retry="safe")
        def search_kb(query: str) -> str:
            "Search the knowledge base."
            return "KB-12"


        chart = Chart(
            "qa",
            budget=Budget(max_steps=40, max_cost_micros=50_000),  # the whole run: 5 cents
            states=(
                State("research", instructions="Look it up.", tools=(search_kb,),
                      budget=Budget(max_tool_calls=3), on_exhausted="draft"),  # then draft
                State("draft", instructions="Answer.",  # never past 4k tokens, by any call
                      budget=Budget(max_tokens=4_000, strict=True)),
                State("done", kind="terminal"),
            ),
            edges=(Edge("research", "draft"), Edge("draft", "done")),
        )
        ```
    """

    max_steps: int | None = None
    """Steps driven (routing and human decisions are free); the root chart must set it."""
    max_model_calls: int | None = None
    """Model calls started, failed ones included."""
    max_tool_calls: int | None = None
    """Tool calls run, failed ones included (refused ones never ran)."""
    max_input_tokens: int | None = None
    """Prompt tokens, as the replies' `Usage` reports them."""
    max_output_tokens: int | None = None
    """Completion tokens; each model call's `max_tokens` is lowered to what is left."""
    max_tokens: int | None = None
    """Input plus output tokens; each model call's `max_tokens` is lowered to what is left."""
    max_cost_micros: int | None = None
    """Cost in integer micro-dollars (`1_000_000` is one dollar)."""
    max_wall_seconds: float | None = None
    """Seconds spent driving (calls, tools, handlers); waiting for a human is free."""
    strict: bool = False
    """Never pass a token or cost cap of this level: each model call's `max_tokens` is
    lowered so its worst case fits, and a call whose worst case cannot fit is not made
    (see docs/concepts.md, "Hard caps")."""

    def __post_init__(self) -> None:
        if all(getattr(self, f) is None for f in self.__dataclass_fields__ if f != "strict"):
            raise MissingBudgetError(
                "Budget() sets no cap, so it bounds nothing; give it at least one, e.g. "
                "Budget(max_steps=50) (a chart run as the root needs max_steps)"
            )

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
