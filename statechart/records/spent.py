"""What a level has spent, or what one step cost: the ledger's unit.

Spending at any depth charges every ancestor level, so a child can never spend
past what its parents have left. All amounts are integers: cost is in
micro-dollars, wall time in milliseconds.
"""

from __future__ import annotations

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
        return not (
            self.steps
            or self.model_calls
            or self.tool_calls
            or self.input_tokens
            or self.output_tokens
            or self.cost_micros
            or self.wall_ms
        )


HARD_KINDS = ("steps", "wall_ms")
"""Spent, these stop every step; other spent kinds stop only steps that start a call."""
ZERO = Spent()
ONE_STEP = Spent(steps=1)


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
