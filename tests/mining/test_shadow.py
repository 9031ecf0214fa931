"""Shadow mode: a plain loop runs unchanged while a chart records what it would refuse."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

import statechart as sc
from statechart.engine import compiled
from statechart.engine.replay import replay
from statechart.mining import (
    Call,
    Shadow,
    Trace,
    mine,
    read_store,
    run_shadowed,
    state_visits,
    synthetic_traces,
)
from statechart.mining.shadow import shadow_refusals
from tests.support.helpers import loop_tool

ROOT = Path(__file__).resolve().parents[2]


class Ticket(BaseModel):
    review_passed: bool = False


FETCH, SEARCH, LOOKUP, DRAFT, POLICY, SEND = (
    loop_tool(n)
    for n in (
        "fetch_ticket",
        "search_kb",
        "lookup_account",
        "draft_reply",
        "policy_check",
        "send_reply",
    )
)


def reviewed(facts: sc.Facts) -> str | None:
    assert isinstance(facts.context, Ticket)
    return None if facts.context.review_passed else "send requires a passed review"


def triage_chart() -> sc.Chart:
    """Seed 003's machine, with a guarded shortcut from draft to send."""
    return sc.Chart(
        "triage",
        states=(
            sc.State("intake", tools=(FETCH,), max_iterations=2),
            sc.State(
                "research", tools=(SEARCH, LOOKUP), max_calls={"search_kb": 3}, max_iterations=5
            ),
            sc.State("draft", tools=(DRAFT,), max_visits=3, max_iterations=3),
            sc.State("review", tools=(POLICY,), max_visits=2, max_iterations=2),
            sc.State("send", tools=(SEND,), max_iterations=2),
            sc.State("done", kind="terminal"),
        ),
        edges=(
            sc.Edge("intake", "research"),
            sc.Edge("research", "draft"),
            sc.Edge("draft", "review"),
            sc.Edge("review", "draft"),
            sc.Edge("review", "send"),
            sc.Edge("draft", "send", guard=reviewed),
            sc.Edge("send", "done"),
        ),
        context=Ticket,
        budget=sc.Budget(max_steps=80),
    )


def observe(tool: str, arguments: Any, result: Any) -> dict[str, Any]:
    return {"review_passed": result["outcome"] == "pass"} if tool == "policy_check" else {}


def world(trace: Trace) -> Callable[[str, Any], dict[str, Any]]:
    """The loop's real tools: each answers with the outcome the trace recorded."""

    def dispatch(tool: str, arguments: Any) -> dict[str, Any]:
        step = arguments["n"]
        assert trace.calls[step].tool == tool
        return {"outcome": trace.calls[step].outcome, "text": f"{tool} #{step} " + "x" * 40}

    return dispatch


