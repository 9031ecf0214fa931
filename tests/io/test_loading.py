"""Where a started chart came from (`source_of`): found for module-level charts, never a
reason for `start()` to fail."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from statechart import (
    Budget,
    Chart,
    Edge,
    MemoryStore,
    ScriptedModel,
    State,
    call,
    reply,
    run_to_end,
    start,
)
from statechart.io.loading import source_of


class Lazy:
    """Like an unconfigured lazy settings object: asking its class raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise RuntimeError("settings are not configured")


def made(name: str) -> Chart:
    return Chart(
        name,
        states=(State("a", instructions="Finish."), State("done", kind="terminal")),
        edges=(Edge("a", "done"),),
        budget=Budget(max_steps=5),
    )


@pytest.mark.anyio
async def test_a_module_attribute_that_breaks_on_inspection_does_not_break_start() -> None:
    odd = types.ModuleType("odd_settings_module")
    odd.settings = Lazy()  # type: ignore[attr-defined]
    sys.modules[odd.__name__] = odd
    try:
        chart = made("inside_a_function")
        store, model = MemoryStore(), ScriptedModel([reply(call("next_state", target="done"))])
        run = await run_to_end(
            chart, await start(chart, store=store, model=model), store=store, model=model
        )
        assert run.state == "done"
        assert source_of(chart) is None
    finally:
        del sys.modules[odd.__name__]


def test_a_module_level_chart_is_found_by_module_name() -> None:
    home = types.ModuleType("charts_home_module")
    home.chart = made("at_module_level")  # type: ignore[attr-defined]
    sys.modules[home.__name__] = home
    try:
        assert source_of(home.chart) == "charts_home_module:chart"  # type: ignore[attr-defined]
    finally:
        del sys.modules[home.__name__]
