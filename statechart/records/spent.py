"""What a level has spent, or what one step cost: the ledger's unit.

Spending at any depth charges every ancestor level, so a child can never spend
past what its parents have left. All amounts are integers: cost is in
micro-dollars, wall time in milliseconds.
"""

from __future__ import annotations

from statechart.records.record import Record

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


class Spent(Record, frozen=True, kw_only=False):
    """What one budget level has spent (`Run.ledger`), or what one step cost (`Event.usage`).

    A step's cost is added to every level around the state it started in: `root`, then
    each enclosing state or sub-chart that has a `Budget`, keyed by its path, so a level
    sums all its visits and its children's spending. Its `Budget` caps are checked
    against that sum before every step.

    Example:
        ```python
        from statechart import Spent

        reply = Spent(steps=1, model_calls=1, input_tokens=900, output_tokens=40, cost_micros=300)
        tool = Spent(steps=1, tool_calls=1, wall_ms=12)
        level = reply + tool  # how a level adds up the steps charged to it
        assert (level.steps, level.tokens, level.wall_ms) == (2, 940, 12)
        ```
    """

    steps: int = 0
    """Steps charged (one each); exhaustion routes, human decisions, resumes are free."""
    model_calls: int = 0
    """Model calls started, failed ones included."""
    tool_calls: int = 0
    """Tool calls run, failed ones included (a refused call never ran)."""
    input_tokens: int = 0
    """Prompt tokens, as the reply's `Usage` reported them (or an adapter's estimate)."""
    output_tokens: int = 0
    """Completion tokens, as the reply's `Usage` reported them (or an adapter's estimate)."""
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
            self.steps + other.steps,
            self.model_calls + other.model_calls,
            self.tool_calls + other.tool_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_micros + other.cost_micros,
            self.wall_ms + other.wall_ms,
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


spent = Spent
"""The hot path's constructor: the amounts in field order, positionally."""

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
