"""Budgets and the ledger of what each nesting level has spent.

A budget caps a level (the root chart, a state, a sub-chart). Spending at any
depth charges every ancestor level, so a child can never spend past what its
parents have left. All amounts are integers: cost is in micro-dollars, wall
time in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

KINDS = (
    "steps",
    "model_calls",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "tokens",
    "cost_micros",
    "wall_ms",
)


class Spent(BaseModel):
    """What one level has spent (or what one step cost)."""

    model_config = ConfigDict(frozen=True)

    steps: int = 0
    """Events charged to this level (each step is one)."""
    model_calls: int = 0
    """Model calls started."""
    tool_calls: int = 0
    """Tool calls executed."""
    input_tokens: int = 0
    """Prompt tokens reported by the model."""
    output_tokens: int = 0
    """Completion tokens reported by the model."""
    cost_micros: int = 0
    """Cost in integer micro-dollars (1_000_000 = one dollar)."""
    wall_ms: int = 0
    """Wall time spent driving, in milliseconds; time waiting for a human is not counted."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Spent) -> Spent:
        return Spent(
            steps=self.steps + other.steps,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_micros=self.cost_micros + other.cost_micros,
            wall_ms=self.wall_ms + other.wall_ms,
        )

    def is_zero(self) -> bool:
        """True when nothing was spent."""
        return not (self.steps or self.model_calls or self.tool_calls or self.input_tokens
                    or self.output_tokens or self.cost_micros or self.wall_ms)


HARD_KINDS = ("steps", "wall_ms")
"""Spent, these stop every step; other spent kinds stop only steps that start a call."""
ZERO = Spent()
ONE_STEP = Spent(steps=1)


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
        }
        return Budget(**vals)  # type: ignore[arg-type]


def spent_of(spent: Spent, kind: str) -> int:
    """The amount of one kind in a `Spent` (including the derived `tokens`)."""
    value: int = getattr(spent, kind)
    return value


def remaining(caps: dict[str, int], spent: Spent, kind: str) -> int | None:
    """What is left of one kind at one level, or None when uncapped."""
    cap = caps.get(kind)
    if cap is None:
        return None
    return max(0, cap - spent_of(spent, kind))
