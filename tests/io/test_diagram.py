"""Mermaid diagrams through `statechart diagram`: valid ids for every legal state name, and
the edges a run took marked on the drawing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from statechart import Budget, Chart, Edge, State
from statechart.io.diagram import mermaid
from tests.support.cli import DEEP, WAITING, run_cli, waiting_id

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
    run_id = waiting_id(
        run_cli(tmp_path, "run", DEEP, "--input", '{"topic": "x"}', code=WAITING).stdout
    )
    assert "ended in 'done'" in run_cli(tmp_path, "approve", run_id).stdout
    drawn = run_cli(tmp_path, "diagram", "--run", run_id).stdout
    exit_line, route_line = [
        x.strip() for x in drawn.splitlines() if x.strip().startswith("s_explore --> s_report")
    ]
    assert exit_line == "s_explore --> s_report : exit done taken 1x", drawn
    assert route_line == "s_explore --> s_report : exhausted", drawn  # on_exhausted, not taken


# -- routes the chart takes by itself: exhaustion and escalation --------------------------

ROUTED = """
from statechart import Budget, Chart, Edge, State


def acquisition():
    return Chart("acquisition", budget=Budget(max_tool_calls=3), states=(
        State("fetch", instructions="fetch", max_iterations=3),
        State("done", kind="terminal"),
    ), edges=(Edge("fetch", "done"),))


chart = Chart("routed", budget=Budget(max_steps=40), states=(
    State("work", instructions="work", max_iterations=2, on_exhausted="report"),
    State("explore", kind="chart", chart=acquisition, exits={"done": "report"},
          on_exhausted="report"),
    State("report", instructions="report"),
    State("done", kind="terminal"),
), edges=(Edge("work", "explore"), Edge("report", "done")))
"""


def declared_states(text: str) -> list[str]:
    """The ids of the simple (not composite) states a diagram declares."""
    return [
        x.strip().split(" as ", 1)[1]
        for x in text.splitlines()
        if x.strip().startswith("state ") and not x.strip().endswith("{")
    ]


def transitions(text: str) -> list[tuple[str, str, str]]:
    """(from, to, label) of every transition line."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if "-->" in line:
            ends, _, label = line.partition(" : ")
            left, right = (x.strip() for x in ends.split("-->", 1))
            out.append((left, right, label))
    return out


def test_diagram_draws_exhaustion_routes_and_no_isolated_implicit_terminal(
    tmp_path: Path,
) -> None:
    """A state with `on_exhausted` and a budgeted sub-chart with `on_exhausted` get a route
    edge each (`exhausted`); the implicit `escalated` terminals that no drawn edge reaches
    (of the root and of the sub-chart) are left out, so no state is drawn isolated."""
    (tmp_path / "c.py").write_text(ROUTED)
    text = run_cli(tmp_path, "diagram", "c.py:chart").stdout
    edges = transitions(text)
    assert ("s_work", "s_report", "exhausted") in edges, text
    assert ("s_explore", "s_report", "exhausted") in edges, text
    assert ("s_explore", "s_report", "exit done") in edges, text
    assert "escalated" not in text and "s_explore__exhausted" not in text, text
    ends = {x for a, b, _ in edges for x in (a, b)}
    assert [s for s in declared_states(text) if s not in ends] == [], text
    assert bad_ids(text) == [], text


def test_diagram_draws_an_explicit_route_into_an_implicit_terminal(tmp_path: Path) -> None:
    """A state routed to the sub-chart's implicit `exhausted` (or an edge to `escalated`)
    draws that terminal, reached by its route edge, and dashes its outline."""
    (tmp_path / "c.py").write_text(
        ROUTED.replace("max_iterations=3)", 'max_iterations=3, on_exhausted="exhausted")').replace(
            'Edge("report", "done")', 'Edge("report", "done"), Edge("report", "escalated")'
        )
    )
    text = run_cli(tmp_path, "diagram", "c.py:chart").stdout
    edges = transitions(text)
    assert ("s_explore__fetch", "s_explore__exhausted", "exhausted") in edges, text
    assert ("s_report", "s_escalated", "") in edges, text
    ends = {x for a, b, _ in edges for x in (a, b)}
    assert [s for s in declared_states(text) if s not in ends] == [], text
    assert "classDef implicit stroke-dasharray:4 4" in text, text
    (implicit,) = [
        x.strip()
        for x in text.splitlines()
        if x.strip().endswith(" implicit") and x.strip().startswith("class ")
    ]
    assert set(implicit.split()[1].split(",")) == {"s_explore__exhausted", "s_escalated"}


