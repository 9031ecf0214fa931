"""Parallel states: entering one starts every region, each region steps on its own, the
join (all or first) or a failed region leaves it, budgets around it bound their sum, and
the event log folds to the run at every step; entry and exit order are `transitions`'."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs
from transitions.extensions.nesting import HierarchicalMachine, NestedState

from statechart import Budget, Chart, ChartError, Edge, MemoryStore, State, drive, start
from statechart.engine import compiled, replay
from statechart.engine.parts import JOIN
from statechart.engine.regions import entered, widened
from statechart.engine.tables import CompiledChart
from statechart.records.run import Run, Step
from tests.support import parallel as desk_kit
from tests.support.parallel import Topic, desk, policy, reader

pytestmark = pytest.mark.anyio


async def walk(chart: Chart, model: Any) -> tuple[Run, list[Step], list[Any]]:
    """Drive a new run to its end: the first run, every step, the events."""
    store = MemoryStore()
    first = await start(chart, store=store, model=model)
    steps = [s async for s in drive(chart, first, store=store, model=model)]
    return first, steps, await store.events(first.run_id)


def test_a_parallel_state_compiles_each_region_as_a_sub_chart_with_its_own_level() -> None:
    cc = compiled(desk(names=("web", "papers", "people"), region_budget=Budget(max_steps=9)))
    assert cc.parallels == {"gather": ("gather.web", "gather.papers", "gather.people")}
    assert cc.initial_leaf == "gather"
    assert "gather.web" in cc.levels and "gather.people" in cc.levels
    text = desk().describe()
    assert "join=all failure=failed" in text and "region gather.web" in text
    assert len({desk().version, desk(join="first").version}) == 2


async def test_all_regions_run_and_the_join_writes_each_ones_output() -> None:
    desk_kit.LOOKED_UP.clear()
    first, steps, events = await walk(desk(), policy(lookups=2))
    end = steps[-1].run
    assert (end.state, end.status) == ("done", "ended")
    assert end.context["web"] == "web: 2 facts" and end.context["papers"] == "papers: 2 facts"
    ran = [f"tides {r} {i}" for r in ("papers", "web") for i in (0, 1)]
    assert sorted(desk_kit.LOOKED_UP) == ran
    assert first.state == "gather" and set(first.regions) == {"gather.web", "gather.papers"}
    inside = [e for e in events if e.source.startswith("gather.")]
    assert {e.source.split(".")[1] for e in inside} == {"web", "papers"}
    (join,) = [e for e in events if e.trigger == JOIN]
    assert (join.source, join.actor, join.reason) == ("gather", "system", "all 2 regions ended")
    assert join.seq == max(e.seq for e in inside) + 1  # not before the last region ended
    assert end.regions == {} and end.contexts == {}
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_the_event_log_folds_to_the_run_after_every_step() -> None:
    first, steps, events = await walk(desk(names=("web", "papers", "people")), policy(lookups=2))
    cc = compiled(desk(names=("web", "papers", "people")))
    for step in steps:
        upto = [e for e in events if e.seq <= step.event.seq]
        assert replay(cc, first, upto) == step.run, step.event.seq


async def test_join_first_leaves_when_one_region_ends_and_names_those_cancelled() -> None:
    first, steps, events = await walk(desk(join="first"), policy(lookups=1))
    end = steps[-1].run
    (join,) = [e for e in events if e.trigger == JOIN]
    assert join.reason.startswith("region 'gather.")
    ended = join.reason.split("'")[1]
    other = ({"gather.web", "gather.papers"} - {ended}).pop()
    assert f"cancelled: '{other}' at '{other}." in join.reason
    assert end.state == "done"
    name = ended.split(".")[1]
    assert end.context[name] == f"{name}: 1 facts"
    assert end.context[other.split(".")[1]] is None  # cut off before it wrote anything
    assert [e for e in events if e.source.startswith(other) and e.seq > join.seq] == []


async def test_a_region_that_fails_routes_the_state_and_every_output_is_kept() -> None:
    _, steps, events = await walk(desk(), policy(lookups=1, give_up=frozenset({"papers"})))
    end = steps[-1].run
    assert end.state == "failed"
    (route,) = [e for e in events if e.source == "gather"]
    assert route.trigger == "region_failed" and route.target == "failed"
    assert "region 'gather.papers' ended in 'gather.papers.gave_up', a failure" in route.reason
    assert end.context["papers"] == "papers: partial"  # a failed region's partial output
    if "gather.web.found" in route.exited:  # the other region had ended: its output too
        assert end.context["web"] == "web: 1 facts"


async def test_a_region_that_spends_its_own_budget_ends_exhausted_and_fails_the_state() -> None:
    chart = desk(region_budget=Budget(max_steps=3))
    _, steps, events = await walk(chart, policy(lookups=3))
    end = steps[-1].run
    assert end.state == "failed"
    routes = [e for e in events if e.trigger.startswith("exhaust:gather.")]
    assert routes and routes[0].target.endswith(".exhausted")
    for level in ("gather.web", "gather.papers"):
        assert end.ledger[level].steps <= 3


@pytest.mark.parametrize("calls", [1, 2, 3, 5])
async def test_a_budget_around_the_regions_bounds_their_sum(calls: int) -> None:
    chart = desk(gather_budget=Budget(max_model_calls=calls), names=("web", "papers", "people"))
    _, steps, events = await walk(chart, policy(lookups=3))
    end = steps[-1].run
    assert end.state == "escalated"
    assert end.ledger["gather"].model_calls == calls  # never past the cap, all of it used
    (route,) = [e for e in events if e.trigger == "exhaust:gather"]
    assert route.source == "gather" and "gather:model_calls" in route.reason
    for step in steps:
        spent = step.run.ledger.get("gather")
        assert spent is None or spent.model_calls <= calls


def test_a_region_must_be_a_chart_state_that_ends_in_its_terminals() -> None:
    def chart(*regions: State, **kw: Any) -> Chart:
        return Chart(
            "c",
            states=(
                State("p", kind="parallel", regions=regions, **kw),
                State("done", kind="terminal"),
            ),
            edges=(),
        )

    web = State("web", kind="chart", chart=reader("web"))
    with pytest.raises(ChartError, match="needs regions="):
        chart(exits={"done": "done"})
    with pytest.raises(ChartError, match="a region is a chart state"):
        chart(State("web", instructions="x"), exits={"done": "done"})
    with pytest.raises(ChartError, match="leaves by exits="):
        chart(web)
    with pytest.raises(ChartError, match="two regions are named 'web'"):
        chart(web, web, exits={"done": "done"})
    with pytest.raises(ChartError, match="no exits=, history="):
        chart(
            State("web", kind="chart", chart=reader("web"), exits={"found": "done"}),
            exits={"done": "done"},
        )

    def nested() -> Chart:
        return Chart(
            "nested",
            states=(
                State("inner", kind="parallel", regions=(web,), exits={"done": "end"}),
                State("end", kind="terminal"),
            ),
            edges=(),
        )

    with pytest.raises(ChartError, match="regions do not nest yet"):
        chart(State("outer", kind="chart", chart=nested), exits={"done": "done"})


def test_only_an_after_edge_leaves_a_parallel_state_besides_its_exits() -> None:
    with pytest.raises(ChartError, match="a parallel state leaves once"):
        Chart(
            "c",
            states=(
                State(
                    "p",
                    kind="parallel",
                    regions=(State("web", kind="chart", chart=reader("web")),),
                    exits={"done": "done"},
                ),
                State("done", kind="terminal"),
            ),
            edges=(Edge("p", "done"),),
            budget=Budget(max_steps=5),
        )


# -- entry and exit order against `transitions`' own parallel states -------------------------


class DotState(NestedState):
    separator = "."


class DotMachine(HierarchicalMachine):
    state_cls = DotState


def machine_of(cc: CompiledChart, log: list[str]) -> tuple[Any, HierarchicalMachine]:
    """A `transitions` machine of the chart's nodes, its parallel states declared
    `parallel=`, logging every entry and exit by full path."""

    def node(path: str) -> dict[str, Any]:
        name = path.rsplit(".", 1)[-1]
        kids = [p for p in cc.nodes if p.rsplit(".", 1)[0] == path and "." in p]
        out: dict[str, Any] = {
            "name": name,
            "on_enter": lambda *_: log.append(f"entered {path}"),
            "on_exit": lambda *_: log.append(f"exited {path}"),
        }
        if path in cc.parallels:
            out["parallel"] = [node(r) for r in cc.parallels[path]]
        elif kids:
            out["children"] = [node(k) for k in kids]
            inner = cc.descend(path)[len(path) + 1 :].split(".")[0]
            out["initial"] = inner
        return out

    tops = [p for p in cc.nodes if p and "." not in p]

    class Model:
        pass

    model = Model()
    machine = DotMachine(
        model,
        states=[node(p) for p in tops],
        initial=tops[0],
        auto_transitions=False,
        model_override=False,
    )
    return model, machine


def region_leaves(cc: CompiledChart, region: str) -> list[str]:
    """The resting leaves inside `region` (where a region can stand)."""
    out = []
    for p in cc.nodes:
        if p.startswith(region + ".") and not any(q.startswith(p + ".") for q in cc.nodes):
            owner, state = cc.owner_state(p)
            if state.kind != "terminal" or cc.table.get(p, {}).get("exit") is None:
                out.append(p)
    return out


def two_level(name: str) -> Chart:
    """A region chart with a sub-chart in it: leaves at several depths."""
    return Chart(
        name,
        states=(
            State("plan", instructions="Plan."),
            State(
                "dig",
                kind="chart",
                chart=reader("deep"),
                exits={"found": "found", "gave_up": "lost"},
            ),
            State("found", kind="terminal"),
            State("lost", kind="terminal", outcome="failure"),
        ),
        edges=(Edge("plan", "dig"),),
        context=Topic,
    )


def wide_desk() -> Chart:
    return Chart(
        "wide",
        states=(
            State("intro", instructions="Start."),
            State(
                "gather",
                kind="parallel",
                regions=(
                    State("a", kind="chart", chart=lambda: two_level("a")),
                    State("b", kind="chart", chart=reader("b")),
                    State("c", kind="chart", chart=lambda: two_level("c")),
                ),
                exits={"done": "done"},
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("intro", "gather"),),
        budget=Budget(max_steps=50),
        context=Topic,
    )


WIDE = compiled(wide_desk())


def test_entering_a_parallel_state_enters_as_transitions_does() -> None:
    log: list[str] = []
    model, machine = machine_of(WIDE, log)
    machine.add_transition("go", "intro", "gather")
    model.go()
    t = WIDE.resolve("intro.act", "go:gather")
    assert t is not None
    move = WIDE.move("intro.act", t)
    expected = [p.split(" ", 1)[1] for p in log if p.startswith("entered")]
    assert list(move.entered) == expected
    assert [leaf for _, leaf in move.regions] == model.state  # each region at its initial leaf


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_leaving_a_parallel_state_exits_as_transitions_does(data: st.DataObject) -> None:
    """From any configuration of the regions, the join's move exits what the machine does,
    in its order (deepest level first, the regions in order on each)."""
    config = [data.draw(st.sampled_from(region_leaves(WIDE, r))) for r in WIDE.parallels["gather"]]
    log: list[str] = []
    model, machine = machine_of(WIDE, log)
    machine.add_transition(JOIN, "gather", "done")
    machine.set_state(config, model)
    model.trigger(JOIN)
    expected = [p.split(" ", 1)[1] for p in log if p.startswith("exited")]
    run = structs.replace(
        RUN_AT_GATHER,
        regions=entered(WIDE, tuple(zip(WIDE.parallels["gather"], config, strict=True)), 1),
    )
    t = WIDE.resolve("gather", JOIN)
    assert t is not None
    move = widened(WIDE, run, WIDE.move("gather", t))
    assert list(move.exited) == expected, config


RUN_AT_GATHER = Run(
    run_id="r",
    chart="wide",
    chart_version=WIDE.chart.version,
    state="gather",
    context={},
    model="none",
)
