"""The audit of a run through `statechart show`: what each event says, in text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import DESK, FAILED, ORDER, WAITING, run_cli, waiting_id

FAILING = """
from statechart import Budget, Chart, Edge, FunctionModel, State


async def explode(ctx):
    raise RuntimeError("ledger offline")


chart = Chart("failing", budget=Budget(max_steps=9), states=(
    State("check", kind="code", handler=explode), State("done", kind="terminal")),
    edges=(Edge("check", "done"),))


def demo_model():
    return FunctionModel(lambda request: None, spec="demo:none")
"""


def test_show_json_keeps_the_reason_of_an_escalation_with_an_error(tmp_path: Path) -> None:
    """`show --json` keeps an escalation's reason (the sentence `run` printed live) next to
    its error, instead of folding both into one note."""
    (tmp_path / "failing.py").write_text(FAILING)
    out = run_cli(tmp_path, "run", "failing.py:chart", code=FAILED).stdout
    assert "handler of code state 'check'" in out  # the live progress line has it
    run_id = out.split()[1]
    events = json.loads(run_cli(tmp_path, "show", run_id, "--json").stdout)["events"]
    assert any("handler of code state 'check'" in json.dumps(e) for e in events), events


def test_show_keeps_an_approvers_edit(tmp_path: Path) -> None:
    """An approver's edit (the refund lowered to 1,500 cents) shows in `show` and in
    `show --json` on the human event."""
    desk = waiting_id(run_cli(tmp_path, "run", DESK, "--input", ORDER, code=WAITING).stdout)
    run_cli(tmp_path, "approve", desk, "--edit", '{"amount_cents": 1500}')
    events = json.loads(run_cli(tmp_path, "show", desk, "--json").stdout)["events"]
    (human,) = [e for e in events if e["actor"] == "human"]
    assert "1500" in json.dumps(human), human
    assert "1500" in run_cli(tmp_path, "show", desk).stdout.split("human:cli", 1)[1].splitlines()[0]


def test_the_timeline_columns_line_up_under_a_long_actor() -> None:
    """`human:demo-operator` is wider than the actor column was: the columns follow."""
    from statechart import Event, Run
    from statechart.io.audit import render

    run = Run(run_id="r", chart="c", chart_version="v", model="m", state="done")
    events = [
        Event(
            run_id="r",
            seq=1,
            time=0.0,
            source="a.think",
            target="a.act",
            trigger="propose",
            actor="model",
        ),
        Event(
            run_id="r",
            seq=2,
            time=0.0,
            source="a.approve",
            target="a.act",
            trigger="approved",
            actor="human",
            by="demo-operator",
        ),
    ]
    lines = render(run, events).splitlines()
    header, first, second = lines[1], lines[2], lines[3]
    column = header.index("transition")
    assert first.index("a.think") == second.index("a.approve") == column
    assert "human:demo-operator" in second


def test_show_names_a_waiting_runs_armed_timers() -> None:
    from statechart import Run
    from statechart.io.audit import render

    run = Run(
        run_id="r",
        chart="c",
        chart_version="v",
        model="m",
        state="review",
        status="waiting",
        timers={"review->remind": 86400.5},
        wake=86400.5,
    )
    assert render(run, []).splitlines()[-2:-1] == [
        "timer: review->remind fires at 1970-01-02 00:00:00.500 UTC"
    ]


def test_show_says_where_each_region_of_a_parallel_state_is() -> None:
    from statechart import Region, Run
    from statechart.io.audit import render

    run = Run(
        run_id="r",
        chart="c",
        chart_version="v",
        model="m",
        state="gather",
        status="running",
        regions={
            "gather.web": Region(state="gather.web.found", status="ended", reason="ended in x"),
            "gather.papers": Region(
                state="gather.papers.search.approve", status="waiting", reason="approve lookup"
            ),
        },
    )
    lines = render(run, []).splitlines()
    assert lines[-4:-1] == [
        "now: running in 'gather'",
        "region gather.web: ended in 'gather.web.found'",
        "region gather.papers: waiting in 'gather.papers.search.approve' (approve lookup)",
    ]
