"""History states: a `history=` chart state interrupted by an `after=` edge resumes where
it was when it is entered again (shallow: its active state; deep: the innermost one); a
sub-chart that ended starts over; the event log folds to the same run."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from statechart import (
    Budget,
    Chart,
    ChartError,
    Decision,
    Edge,
    FunctionModel,
    MemoryStore,
    Reply,
    Request,
    State,
    call,
    reply,
    run_to_end,
    start,
)
from statechart.engine import compiled
from statechart.engine.replay import replay
from statechart.records.run import Run

pytestmark = pytest.mark.anyio


class Clock:
    """Time the test moves: the timer fires when the model says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def back(ctx: Any) -> Decision:
    return Decision(target="research", reason="checked in")


def inner() -> Chart:
    return Chart(
        "reading",
        states=(
            State("skim", instructions="Skim."),
            State("take_notes", instructions="Take notes."),
            State("finished", kind="terminal"),
        ),
        edges=(Edge("skim", "take_notes"), Edge("take_notes", "finished")),
    )


def team() -> Chart:
    return Chart(
        "team",
        states=(
            State("search", instructions="Search."),
            State("read", kind="chart", chart=inner, exits={"finished": "done"}),
            State("done", kind="terminal"),
        ),
        edges=(Edge("search", "read"),),
    )


def desk(history: str | None) -> Chart:
    return Chart(
        "desk",
        states=(
            State("research", kind="chart", chart=team, history=history, exits={"done": "answer"}),  # type: ignore[arg-type]
            State("check_in", kind="code", handler=back, max_visits=3),
            State("answer", instructions="Answer."),
            State("done", kind="terminal"),
        ),
        edges=(
            Edge("research", "check_in", after=60),
            Edge("check_in", "research"),
            Edge("answer", "done"),
        ),
        budget=Budget(max_steps=60),
    )


NEXT = {
    "research.search": "read",
    "research.read.skim": "take_notes",
    "research.read.take_notes": "finished",
    "answer": "done",
}


def policy(clock: Clock, interrupt_in: str) -> FunctionModel:
    """Leave each state for the next; the first time in `interrupt_in`, let an hour pass
    instead (the run's `after=` edge fires before the next step)."""
    seen: set[str] = set()

    def decide(request: Request) -> Reply:
        if request.state == interrupt_in and interrupt_in not in seen:
            seen.add(interrupt_in)
            clock.now += 3600
            return reply(call("next_state", target=NEXT[request.state]))
        return reply(call("next_state", target=NEXT[request.state]))

    return FunctionModel(decide, spec="policy")


async def drive(history: str | None, interrupt_in: str) -> tuple[Run, list[Any], Any, Run]:
    """The run at its end, its events, its chart and the run as `start` made it."""
    clock, store = Clock(), MemoryStore()
    chart = desk(history)
    model = policy(clock, interrupt_in)
    run = await start(chart, store=store, model=model, clock=clock)
    end = await run_to_end(chart, run, store=store, model=model, clock=clock)
    return end, await store.events(run.run_id), chart, run


def entered_after_check_in(events: list[Any]) -> str:
    """The leaf the run went to when it came back from check_in."""
    (back_in,) = [e for e in events if e.source == "check_in"]
    return str(back_in.target)


@pytest.mark.parametrize(
    ("history", "interrupt_in", "resumed_at"),
    [
        (None, "research.read.take_notes", "research.search.think"),
        ("shallow", "research.read.take_notes", "research.read.skim.think"),
        ("deep", "research.read.take_notes", "research.read.take_notes.think"),
        ("deep", "research.search", "research.search.think"),
    ],
)
async def test_an_interrupted_sub_chart_resumes_as_its_history_says(
    history: str | None, interrupt_in: str, resumed_at: str
) -> None:
    end, events, chart, first = await drive(history, interrupt_in)
    assert end.state == "done"
    (fired,) = [e for e in events if e.target == "check_in"]
    assert fired.trigger == "go:check_in" and fired.actor == "system"
    assert "after edge to 'check_in' fired" in fired.reason
    assert entered_after_check_in(events) == resumed_at
    if history is not None:
        owner = interrupt_in if history == "deep" else "research." + interrupt_in.split(".")[1]
        assert fired.remembered == {"research": owner}  # the event says what it remembered
    else:
        assert not fired.remembered and end.history == {}
    assert end.history == {}  # the sub-chart ended at last: forgotten
    finished = [e for e in events if e.remembered.get("research") == ""]
    assert len(finished) == (1 if history else 0)
    assert replay(compiled(chart), first, events) == end  # the log folds to the run
    halfway = [e for e in events if e.seq <= fired.seq]
    folded = replay(compiled(chart), first, halfway)
    assert folded.state == "check_in" and folded.history == ({"research": owner} if history else {})


