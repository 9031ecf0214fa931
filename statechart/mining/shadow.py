"""Shadow mode: a plain loop keeps running while a chart judges every call it makes.

A `ShadowRun` follows the loop: each call is labelled `tool:outcome`, moved to
the chart state that hosts the tool through `try_move()` (the legality, guard
and cap check the driver uses) and checked against the caps the driver's planner
applies. Whatever the chart would have refused is recorded as an event with a
`shadow:<kind>` reason; the shadow then follows the loop anyway. The loop's
own results are returned untouched.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from statechart.chart.chart import Chart
from statechart.engine import compiled, entered_at_start
from statechart.mining.refusals import (
    SHADOW_MODEL,
    Refusal,
    refusals_of,
    shadow_refusals,
)
from statechart.mining.shadow_run import Observe, Outcome, ShadowRun, default_outcome
from statechart.mining.traces import Trace
from statechart.records.run import Run, Visit
from statechart.store.base import Store

__all__ = [
    "SHADOW_MODEL",
    "Observe",
    "Outcome",
    "Refusal",
    "Shadow",
    "ShadowRun",
    "default_outcome",
    "refusals_of",
    "replay_all",
    "run_shadowed",
    "shadow_refusals",
]


class Shadow:
    """Judges plain-loop runs against `chart` and records what it would have refused."""

    def __init__(
        self,
        chart: Chart,
        *,
        outcome: Outcome = default_outcome,
        observe: Observe | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.chart, self.outcome, self.observe, self.clock = chart, outcome, observe, clock

    def start(
        self, run_id: str | None = None, context: Mapping[str, Any] | None = None
    ) -> ShadowRun:
        """A new shadow run at the chart's initial state."""
        compiled_chart = compiled(self.chart)
        leaf = compiled_chart.initial_leaf
        owner, state = compiled_chart.owner_state(leaf)
        entered = [
            p
            for p in reversed(compiled_chart.ancestors(leaf))
            if compiled_chart.nodes[p].state is not None
        ]
        ctx = self.chart.context.model_validate(dict(context or {})).model_dump(mode="json")
        rid = run_id or f"shadow-{uuid.uuid4().hex}"
        run = Run(
            run_id=rid,
            chart=self.chart.name,
            chart_version=self.chart.version,
            model=SHADOW_MODEL,
            state=leaf,
            context=ctx,
            contexts=entered_at_start(compiled_chart, ctx, leaf),
            visits=dict.fromkeys(entered, 1),
            visit=Visit(state=owner, seq=0) if state.kind == "model" else None,
            lineage_root=rid,
            created_at=self.clock(),
            status="waiting" if state.kind == "approval" else "running",
        )
        return ShadowRun(self.chart, run, self.outcome, self.observe, self.clock)

    def replay(self, trace: Trace) -> ShadowRun:
        """Judge a recorded trace (no arguments, so no repeat check) and finish it."""
        shadow = self.start(run_id=f"shadow-{trace.run_id}")
        for c in trace.calls:
            shadow.record(c.tool, None, c.outcome)
        shadow.finish()
        return shadow


def replay_all(chart: Chart, traces: list[Trace]) -> dict[str, list[Refusal]]:
    """Refusals per recorded run when `chart` judges each trace."""
    shadow = Shadow(chart)
    return {t.run_id: shadow.replay(t).refusals for t in traces}


async def run_shadowed(
    chart: Chart,
    store: Store,
    loop: Callable[[Callable[..., Any]], Awaitable[Any]],
    dispatch: Callable[..., Any],
    *,
    run_id: str | None = None,
    **options: Any,
) -> tuple[Any, ShadowRun]:
    """Run an async `loop(dispatch)` with its dispatcher shadowed; store what was judged."""
    shadow = Shadow(chart, **options).start(run_id)
    try:
        result = await loop(shadow.wrap(dispatch))
        shadow.finish()
        return result, shadow
    finally:
        await shadow.save(store)
