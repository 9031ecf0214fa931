"""Mermaid diagrams through `statechart diagram`: valid ids for every legal state name, and
the edges a run took marked on the drawing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cli import DEEP, run_cli, waiting_id

MERMAID_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MERMAID_WORDS = {
    "note",
    "state",
    "class",
    "classDef",
    "style",
    "click",
    "scale",
    "default",
    "direction",
}


def diagram_ids(text: str) -> list[str]:
    """Every state id a Mermaid stateDiagram text uses."""
    ids: list[str] = []
    for raw in text.splitlines()[1:]:
        line = raw.strip()
        if line.startswith("state ") and " as " in line:
            ids.append(line.split(" as ", 1)[1].removesuffix("{").strip())
        elif "-->" in line:
            left, right = line.split(" : ", 1)[0].split("-->", 1)
            ids += [x.strip() for x in (left, right) if x.strip() != "[*]"]
        elif line.startswith("class "):
            ids += line.split()[1].split(",")
    return ids


def bad_ids(text: str) -> list[str]:
    return [i for i in diagram_ids(text) if not MERMAID_ID.fullmatch(i) or i in MERMAID_WORDS]


@pytest.mark.parametrize("name", ["needs-human", "note", "default"])
def test_diagram_ids_are_valid_mermaid_for_every_legal_state_name(
    tmp_path: Path, name: str
) -> None:
    """Every legal state name, including ones with '-' and words Mermaid reserves (`note`,
    `default`), is drawn as a valid Mermaid stateDiagram-v2 id."""
    (tmp_path / "c.py").write_text(
        "from statechart import Budget, Chart, Edge, State\n"
        f"chart = Chart('c', budget=Budget(max_steps=9), states=(State('ask'), "
        f"State('{name}', kind='terminal')), edges=(Edge('ask', '{name}'),))\n"
    )
    text = run_cli(tmp_path, "diagram", "c.py:chart").stdout
    assert bad_ids(text) == [], text


def test_diagram_run_marks_the_exit_edges_the_run_took(tmp_path: Path) -> None:
    """`diagram --run` of a deep_research run that reached `done` marks the sub-chart exit
    edge it took (`s_explore --> s_report`) as taken."""
    run_id = waiting_id(run_cli(tmp_path, "run", DEEP, "--input", '{"topic": "x"}').stdout)
    assert "ended in 'done'" in run_cli(tmp_path, "approve", run_id).stdout
    drawn = run_cli(tmp_path, "diagram", "--run", run_id).stdout
    (exit_line,) = [
        x.strip() for x in drawn.splitlines() if x.strip().startswith("s_explore --> s_report")
    ]
    assert "taken 1x" in exit_line, drawn