def plain_loop(trace: Trace, dispatch: Callable[[str, Any], Any]) -> list[dict[str, Any]]:
    """The seeds' while loop; its 'model' picks the calls the trace recorded."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "a ticket"}]
    while True:
        n = len(messages) - 1
        if n >= len(trace.calls):
            break
        tool = trace.calls[n].tool
        result = dispatch(tool, {"n": n, "query": f"q{n}"})
        messages.append({"role": "tool", "name": tool, "content": json.dumps(result)})
    return messages


def rows(section: str) -> list[list[str]]:
    """The data rows of a Markdown table."""
    lines = [x for x in section.splitlines() if x.startswith("| ")][1:]
    return [[c.strip() for c in x.strip().strip("|").split("|")] for x in lines]


@pytest.fixture(scope="module")
def planted() -> Any:
    return synthetic_traces(300, seed=11, repeated=4, unreviewed=3, early_drafts=2)


def test_shadow_flags_exactly_the_planted_runs_and_the_loop_is_unchanged(
    tmp_path: Path,
    planted: Any,
) -> None:
    chart = triage_chart()
    shadow = Shadow(chart, observe=observe)
    store = sc.SQLiteStore(tmp_path / "shadow.db")
    flagged: dict[str, set[str]] = {}
    for trace in planted.traces:
        plain = plain_loop(trace, world(trace))
        judged = shadow.start(run_id=trace.run_id, context={})
        shadowed = plain_loop(trace, judged.wrap(world(trace)))
        judged.finish()
        assert shadowed == plain
        judged.save_sync(store)
        if judged.refusals:
            flagged[trace.run_id] = {r.kind for r in judged.refusals}
    assert set(flagged) == planted.anomalous
    assert all(flagged[r] == {"guard"} for r in planted.unreviewed)
    assert all(flagged[r] == {"illegal"} for r in planted.early_drafts)
    assert all(flagged[r] == {"budget"} for r in planted.repeated)

    stored = anyio.run(shadow_refusals, store)
    assert {k for k, v in stored.items() if v} == planted.anomalous
    guard = [r for rs in stored.values() for r in rs if r.kind == "guard"]
    assert {(r.source, r.target, r.reason) for r in guard} == {
        ("draft", "send", "edge draft->send refused: send requires a passed review")
    }

    async def check_log() -> None:  # the stored snapshot is the fold of the shadow events
        cc = compiled(chart)
        for run in await store.runs():
            events = await store.events(run.run_id)
            assert replay(cc, await store.base(run.run_id), events) == run
            assert run.status == "ended" and run.state == "done"

    anyio.run(check_log)
    mined = mine(anyio.run(read_store, store))
    assert {(e.source, e.target) for e in mined.rare} >= {("draft_reply:ok", "send_reply:sent")}
    assert mined.steps == sum(len(t.calls) for t in planted.traces)
    store.close()


def test_mine_shadow_reports_refusals_per_edge_and_per_guard(
    tmp_path: Path,
    planted: Any,
) -> None:
    store = sc.SQLiteStore(tmp_path / "s.db")
    shadow = Shadow(triage_chart(), observe=observe)
    for trace in planted.traces:
        judged = shadow.start(run_id=trace.run_id)
        plain_loop(trace, judged.wrap(world(trace)))
        judged.finish()
        judged.save_sync(store)
    store.close()
    run = subprocess.run(
        [sys.executable, "-m", "statechart.cli", "mine", "--db", "s.db", "--shadow"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.startswith(f"300 shadow runs, {len(planted.anomalous)} with refusals")
    edges = rows(out.split("## Refusals per edge")[1].split("##")[0])
    assert ["draft", "send", "guard", "3", "3"] in edges
    assert ["intake", "draft", "illegal", "2", "2"] in edges
    assert ["draft", "intake", "illegal", "2", "2"] in edges
    budget = [r for r in edges if r[1] == "(call search_kb)"]
    assert budget and all(r[2] == "budget" and r[4] == "4" for r in budget)
    assert {tuple(r[:3]) for r in edges} == {  # the long streaks also pass max_iterations
        ("draft", "send", "guard"),
        ("intake", "draft", "illegal"),
        ("draft", "intake", "illegal"),
        ("research", "(call search_kb)", "budget"),
        ("research", "(call lookup_account)", "budget"),
        ("research", "draft", "budget"),
    }
    guards = out.split("## Refusals per guard")[1].split("##")[0]
    assert "send requires a passed review" in guards
    for run_id in planted.anomalous:
        assert f"| {run_id}" in out.split("## Runs with refusals")[1]


def test_async_loop_error_results_and_unknown_tools(tmp_path: Path) -> None:
    chart = triage_chart()

    async def dispatch(tool: str, arguments: Any) -> dict[str, Any]:
        if tool == "lookup_account":
            raise ConnectionError("account service down")
        return {"outcome": "pass" if tool == "policy_check" else "ok"}

    async def loop(d: Callable[..., Any]) -> list[Any]:
        out = [await d("fetch_ticket", {"id": 1}), await d("search_kb", {"q": "a"})]
        with pytest.raises(ConnectionError, match="account service down"):
            await d("lookup_account", {"id": 1})
        out.append(await d("translate", {"text": "hi"}))
        out.append(await d("search_kb", {"q": "a"}))
        return out

    async def go() -> None:
        store = sc.SQLiteStore(tmp_path / "a.db")
        result, judged = await run_shadowed(
            chart, store, loop, dispatch, run_id="r1", observe=observe
        )
        assert result == [{"outcome": "ok"}] * 4  # what the loop got, untouched
        kinds = [(r.kind, r.tool) for r in judged.refusals]
        assert kinds == [("tool", "translate"), ("repeat", "search_kb"), ("illegal", "")]
        traces = await read_store(store)
        assert [c.label for c in traces[0].calls] == [
            "fetch_ticket:ok",
            "search_kb:ok",
            "lookup_account:error",
            "translate:ok",
            "search_kb:ok",
        ]
        stored = await shadow_refusals(store)
        assert [(r.kind, r.tool) for r in stored["r1"]] == kinds
        store.close()

    anyio.run(go)


def test_store_runs_are_mined_from_their_events(tmp_path: Path) -> None:
    @sc.tool(retry="safe")
    async def search_kb(query: str) -> dict[str, str]:
        """Search."""
        return {"outcome": "hit" if "a" in query else "empty"}

    chart = sc.Chart(
        "find",
        states=(sc.State("look", tools=(search_kb,)), sc.State("done", kind="terminal")),
        edges=(sc.Edge("look", "done"),),
        budget=sc.Budget(max_steps=20),
    )
    script = [
        sc.reply(sc.call("search_kb", query="abc")),
        sc.reply(sc.call("search_kb", query="xyz")),
        sc.reply(sc.call("next_state", target="done")),
    ]

    async def go() -> list[Trace]:
        store = sc.SQLiteStore(tmp_path / "r.db")
        model = sc.ScriptedModel(script)
        run = await sc.start(chart, store=store, model=model)
        await sc.run_to_end(chart, run, store=store, model=model)
        found = await read_store(store)
        store.close()
        return found

    (trace,) = anyio.run(go)
    assert trace.calls == (Call("search_kb", "hit", "look"), Call("search_kb", "empty", "look"))
    assert state_visits([trace, trace]) == {"done": {1: 2}, "look": {1: 2}}
    assert mine([trace]).counts == {
        "START": {"search_kb:hit": 1},
        "search_kb:hit": {"search_kb:empty": 1},
        "search_kb:empty": {"END": 1},
    }


def nested_chart() -> sc.Chart:
    def research() -> sc.Chart:
        return sc.Chart(
            "research",
            states=(
                sc.State("look", tools=(SEARCH,), max_iterations=4),
                sc.State("check", tools=(LOOKUP,)),
                sc.State("found", kind="terminal"),
            ),
            edges=(sc.Edge("look", "check"), sc.Edge("check", "found")),
        )

    return sc.Chart(
        "nested",
        states=(
            sc.State("intake", tools=(FETCH,)),
            sc.State("research", kind="chart", chart=research, exits={"found": "draft"}),
            sc.State("draft", tools=(DRAFT,)),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("intake", "research"), sc.Edge("draft", "done")),
        budget=sc.Budget(max_steps=60),
    )


@pytest.mark.parametrize(
    ("tools", "refused"),
    [
        (["fetch_ticket", "search_kb", "search_kb", "lookup_account", "draft_reply"], []),
        (["fetch_ticket", "lookup_account", "draft_reply"], [("illegal", "lookup_account")]),
        (["fetch_ticket", "draft_reply"], [("illegal", "draft_reply")]),
        (["fetch_ticket", "search_kb", "lookup_account"], [("illegal", "")]),
        (
            ["fetch_ticket", "search_kb", "lookup_account", "draft_reply", "search_kb"],
            [("illegal", "search_kb"), ("illegal", "")],
        ),
    ],
)
def test_shadow_enters_and_leaves_sub_charts_as_the_driver_would(
    tools: list[str],
    refused: list[tuple[str, str]],
) -> None:
    judged = Shadow(nested_chart()).replay(Trace("t", tuple(Call(t) for t in tools)))
    assert [(r.kind, r.tool) for r in judged.refusals] == refused
    assert judged.run.status == "ended"
    cc = compiled(nested_chart())
    assert judged.initial is not None
    folded = replay(cc, judged.initial, [s.event for s in judged.steps])
    assert folded == judged.run
