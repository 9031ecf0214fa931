"""The audit timeline of a run: what it did, in what order, and what each step cost."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from statechart.engine import clock_time
from statechart.records.run import Event, Run
from statechart.records.spent import Spent


def timeline(events: Sequence[Event]) -> list[dict[str, Any]]:
    """One row per transition, JSON-ready."""
    rows = []
    for e in events:
        tool = e.call.name if e.call else ",".join(c.name for c in e.calls)
        rows.append(
            {
                "seq": e.seq,
                "time": e.time,
                "actor": e.actor,
                "by": e.by,
                "source": e.source,
                "target": e.target,
                "trigger": e.trigger,
                "tool": tool or None,
                "note": _note(e),
                "reason": e.reason or None,
                "refused": e.refused,
                "error": e.error,
                "arguments": e.call.arguments if e.call else None,
                "result": e.result,
                "tokens": e.usage.tokens,
                "cost_micros": e.usage.cost_micros,
                "wall_ms": e.usage.wall_ms,
                "timeout": e.timeout,
                "wake": e.wake,
                "remembered": e.remembered or None,
            }
        )
    return rows


def _note(e: Event) -> str | None:
    """What a timeline line says of an event: its refusal, error or reason; a retry's
    error and when it tries again."""
    if e.trigger == "retry" and e.error:
        return f"{e.error}; {e.reason}" if e.reason else e.error
    said = e.refused or e.error or e.reason or None
    kept = [f"'{path}' will resume at '{place}'" for path, place in e.remembered.items() if place]
    return "; ".join(x for x in (said, *kept) if x) or None


def totals(events: Sequence[Event]) -> Spent:
    """What all the events cost together."""
    total = Spent()
    for e in events:
        total = total + e.usage
    return total


def render(run: Run, events: Sequence[Event]) -> str:
    """The timeline as text, with totals and the outcome."""
    rows = timeline(events)
    whos = [row["actor"] if not row["by"] else f"{row['actor']}:{row['by']}" for row in rows]
    width = max([6, *map(len, whos)])  # a person's name may be long: the columns follow
    lines = [
        f"run {run.run_id}  chart {run.chart}  model {run.model}",
        f"{'seq':>4}  {'actor':<{width}} {'transition':<46} {'tool':<16} {'tokens':>7} "
        f"{'cost $':>9}  note",
    ]
    for row, who in zip(rows, whos, strict=True):
        note = row["note"] or ""
        if row["actor"] == "human" and row["result"]:
            note = f"{note}; {row['result']}" if note else row["result"]
        move = f"{row['source']} -> {row['target']}"
        lines.append(
            f"{row['seq']:>4}  {who:<{width}} {move:<46} {row['tool'] or '':<16} "
            f"{row['tokens']:>7} {row['cost_micros'] / 1e6:>9.6f}  {note}"
        )
    t = totals(events)
    lines.append(
        f"total: {len(events)} transitions, {t.steps} steps, {t.model_calls} model calls, "
        f"{t.tool_calls} tool calls, {t.tokens} tokens, ${t.cost_micros / 1e6:.6f}, "
        f"{t.wall_ms} ms"
    )
    why = run.reason if run.reason and not run.reason.startswith("ended in") else ""
    lines.append(f"now: {run.status} in '{run.state}'" + (f" ({why})" if why else ""))
    for path, region in run.regions.items():  # a parallel state: where each region is
        said = f" ({region.reason})" if region.reason and region.status != "ended" else ""
        lines.append(f"region {path}: {region.status} in '{region.state}'{said}")
    for label, due in sorted(run.timers.items(), key=lambda item: item[1]):
        lines.append(f"timer: {label} fires at {clock_time(due)}")
    lines.append(f"context: {json.dumps(run.context, sort_keys=True)}")
    for scope, values in run.contexts.items():  # ported sub-charts, outermost first
        lines.append(f"context of {scope}: {json.dumps(values, sort_keys=True)}")
    return "\n".join(lines)
