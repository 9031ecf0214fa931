"""Hard caps: a strict level's token and cost caps are never passed (`Budget.strict`).

Before a model call, its `max_tokens` is lowered so that the call's worst case (the
input estimated from what is sent, plus `max_tokens`, priced) fits what every strict
level around the state has left; a call whose worst case cannot fit is not made and the
level is exhausted. A reply that uses more than that worst case (the estimate was wrong)
is a breach: charged, recorded on its event, and the level is spent from then on.
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec.structs import replace

from statechart.engine.tables import CompiledChart, Level
from statechart.records.estimate import Price, input_tokens
from statechart.records.messages import Request, Usage
from statechart.records.run import Run
from statechart.records.spent import ZERO, Spent, remaining

MILLION = 1_000_000


@dataclass(frozen=True)
class Worst:
    """The most a call may use under strict caps: its estimated input and `max_tokens`."""

    input_tokens: int
    max_tokens: int | None
    cost_micros: int | None
    """The worst case priced, when the model has a price."""


def strict_levels(compiled_chart: CompiledChart, leaf: str) -> tuple[Level, ...]:
    """The strict levels around `leaf`, outermost first (cached per compiled chart)."""
    found = compiled_chart.strict.get(leaf)
    if found is None:
        found = compiled_chart.strict[leaf] = tuple(
            level for level in compiled_chart.levels_of(leaf) if level.strict
        )
    return found


def fit(
    compiled_chart: CompiledChart, run: Run, request: Request, price: Price | None
) -> tuple[Request, Worst | None] | str:
    """`request` with `max_tokens` lowered so its worst case fits every strict level, and
    that worst case; or `level:kind` of the level it cannot fit (no call is made)."""
    levels = strict_levels(compiled_chart, run.state)
    if not levels:
        return request, None
    est_in = input_tokens(request)
    cap = request.max_tokens
    for level in levels:
        spent = run.ledger.get(level.path, ZERO)
        left_in = remaining(level.caps, spent, "input_tokens")
        if left_in is not None and est_in > left_in:
            return f"{level.path}:input_tokens"
        room = _room(level, spent, est_in, price)
        if isinstance(room, str):
            return room
        if room is not None:
            cap = room if cap is None else min(cap, room)
    if cap is not None and cap < 1:
        return f"{levels[0].path}:output_tokens"
    worst_cost = price.cost(est_in, cap) if price is not None and cap is not None else None
    return replace(request, max_tokens=cap), Worst(est_in, cap, worst_cost)


def _room(level: Level, spent: Spent, est_in: int, price: Price | None) -> int | str | None:
    """Output tokens the level leaves a call with `est_in` input tokens, or why none."""
    room: int | None = None
    for kind in ("output_tokens", "tokens"):
        left = remaining(level.caps, spent, kind)
        if left is not None:
            fits = left - (est_in if kind == "tokens" else 0)
            if fits < 1:
                return f"{level.path}:{kind}"
            room = fits if room is None else min(room, fits)
    left_cost = remaining(level.caps, spent, "cost_micros")
    if left_cost is not None:
        if price is None:
            return f"{level.path}:cost_micros"  # start() refuses this; never a silent pass
        budget = (left_cost + 1) * MILLION - 1 - est_in * price.input
        if budget < 0 or (price.output and budget < price.output):
            return f"{level.path}:cost_micros"
        if price.output:
            fits = budget // price.output
            room = fits if room is None else min(room, fits)
    return room


def breach(worst: Worst, usage: Usage) -> str | None:
    """The cap kind a reply's usage overran its worst case in, if it did."""
    over_tokens = usage.input_tokens > worst.input_tokens or (
        worst.max_tokens is not None and usage.output_tokens > worst.max_tokens
    )
    if over_tokens:
        return "tokens"
    if worst.cost_micros is not None and usage.cost_micros > worst.cost_micros:
        return "cost_micros"
    return None


def breached(compiled_chart: CompiledChart, run: Run, leaf: str, kind: str) -> dict[str, str]:
    """`run.breached` with every strict level around `leaf` marked spent in `kind`."""
    return {**run.breached, **{level.path: kind for level in strict_levels(compiled_chart, leaf)}}


def unpriced(compiled_chart: CompiledChart) -> str | None:
    """Path of a strict level with a cost cap (it needs the model's price), if any."""
    for level in compiled_chart.levels.values():
        if level.strict and "cost_micros" in level.caps:
            return level.path
    return None