async def test_an_interruption_is_remembered_on_the_run_until_it_comes_back() -> None:
    clock, store = Clock(), MemoryStore()
    chart = desk("deep")
    reached: list[dict[str, str]] = []

    def decide(request: Request) -> Reply:
        if request.state == "research.read.skim" and not reached:
            clock.now += 3600
        return reply(call("next_state", target=NEXT[request.state]))

    model = FunctionModel(decide, spec="policy")
    run = await start(chart, store=store, model=model, clock=clock)
    from statechart import drive as drive_steps

    async for step in drive_steps(chart, run, store=store, model=model, clock=clock):
        if step.run.state == "check_in":
            reached.append(step.run.history)
    assert reached == [{"research": "research.read.skim"}]


def test_history_is_for_chart_states_and_counts_in_the_version() -> None:
    with pytest.raises(ChartError, match="history= is for chart states"):
        Chart(
            "c",
            states=(State("a", history="deep"), State("done", kind="terminal")),
            edges=(Edge("a", "done"),),
        )
    with pytest.raises(ChartError, match="'shallow' or 'deep'"):
        desk("sideways")
    assert len({desk(None).version, desk("shallow").version, desk("deep").version}) == 3


def test_only_an_after_edge_may_leave_a_chart_state() -> None:
    with pytest.raises(ChartError, match="only an after= edge may interrupt it"):
        Chart(
            "c",
            states=(
                State("research", kind="chart", chart=team, exits={"done": "done"}),
                State("done", kind="terminal"),
            ),
            edges=(Edge("research", "done"),),
            budget=Budget(max_steps=5),
        )


def test_tables_and_machine_agree_on_an_after_edge_leaving_a_chart_state() -> None:
    """The `transitions` machine takes the edge from the chart state whichever leaf of
    its sub-chart is active, exiting and entering what the tables say."""
    from tests.engine.test_machine import _outcome, _same_exits_and_entries, leaves

    cc = compiled(desk("deep"))
    inside = [leaf for leaf in leaves(cc) if leaf.startswith("research.")]
    assert len(inside) > 6
    for leaf in inside:
        for allowed in (True, False):
            table = _outcome(cc.fire, leaf, "go:check_in", allowed)
            assert table == _outcome(cc.machine_fire, leaf, "go:check_in", allowed)
            if cc.owner_state(leaf)[1].kind != "terminal":
                assert table[0] == "check_in", leaf
                _same_exits_and_entries(cc, leaf, "go:check_in")


async def test_the_audit_timeline_says_where_an_interrupted_state_will_resume() -> None:
    from statechart.io.audit import timeline

    _, events, _, _ = await drive("deep", "research.read.take_notes")
    (row,) = [r for r in timeline(events) if r["target"] == "check_in"]
    assert row["remembered"] == {"research": "research.read.take_notes"}
    assert row["note"].endswith("'research' will resume at 'research.read.take_notes'")


async def test_what_is_remembered_is_stored_and_read_back_from_sqlite(tmp_path: Any) -> None:
    from statechart import SQLiteStore, load_run

    clock, chart = Clock(), desk("deep")
    store = SQLiteStore(str(tmp_path / "runs.db"))
    try:
        model = policy(clock, "research.search")
        run = await start(chart, store=store, model=model, clock=clock)
        stopped = None
        from statechart import drive as drive_steps

        steps = drive_steps(chart, run, store=store, model=model, clock=clock)
        async with contextlib.aclosing(steps):  # closed: the lease is released
            async for step in steps:
                if step.run.state == "check_in":
                    stopped = step.run
                    break
        assert stopped is not None and stopped.history == {"research": "research.search"}
        again = await load_run(chart, run.run_id, store=store)
        assert again.history == {"research": "research.search"}
        (fired,) = [e for e in await store.events(run.run_id) if e.target == "check_in"]
        assert fired.remembered == {"research": "research.search"}
        end = await run_to_end(chart, run.run_id, store=store, model=model, clock=clock)
        assert end.state == "done" and end.history == {}
    finally:
        store.close()