def test_diagram_run_draws_the_route_the_run_took_into_escalated() -> None:
    """`diagram --run` of a run that escalated draws `escalated`, reached by an edge from
    the state it escalated from, marked as taken; the route a cap forced is marked too."""
    import anyio

    import statechart as sc
    from statechart.io.diagram import mermaid

    namespace: dict[str, object] = {}
    exec(ROUTED, namespace)
    chart = namespace["chart"]
    assert isinstance(chart, sc.Chart)
    model = sc.ScriptedModel(
        [
            sc.reply(content="thinking"),
            sc.reply(content="still thinking"),  # work's 2 iterations: routed to report
            sc.reply(sc.call("next_state", target="escalated")),
        ]
    )
    store = sc.MemoryStore()
    run = sc.run_sync(chart, store=store, model=model)
    assert run.state == "escalated"
    text = mermaid(chart, run, anyio.run(store.events, run.run_id))
    edges = transitions(text)
    assert ("s_work", "s_report", "exhausted taken 1x") in edges, text
    assert ("s_report", "s_escalated", "escalated taken 1x") in edges, text
    ends = {x for a, b, _ in edges for x in (a, b)}
    assert [s for s in declared_states(text) if s not in ends] == [], text
    assert text.rstrip().endswith("class s_escalated current")


def test_an_after_edge_is_drawn_with_its_delay() -> None:
    from datetime import timedelta

    from statechart import Budget, Chart, Edge, State
    from statechart.io.diagram import mermaid

    chart = Chart(
        "reminded",
        states=(
            State("review", kind="approval", on_approve="done", on_reject="done"),
            State("remind", kind="terminal"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("review", "remind", after=timedelta(hours=24)),),
        budget=Budget(max_steps=10),
    )
    assert "s_review --> s_remind : after 1 d" in mermaid(chart)


def test_a_self_loop_goes_round_a_choice_point_so_it_is_drawn_full_size() -> None:
    chart = Chart(
        "loop",
        states=(State("work", max_visits=3), State("done", kind="terminal")),
        edges=(Edge("work", "work", max_traversals=2), Edge("work", "done")),
        budget=Budget(max_steps=10),
    )
    drawn = mermaid(chart).splitlines()
    assert "  state s_work_loop <<choice>>" in drawn
    assert "  s_work --> s_work_loop : max 2" in drawn
    assert "  s_work_loop --> s_work" in drawn
    assert not [line for line in drawn if line.strip().startswith("s_work --> s_work ")]


def test_a_parallel_state_is_drawn_with_its_regions_side_by_side() -> None:
    """Regions as Mermaid draws concurrent states (split by `--`), the join and the failure
    route drawn; a run in it marks each region's active state."""
    import anyio

    from statechart import MemoryStore, start
    from tests.support.parallel import desk, policy

    chart = desk(names=("web", "papers", "people"))
    text = mermaid(chart)
    assert bad_ids(text) == [], text
    body = text.split('state "gather (parallel)" as s_gather {', 1)[1]
    assert body.count("\n    --\n") == 2  # three regions, two separators
    assert 'state "web" as s_gather__web {' in body
    assert "s_gather --> s_write : join all" in text
    assert "s_gather --> s_failed : region failed" in text
    run = anyio.run(lambda: start(chart, store=MemoryStore(), model=policy()))
    marked = mermaid(chart, run).splitlines()[-1]
    for region in ("web", "papers", "people"):
        assert f"s_gather__{region}__search" in marked
    assert "s_gather," in marked + ","


def test_a_map_state_is_drawn_as_its_sub_chart_run_for_each_item() -> None:
    from tests.engine.test_map import desk as map_desk

    text = mermaid(map_desk(concurrency=3))
    assert bad_ids(text) == [], text
    assert 'state "review (map over documents, 3 at once)" as s_review {' in text
    assert 'state "each document" as s_review__0 {' in text
    assert "s_review__1" not in text  # one instance drawn for all
    assert "s_review --> s_done : join all" in text
