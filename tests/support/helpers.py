"""Small helpers shared by the tests: run a chart with a script, read back the records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statechart import Chart, MemoryStore, Reply, Run, ScriptedModel, Step, Tool, drive, start, tool


async def run_script(
    chart: Chart,
    replies: list[Reply],
    context: Mapping[str, Any] | None = None,
    store: MemoryStore | None = None,
) -> tuple[Run, list[Step], ScriptedModel, MemoryStore]:
    """Start a run, drive it until it waits or ends; return the last run and every step."""
    store = store or MemoryStore()
    model = ScriptedModel(replies)
    run = await start(chart, store=store, model=model, context=context)
    steps = [s async for s in drive(chart, run, store=store, model=model)]
    last = steps[-1].run if steps else run
    return last, steps, model, store


def tool_results(steps: list[Step]) -> dict[str, str]:
    """Every tool-result message in the transcript deltas, by call id."""
    out: dict[str, str] = {}
    for s in steps:
        for m in s.messages:
            if m.role == "tool" and m.tool_call_id is not None:
                out[m.tool_call_id] = m.content
    return out


def loop_tool(name: str, *, repeatable: bool = False) -> Tool:
    """A chart tool standing for one a plain loop runs itself (shadow mode never calls it)."""

    async def fn() -> str:
        raise AssertionError("shadow mode never runs the chart's tools")

    fn.__name__ = name
    fn.__doc__ = f"{name} (the loop runs it)."
    return tool(retry="never", repeatable=repeatable)(fn)