def stepping(clock: Clock, target: str, minutes: list[float]) -> Any:
    """A code state's handler: each call lets the next of `minutes` pass, then moves on."""
    left = iter(minutes)

    async def handler(ctx: Any) -> Decision:
        clock.now += 60 * next(left, 0)
        return Decision(target=target, reason="moved on")

    return handler


def steps_chart(clock: Clock, s1: list[float], s2: list[float], s3: list[float]) -> Any:
    def chart() -> Chart:
        return Chart(
            "steps",
            states=(
                State("s1", kind="code", handler=stepping(clock, "s2", s1)),
                State("s2", kind="code", handler=stepping(clock, "s3", s2)),
                State("s3", kind="code", handler=stepping(clock, "fin", s3)),
                State("fin", kind="terminal"),
            ),
            edges=(Edge("s1", "s2"), Edge("s2", "s3"), Edge("s3", "fin")),
        )

    return chart


async def moves_of(chart: Chart, clock: Clock) -> tuple[Run, list[Any]]:
    store, model = MemoryStore(), FunctionModel(lambda r: reply(), spec="unused")
    run = await start(chart, store=store, model=model, clock=clock)
    end = await run_to_end(chart, run, store=store, model=model, clock=clock)
    events = await store.events(run.run_id)
    assert replay(compiled(chart), run, events) == end
    return end, events


async def test_a_timer_that_leaves_and_enters_the_same_history_state_resumes_in_it() -> None:
    clock = Clock()
    chart = Chart(
        "loop",
        states=(
            State(
                "h",
                kind="chart",
                chart=steps_chart(clock, [0], [2], [0]),
                history="deep",
                exits={"fin": "done"},
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("h", "h", after=60, max_traversals=3),),
        budget=Budget(max_steps=20),
    )
    end, events = await moves_of(chart, clock)
    (tick,) = [e for e in events if e.trigger == "go:h"]
    assert (tick.source, tick.target, tick.remembered) == ("h.s3", "h.s3", {"h": "h.s3"})
    assert events[-1].remembered == {"h": ""} and end.history == {}  # ended: forgotten
    assert end.state == "done"


async def test_a_sub_chart_that_ends_into_itself_starts_over_despite_an_old_memory() -> None:
    clock = Clock()

    async def back(ctx: Any) -> Decision:
        return Decision(target="h")

    chart = Chart(
        "again",
        states=(
            State(
                "h",
                kind="chart",
                chart=steps_chart(clock, [0, 0], [2, 0], [0, 0]),
                history="deep",
                exits={"fin": "h"},
                max_visits=3,
            ),
            State("pause", kind="code", handler=back, max_visits=2),
            State("done", kind="terminal"),
        ),
        edges=(Edge("h", "pause", after=60), Edge("pause", "h"), Edge("pause", "done")),
        budget=Budget(max_steps=14),
    )
    _, events = await moves_of(chart, clock)
    (interrupted,) = [e for e in events if e.target == "pause"]
    assert interrupted.remembered == {"h": "h.s3"}
    (resumed,) = [e for e in events if e.source == "pause"]
    assert resumed.target == "h.s3"
    ended = next(e for e in events if e.seq > resumed.seq and e.trigger == "go:h.fin")
    assert (ended.target, ended.remembered) == ("h.s1", {"h": ""})  # started over


async def test_a_state_that_lost_its_history_in_a_new_chart_version_starts_over() -> None:
    v1, v2 = desk("deep"), desk(None)
    cc = compiled(v2)
    t = cc.resolve("check_in", "go:research")
    assert t is not None
    kept = {"research": "research.read.take_notes"}  # what a v1 run remembered
    assert (
        compiled(v1).move("check_in", compiled(v1).resolve("check_in", "go:research"), kept).leaf
        == "research.read.take_notes.think"
    )  # type: ignore[arg-type]
    assert cc.move("check_in", t, kept).leaf == "research.search.think"
