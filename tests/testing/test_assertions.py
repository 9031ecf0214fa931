"""The testing kit's assertions: each passes on what is true of a run and fails, naming
the run and what differs, on what is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

import statechart as sc
from statechart.io.loading import load_chart
from statechart.testing import (
    Cassette,
    Ran,
    assert_called,
    assert_not_called,
    assert_path,
    assert_within_budget,
    path_of,
)
from tests.rerun.test_reference_replay import AGENTS

pytestmark = pytest.mark.anyio


@sc.tool(retry="safe", repeatable=True)
def ping(n: int) -> str:
    """Ping."""
    return f"pong {n}"


CHART = sc.Chart(
    "pinger",
    budget=sc.Budget(max_steps=20, max_tool_calls=3, max_tokens=100),
    states=(
        sc.State("warm", tools=(ping,), instructions="Ping twice."),
        sc.State("work", tools=(ping,), instructions="Finish."),
        sc.State("done", kind="terminal"),
    ),
    edges=(sc.Edge("warm", "work"), sc.Edge("work", "done")),
)


async def ran_of(*replies: sc.Reply, tmp_path: Path) -> Ran:
    cassette = Cassette(tmp_path / "c.json", record=True)
    return await cassette.run(CHART, model=sc.ScriptedModel(replies))


def usage(tokens: int) -> sc.Usage:
    return sc.Usage(input_tokens=tokens, output_tokens=0)


async def test_path_called_and_budget_on_a_run_that_keeps_them(tmp_path: Path) -> None:
    ran = await ran_of(
        sc.reply(sc.call("ping", n=1), usage=usage(10)),
        sc.reply(sc.call("ping", n=2), usage=usage(10)),
        sc.reply(sc.call("next_state", target="work"), usage=usage(10)),
        sc.reply(sc.call("next_state", target="done"), usage=usage(10)),
        tmp_path=tmp_path,
    )
    assert ran.state == "done"
    assert_path(ran, ["warm", "work", "done"])
    assert_called(ran, "ping", times=2)
    assert_called(ran, "ping")
    assert_not_called(ran, "next_state")
    assert_within_budget(ran)
    with pytest.raises(AssertionError, match=r"took the path \['warm', 'work', 'done'\]"):
        assert_path(ran, ["warm", "done"])
    with pytest.raises(AssertionError, match="called 'ping' 2 time"):
        assert_called(ran, "ping", once=True)
    with pytest.raises(AssertionError, match="never called 'pong'"):
        assert_called(ran, "pong")


async def test_a_ledger_past_a_cap_fails_the_budget_assertion(tmp_path: Path) -> None:
    ran = await ran_of(
        sc.reply(sc.call("next_state", target="work"), usage=usage(60)),
        sc.reply(sc.call("next_state", target="done"), usage=usage(60)),
        tmp_path=tmp_path,
    )
    assert_within_budget(ran)  # 120 tokens against 100: past by the one call that crossed
    spent = ran.run.ledger["root"]
    over = replace(ran.run, ledger={"root": replace(spent, input_tokens=200)})
    with pytest.raises(AssertionError, match="spent 200 tokens, over its cap of 100"):
        assert_within_budget(Ran(run=over, events=ran.events, chart=ran.chart))
    calls = replace(ran.run, ledger={"root": replace(spent, tool_calls=4)})
    with pytest.raises(AssertionError, match="spent 4 tool_calls, over its cap of 3"):
        assert_within_budget(Ran(run=calls, events=ran.events, chart=ran.chart))


async def test_a_nested_path_names_each_level(tmp_path: Path) -> None:
    chart, module = load_chart(f"{AGENTS}/deep_research.py:chart")
    cassette = Cassette(tmp_path / "deep.json", record=True)
    ran = await cassette.run(chart, model=module.demo_model(), context={"topic": "tides"})
    assert ran.status == "waiting"
    ran = await cassette.approve(chart, ran, by="op")
    assert_path(ran, ["scope", "explore", "report", "done"])
    nested = path_of(ran.events, ran.events[0].source, nested=True)
    assert nested[:3] == ["scope", "explore", "explore.survey"]
    assert "explore.sources.fetch" in nested
    assert_called(ran, "buy_report", once=True)
    assert_within_budget(ran)
