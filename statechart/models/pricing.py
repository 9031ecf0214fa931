"""Token prices: what a model call cost, in integer micro-dollars."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace

from statechart.records import estimate
from statechart.records.estimate import Price
from statechart.records.messages import Reply, Request, Usage

__all__ = ["Price", "Priced", "cost_micros", "price_of", "usage_of"]

_DATED = re.compile(r"\d{4}-\d{2}-\d{2}|\d{4,8}")
"""A dated snapshot's suffix: `2024-08-06` (OpenAI) or `20250929` (Anthropic)."""


def cost_micros(prices: Mapping[str, Price], model: str, tokens_in: int, tokens_out: int) -> int:
    """The cost of one call; 0 for a model with no price (a local server, say)."""
    price = price_of(prices, model)  # a dated snapshot costs what its model costs
    return 0 if price is None else price.cost(tokens_in, tokens_out)


def price_of(prices: Mapping[str, Price], model: str) -> Price | None:
    """The price of `model` (or of the model a dated snapshot name belongs to), if known."""
    return prices.get(model) or next(
        (prices[k] for k in sorted(prices, key=len, reverse=True) if model.startswith(k + "-")),
        None,
    )


def usage_of(
    prices: Mapping[str, Price],
    model: str,
    request: Request,
    reply: Reply,
    tokens_in: Any,
    tokens_out: Any,
) -> Usage:
    """The reply's usage as the provider reported it; when it reported none (or not both
    counts), a conservative estimate from what was sent and received, marked `missing`
    so the event says so and a token budget still binds."""
    missing = not isinstance(tokens_in, int) or not isinstance(tokens_out, int)
    if missing:
        tokens_in = estimate.input_tokens(request)
        tokens_out = estimate.output_tokens(reply)
    return Usage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_micros=cost_micros(prices, model, tokens_in, tokens_out),
        missing=missing,
    )


class Priced:
    """What the provider adapters share about cost: their price table and model name."""

    model: str
    prices: Mapping[str, Price]

    @property
    def price(self) -> Price | None:
        """What this model costs, for a strict cost cap: its own entry or a dated snapshot
        of one (`gpt-4o-2024-08-06`), never a variant priced like its base
        (`gpt-4o-audio-preview`), which would bound nothing."""
        if self.model in self.prices:
            return self.prices[self.model]
        base, _, tail = self.model.rpartition("-")
        while base and not _DATED.fullmatch(tail) and "-" in base:
            base, _, more = base.rpartition("-")
            tail = f"{more}-{tail}"
        return self.prices.get(base) if base and _DATED.fullmatch(tail) else None

    def charged(self, request: Request, reply: Reply, usage: Any, fields: tuple[str, str]) -> Reply:
        """`reply` with the usage the provider reported in `usage` (its input and output
        token attributes named by `fields`), or an estimate when it reported none."""
        tokens_in, tokens_out = (getattr(usage, name, None) for name in fields)
        found = usage_of(self.prices, self.model, request, reply, tokens_in, tokens_out)
        return replace(reply, usage=found)
