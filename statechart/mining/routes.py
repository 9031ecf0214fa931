"""How a shadow finds the driver's way to where a loop went, and what it may charge."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from msgspec.structs import replace

from statechart.chart.tools import canonical_json
from statechart.engine import CompiledChart, go
from statechart.records.run import Run
from statechart.records.spent import Spent

MAX_HOPS = 8
"""Code states a single decision may pass through before the loop's next call."""


def targets(compiled_chart: CompiledChart, leaf: str) -> list[str]:
    """Every target a move from `leaf` may name (its own level and the ones around)."""
    out: list[str] = []
    for anc in compiled_chart.ancestors(leaf):
        for t in compiled_chart.table.get(anc, {}).values():
            if t.named and t.dest not in out:
                out.append(t.dest)
    return out


def way(
    compiled_chart: CompiledChart, leaf: str, arrived: Callable[[str], bool]
) -> list[str] | None:
    """The shortest list of targets from `leaf` to a leaf where `arrived` holds: one
    decision, then only code states deciding (guards and caps are not asked here)."""
    frontier, seen = [(leaf, list[str]())], {leaf}
    while frontier:
        here, path = frontier.pop(0)
        for target in targets(compiled_chart, here):
            t = compiled_chart.resolve(here, go(target))
            if t is None:
                continue
            landed = compiled_chart.move(here, t).leaf  # as entered afresh (no history)
            if arrived(landed):
                return [*path, target]
            if (
                compiled_chart.owner_state(landed)[1].kind == "code"
                and landed not in seen
                and len(path) < MAX_HOPS
            ):
                seen.add(landed)
                frontier.append((landed, [*path, target]))
    return None


def charged(compiled_chart: CompiledChart, run: Run, usage: Spent) -> Run:
    """The run with `usage` added to every budget level around its state (a what-if)."""
    return replace(run, ledger=compiled_chart.charged(run.ledger, run.state, usage))


def spent_text(spent: str) -> str:
    """`level:kind` as words: `budget steps of the root`, `budget tool_calls of 'research'`."""
    level, _, kind = spent.rpartition(":")
    if kind == "iterations":
        return f"max_iterations of '{level}'"
    return f"budget {kind} of " + (f"'{level}'" if level else "the root")


def json_arguments(arguments: Any) -> dict[str, Any] | None:
    """A loop call's arguments as a JSON object: parsed when a string (as a provider sends
    them), made JSON when they hold Python objects, `None` when not given."""
    if arguments is None:
        return None
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return {"_raw": arguments}
        return value if isinstance(value, dict) else {"_raw": arguments}
    try:
        value = json.loads(canonical_json(dict(arguments)))
    except (TypeError, ValueError):
        return {"_raw": repr(arguments)}
    return value if isinstance(value, dict) else {"_raw": repr(arguments)}
