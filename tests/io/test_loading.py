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


CHART_FILE = """
from statechart import Budget, Chart, Edge, State

chart = Chart(
    "here",
    states=(State("work"), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
    budget=Budget(max_steps=5),
)


def build():
    open(__file__ + ".called", "w").write("called")
    return chart
"""


def test_a_worker_loads_chart_files_only_inside_its_agents_folder(tmp_path: Any) -> None:
    from statechart.errors import SourceRefusedError
    from statechart.io.loading import load_chart, trusted_target

    agents, outside = tmp_path / "agents", tmp_path / "outside"
    agents.mkdir()
    outside.mkdir()
    (agents / "here.py").write_text(CHART_FILE)
    (outside / "there.py").write_text(CHART_FILE)
    (agents / "link.py").symlink_to(outside / "there.py")
    inside = f"{agents / 'here.py'}:chart"
    assert trusted_target(inside, agents) == inside
    # a path from another machine: looked for in the folder by its file name
    assert trusted_target("/home/alice/proj/agents/here.py:chart", agents) == inside
    refused = {
        f"{outside / 'there.py'}:chart": "not a file in the --agents folder",
        f"{agents}/../outside/there.py:chart": "not a file in the --agents folder",
        f"{agents / 'link.py'}:chart": "not a file in the --agents folder",
        "some.module:chart": "no installed package registers",
        "no-colon": "is not PATH.py:NAME",
    }
    for source, why in refused.items():
        with pytest.raises(SourceRefusedError, match=why):
            trusted_target(source, agents)
    with pytest.raises(SourceRefusedError, match="no --agents"):
        trusted_target(inside, None)
    # a function the row names is never called (the CLI's own targets may name one)
    with pytest.raises(SourceRefusedError, match="is a function, not a Chart"):
        load_chart(trusted_target(f"{agents / 'here.py'}:build", agents), builders=False)
    assert not (agents / "here.py.called").exists()
    assert load_chart(f"{agents / 'here.py'}:build")[0].name == "here"


def test_a_worker_loads_a_module_only_when_an_installed_package_registers_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statechart.errors import SourceRefusedError
    from statechart.io.loading import trusted_target
    from tests.cli.test_charts import PYPROJECT, install

    site = tmp_path / "site"
    install(site, "tinyagent", CHART_FILE, PYPROJECT)
    monkeypatch.syspath_prepend(str(site))
    assert trusted_target("tinyagent:chart", None) == "tinyagent:chart"  # registered as demo
    with pytest.raises(SourceRefusedError, match="no installed package registers"):
        trusted_target("tinyagent:other", None)  # the module is there; this name is not


def test_a_stored_source_is_called_only_when_a_package_registers_that_function(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statechart.errors import SourceRefusedError
    from statechart.io.loading import load_trusted
    from tests.cli.test_charts import PYPROJECT, install

    site = tmp_path / "site"
    install(site, "tinyagent", CHART_FILE, PYPROJECT)
    monkeypatch.syspath_prepend(str(site))
    assert load_trusted("tinyagent:build", None)[0].name == "here"  # registered as "built"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "here.py").write_text(CHART_FILE)
    with pytest.raises(SourceRefusedError, match="is a function, not a Chart"):
        load_trusted(f"{agents / 'here.py'}:build", agents)
    assert load_trusted(f"{agents / 'here.py'}:chart", agents)[0].name == "here"
