"""What a shadow run found: the moves and calls the chart would have refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statechart.records.run import Event
from statechart.store.base import Store

SHADOW_MODEL = "shadow"
"""The model spec of a shadow run: the loop, not a model, chose its moves."""


@dataclass(frozen=True)
class Refusal:
    """A move or call the chart would have refused."""

    seq: int
    kind: str
    source: str
    target: str
    tool: str
    reason: str


def state_of(leaf: str) -> str:
    """The state a leaf belongs to (a model state's think/act/approve sub-states fold in)."""
    head, _, last = leaf.rpartition(".")
    return head if head and last in ("think", "act", "approve") else leaf


def refusals_of(events: Sequence[Event]) -> list[Refusal]:
    """The refusals recorded in a shadow run's events."""
    out = []
    for e in events:
        if e.refused is None or not e.reason.startswith("shadow:"):
            continue
        tool = e.call.name if e.call is not None else ""
        out.append(
            Refusal(
                e.seq,
                e.reason.removeprefix("shadow:"),
                state_of(e.source),
                state_of(e.target),
                tool,
                e.refused,
            )
        )
    return out


async def shadow_refusals(store: Store, *, chart: str | None = None) -> dict[str, list[Refusal]]:
    """Refusals per shadow run stored in `store` (runs recorded by `ShadowRun.save`)."""
    runs = [r for r in await store.runs(chart=chart) if r.model == SHADOW_MODEL]
    runs.sort(key=lambda r: (r.created_at, r.run_id))
    return {r.run_id: refusals_of(await store.events(r.run_id)) for r in runs}
