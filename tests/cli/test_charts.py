"""Charts from installed packages: the `statechart.charts` entry-point group, `statechart
charts`, and a registered NAME wherever the command takes a chart.

The package is "installed" without pip (the shared virtualenv stays as it is): its module
and a `tinyagent-0.1.dist-info` directory (METADATA, and entry_points.txt written from the
package's `pyproject.toml`) go into a temporary directory on PYTHONPATH, where
importlib.metadata finds them as it finds any installed distribution."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tomllib
from pathlib import Path

import pytest

from statechart.errors import LoadError
from statechart.io.loading import chart_source, load_chart, registered_charts
from tests.support.cli import ERROR, OK, ROOT, WAITING, cli_env, run_cli, waiting_id

AGENT = """
from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply

chart = Chart(
    "tiny",
    states=(
        State("greet", instructions="Greet, then ask a person."),
        State("ask", kind="approval", on_approve="done", on_reject="failed"),
        State("done", kind="terminal"),
        State("failed", kind="terminal", outcome="failure"),
    ),
    edges=(Edge("greet", "ask"),),
    budget=Budget(max_steps=10),
)


def build() -> Chart:
    return chart


def needs_arguments(size: int) -> Chart:
    return chart


def demo_model() -> FunctionModel:
    return FunctionModel(lambda request: reply(call("next_state", target="ask")), spec="demo:tiny")
"""

PYPROJECT = """
[project]
name = "tinyagent"
version = "0.1"

[project.entry-points."statechart.charts"]
demo = "tinyagent:chart"
built = "tinyagent:build"
broken = "tinyagent:missing"
picky = "tinyagent:needs_arguments"
"""


def install(site: Path, name: str, module: str, pyproject: str) -> None:
    """What pip would leave of the package `name`: its module and its dist-info, whose
    entry_points.txt is the `[project.entry-points]` table of its pyproject.toml."""
    project = tomllib.loads(pyproject)["project"]
    site.mkdir(exist_ok=True)
    (site / f"{name}.py").write_text(module)
    info = site / f"{name}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {project['version']}\n"
    )
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines.extend(f"{key} = {value}" for key, value in entries.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    out = tmp_path / "site"
    package = tmp_path / "tinyagent"  # the package's source tree, as its author has it
    package.mkdir()
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "tinyagent.py").write_text(AGENT)
    install(out, "tinyagent", AGENT, (package / "pyproject.toml").read_text())
    return out


def cli(cwd: Path, site: Path | None, *args: str, code: int | None = OK) -> str:
    path = str(ROOT) if site is None else f"{ROOT}{os.pathsep}{site}"
    done = run_cli(cwd, *args, code=code, environ=cli_env(PYTHONPATH=path))
    return done.stdout + done.stderr


def test_charts_lists_each_registered_chart_or_why_it_does_not_load(
    tmp_path: Path, site: Path
) -> None:
    header, *rows = cli(tmp_path, site, "charts").splitlines()
    assert header.split() == ["NAME", "TARGET", "CHART", "VERSION"]
    by_name = {row.split()[0]: row.split() for row in rows}
    assert sorted(by_name) == ["broken", "built", "demo", "picky"]
    version = by_name["demo"][3]
    assert by_name["demo"][:3] == ["demo", "tinyagent:chart", "tiny"] and len(version) == 16
    assert by_name["built"][1:] == ["tinyagent:build", "tiny", version]
    assert " ".join(by_name["broken"][2:]).startswith("error: tinyagent has no 'missing'")
    assert "needs arguments" in " ".join(by_name["picky"])
    listed = json.loads(cli(tmp_path, site, "charts", "--json"))
    demo = next(x for x in listed if x["name"] == "demo")
    assert demo == {
        "name": "demo",
        "target": "tinyagent:chart",
        "package": "tinyagent",
        "chart": "tiny",
        "version": version,
        "error": None,
    }


def test_charts_with_none_registered_says_so(tmp_path: Path) -> None:
    out = cli(tmp_path, None, "charts")
    assert "no charts registered (entry-point group statechart.charts" in out
    assert json.loads(cli(tmp_path, None, "charts", "--json")) == []


def test_run_check_and_diagram_take_a_registered_name(tmp_path: Path, site: Path) -> None:
    out = cli(tmp_path, site, "run", "demo", code=WAITING)
    assert "of tiny on statechart.db, model demo:tiny" in out
    run_id = waiting_id(out)
    # the store records the MODULE:NAME the name stood for, so approve needs only the id
    db = sqlite3.connect(tmp_path / "statechart.db")
    assert db.execute("SELECT source FROM charts").fetchall() == [("tinyagent:chart",)]
    assert f"run {run_id}: ended in 'done'" in cli(tmp_path, site, "approve", run_id)
    assert cli(tmp_path, site, "check", "built").startswith("ok: tiny version ")
    assert "stateDiagram-v2" in cli(tmp_path, site, "diagram", "demo")
    assert "stateDiagram-v2" in cli(tmp_path, site, "diagram", "tinyagent:chart")


def test_an_unknown_name_lists_the_registered_ones(tmp_path: Path, site: Path) -> None:
    out = cli(tmp_path, site, "run", "dmeo", code=ERROR)
    assert "'dmeo' is not PATH.py:NAME or MODULE:NAME, nor a chart an installed package" in out
    assert "(registered: broken, built, demo, picky; see `statechart charts`)" in out
    assert not (tmp_path / "statechart.db").exists()  # nothing was created


def test_a_name_two_packages_register_differently_is_refused(tmp_path: Path, site: Path) -> None:
    other = PYPROJECT.replace('name = "tinyagent"', 'name = "otheragent"')
    install(site, "otheragent", AGENT, other.replace("tinyagent:", "otheragent:"))
    out = cli(tmp_path, site, "check", "demo", code=ERROR)
    assert "'demo' is registered twice, as otheragent:chart and tinyagent:chart" in out
    assert "give the one you mean as MODULE:NAME" in out
    assert cli(tmp_path, site, "check", "otheragent:chart").startswith("ok: tiny")


def test_loading_by_registered_name_in_python(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        monkeypatch.syspath_prepend(str(site))
        ours = [
            (ep.name, ep.value)
            for ep in registered_charts()
            if ep.dist and ep.dist.name == "tinyagent"
        ]
        assert ours == [
            ("broken", "tinyagent:missing"),
            ("built", "tinyagent:build"),
            ("demo", "tinyagent:chart"),
            ("picky", "tinyagent:needs_arguments"),
        ]
        chart, module = load_chart("built")
        assert chart.name == "tiny" and module.__name__ == "tinyagent"
        assert chart_source("demo") == "tinyagent:chart"
        with pytest.raises(LoadError, match="registered: broken, built, demo, picky"):
            load_chart("nothing")
    finally:
        sys.modules.pop("tinyagent", None)  # imported from a temporary directory
