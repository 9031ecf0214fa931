"""Token prices: what a model call cost, in integer micro-dollars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Price(NamedTuple):
    """Micro-dollars per million input tokens and per million output tokens."""

    input: int
    output: int


def cost_micros(prices: Mapping[str, Price], model: str, tokens_in: int, tokens_out: int) -> int:
    """The cost of one call; 0 for a model with no price (a local server, say)."""
    price = prices.get(model) or next(
        (prices[k] for k in sorted(prices, key=len, reverse=True) if model.startswith(k + "-")),
        None,
    )  # a dated snapshot (gpt-4o-mini-2024-07-18) costs what its model costs
    if price is None:
        return 0
    return (tokens_in * price.input + tokens_out * price.output) // 1_000_000
