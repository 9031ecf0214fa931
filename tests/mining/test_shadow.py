"""Shadow mode: a plain loop runs unchanged while a chart records what it would refuse."""

from __future__ import annotations

import datetime as dt
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
from statechart.chart.tools import outcome_class
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
from statechart.mining.shadow import default_outcome, shadow_refusals
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


def test_mine_shadow_json_holds_every_refusal(tmp_path: Path, planted: Any) -> None:
    """`mine --db --shadow --json`: the report's facts as JSON, every refusal of every run."""
    store = sc.SQLiteStore(tmp_path / "s.db")
    shadow = Shadow(triage_chart(), observe=observe)
    for trace in planted.traces:
        judged = shadow.start(run_id=trace.run_id)
        plain_loop(trace, judged.wrap(world(trace)))
        judged.finish()
        judged.save_sync(store)
    stored = anyio.run(shadow_refusals, store)
    store.close()
    run = subprocess.run(
        [sys.executable, "-m", "statechart.cli", "mine", "--db", "s.db", "--shadow", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["shadow_runs"] == 300
    assert doc["refusals"] == sum(len(rs) for rs in stored.values())
    assert {r["run_id"] for r in doc["runs_with_refusals"]} == planted.anomalous
    assert {r["run_id"]: [x["kind"] for x in r["refusals"]] for r in doc["runs_with_refusals"]} == {
        k: [x.kind for x in rs] for k, rs in stored.items() if rs
    }
    guard = [e for e in doc["per_edge"] if e["kind"] == "guard"]
    assert [(e["source"], e["to"], e["refusals"], set(e["runs"])) for e in guard] == [
        ("draft", "send", 3, set(planted.unreviewed))
    ]
    assert [g["reason"] for g in doc["per_guard"]] == [
        "edge draft->send refused: send requires a passed review"
    ]


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


# -- budgets judged as the driver judges them -------------------------------------------------


X = loop_tool("x", repeatable=True)
ONCE = loop_tool("x")


def one_state(budget: sc.Budget, tool: sc.Tool = X) -> sc.Chart:
    """One model state offering `x` (repeatable unless `tool` says otherwise), then done."""
    return sc.Chart(
        "one",
        states=(
            sc.State("work", tools=(tool,), max_iterations=10),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"),),
        budget=budget,
    )


def driver_run(chart: sc.Chart, calls: int) -> sc.Run:
    """The real driver making `calls` calls of `x` and then asking to finish."""
    script = [sc.reply(sc.call("x")) for _ in range(calls)]
    script.append(sc.reply(sc.call("next_state", target="done")))
    return sc.run_sync(chart, store=sc.MemoryStore(), model=sc.ScriptedModel(script))


def shadowed(chart: sc.Chart, calls: int) -> list[tuple[str, str]]:
    judged = Shadow(chart).replay(Trace("t", tuple(Call("x") for _ in range(calls))))
    return [(r.kind, r.tool) for r in judged.refusals]


def test_shadow_charges_a_move_two_steps_like_the_driver() -> None:
    """A change of state costs two steps in the shadow as in the driver (the model call
    asking for next_state, then the move): with max_steps=7, three calls and a finish
    exhaust the run, and the shadow reports a budget refusal for the finishing move."""
    chart = one_state(sc.Budget(max_steps=7))
    assert driver_run(chart, 3).state != "done"  # the driver runs out of steps
    assert ("budget", "") in shadowed(chart, 3)


def test_shadow_move_checks_every_cap_the_model_call_needs() -> None:
    """A move needs a model call, so the shadow checks every cap (model calls, tool calls,
    tokens) before it, as the driver does: with max_tool_calls=2 and two calls, the final
    move is a budget refusal."""
    chart = one_state(sc.Budget(max_steps=100, max_tool_calls=2))
    assert driver_run(chart, 2).state != "done"
    assert ("budget", "") in shadowed(chart, 2)


def test_shadow_call_checks_caps_after_the_model_call_that_picks_it() -> None:
    """The shadow checks the caps again after charging the model call that chose a tool:
    with max_model_calls=3 the third call of `x` is refused, as the driver never runs it."""
    chart = one_state(sc.Budget(max_steps=100, max_model_calls=3))
    run = driver_run(chart, 3)
    assert run.ledger["root"].tool_calls == 2  # the driver never ran the third call
    assert ("budget", "x") in shadowed(chart, 3)


# -- the stored shadow snapshot is the fold of its events -------------------------------------


def test_shadow_unknown_tool_snapshot_matches_the_fold() -> None:
    """After a call of a tool no state offers (refused, but charged and recorded), the
    shadow's snapshot equals the fold of its events."""
    chart = one_state(sc.Budget(max_steps=100))
    judged = Shadow(chart).start(run_id="u")
    judged.record("x", {}, "ok")
    judged.record("translate", {}, "ok")
    assert [r.kind for r in judged.refusals] == ["tool"]
    assert judged.initial is not None
    folded = replay(compiled(chart), judged.initial, [s.event for s in judged.steps])
    assert folded == judged.run


def test_shadow_budget_refusals_snapshot_matches_the_fold() -> None:
    """After a run whose last events are budget refusals (committed with `exhausted=`), the
    shadow's snapshot equals the fold of its events."""
    chart = one_state(sc.Budget(max_steps=4))
    judged = Shadow(chart).start(run_id="b")
    for i in range(4):
        judged.record("x", {"i": i}, "ok")
    judged.finish()
    assert {r.kind for r in judged.refusals} == {"budget"}
    assert judged.initial is not None
    folded = replay(compiled(chart), judged.initial, [s.event for s in judged.steps])
    assert folded == judged.run


async def review(ticket: Ticket) -> sc.Decision:
    return sc.Decision("send", patch={"review_passed": True})


def test_shadow_follows_a_move_through_a_code_state() -> None:
    """A move that passes through a code state (draft -> review -> send, the handler
    deciding, as in docs/mining.md section 5) is followed by the shadow as by the driver,
    not refused as an illegal edge."""
    draft, send = loop_tool("draft_reply"), loop_tool("send_reply")
    chart = sc.Chart(
        "triage",
        states=(
            sc.State("draft", tools=(draft,)),
            sc.State("review", kind="code", handler=review, writes=("review_passed",)),
            sc.State("send", tools=(send,)),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("draft", "review"), sc.Edge("review", "send"), sc.Edge("send", "done")),
        context=Ticket,
        budget=sc.Budget(max_steps=30),
    )
    model = sc.ScriptedModel(
        [
            sc.reply(sc.call("draft_reply")),
            sc.reply(sc.call("next_state", target="review")),
            sc.reply(sc.call("send_reply")),
            sc.reply(sc.call("next_state", target="done")),
        ]
    )
    assert sc.run_sync(chart, store=sc.MemoryStore(), model=model).state == "done"
    judged = Shadow(chart).replay(Trace("t", (Call("draft_reply"), Call("send_reply"))))
    assert [r.kind for r in judged.refusals if r.kind == "illegal"] == []


# -- the wrapped dispatcher -------------------------------------------------------------------


def test_shadow_retry_after_a_failed_call_is_not_a_repeat() -> None:
    """Only calls that succeeded count for the repeat check, as in the driver: retrying a
    call whose dispatcher raised is not refused as a 'repeat'."""
    chart = one_state(sc.Budget(max_steps=100), ONCE)
    failures = iter([TimeoutError("flaky")])

    def dispatch(tool: str, arguments: Any) -> str:
        for exc in failures:
            raise exc
        return "fine"

    judged = Shadow(chart).start(run_id="retry")
    wrapped = judged.wrap(dispatch)
    with pytest.raises(TimeoutError):
        wrapped("x", {"q": 1})
    assert wrapped("x", {"q": 1}) == "fine"
    judged.finish()
    assert judged.refusals == []


def test_shadow_accepts_json_string_arguments() -> None:
    """Arguments given as the JSON string a provider sent are parsed: the loop gets its
    result and the call is recorded."""
    chart = one_state(sc.Budget(max_steps=100))
    judged = Shadow(chart).start(run_id="s")
    wrapped = judged.wrap(lambda tool, arguments: "fine")
    assert wrapped("x", '{"q": 1}') == "fine"
    assert [s.event.call.name for s in judged.steps if s.event.call] == ["x"]


def test_shadow_sees_the_outcome_of_an_async_callable_dispatcher() -> None:
    """An object with `async def __call__` is wrapped as async: a call that raised is
    recorded as 'error'."""
    chart = one_state(sc.Budget(max_steps=100))

    class Dispatcher:
        async def __call__(self, tool: str, arguments: Any) -> str:
            raise ConnectionError("down")

    judged = Shadow(chart).start(run_id="a")
    wrapped = judged.wrap(Dispatcher())

    async def loop() -> None:
        with pytest.raises(ConnectionError):
            await wrapped("x", {})

    anyio.run(loop)
    assert [s.event.result for s in judged.steps] == ["error"]


def test_shadow_saves_runs_whose_arguments_are_not_json(tmp_path: Path) -> None:
    """Arguments holding plain Python objects are stored in a JSON form, so the shadow run
    saves to SQLite and reads back as a trace."""

    class Query:
        def __repr__(self) -> str:
            return "Query('refund')"

    chart = one_state(sc.Budget(max_steps=100))
    store = sc.SQLiteStore(tmp_path / "s.db")
    judged = Shadow(chart).start(run_id="objects")
    judged.wrap(lambda tool, arguments: "fine")("x", {"query": Query()})
    judged.finish()
    judged.save_sync(store)
    (trace,) = anyio.run(read_store, store)
    store.close()
    assert [c.tool for c in trace.calls] == ["x"]


# -- judgements that agree with the driver's ---------------------------------------------------


LOOK_TOOL, WRITE_TOOL = loop_tool("search"), loop_tool("draft")


def two_states(guard: sc.Guard | None = None, context: type[BaseModel] | None = None) -> sc.Chart:
    """look (search) -> write (draft) -> done, the first edge optionally guarded."""
    extra: dict[str, Any] = {"context": context} if context is not None else {}
    return sc.Chart(
        "two",
        states=(
            sc.State("look", tools=(LOOK_TOOL,), max_iterations=6),
            sc.State("write", tools=(WRITE_TOOL,), max_iterations=6),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("look", "write", guard=guard), sc.Edge("write", "done")),
        budget=sc.Budget(max_steps=60),
        **extra,
    )


def searched(facts: sc.Facts) -> str | None:
    visit = facts.run.visit
    return None if visit is not None and visit.succeeded.get("search") else "nothing found yet"


def test_shadow_failed_call_does_not_count_as_succeeded() -> None:
    """A call whose dispatcher raised does not count in `visit.succeeded`, as in the driver:
    a guard 'leave look only after a successful search' refuses the move after a search
    that raised."""
    judged = Shadow(two_states(guard=searched)).start(run_id="failed")

    def dispatch(tool: str, arguments: Any) -> str:
        if tool == "search":
            raise TimeoutError("search backend down")
        return "a draft"

    wrapped = judged.wrap(dispatch)
    with pytest.raises(TimeoutError):
        wrapped("search", {"query": "refund"})
    wrapped("draft", {})
    judged.finish()
    assert [(r.kind, r.tool) for r in judged.refusals] == [("guard", "draft")]


@sc.tool(retry="safe")
async def search_with_default(query: str, limit: int = 10) -> str:
    """Search with a default page size."""
    return "results"


def test_shadow_repeat_check_normalises_arguments_like_the_driver() -> None:
    """The repeat check fingerprints the arguments as the chart's tool parses them (defaults
    filled in), as the driver does: {"query": "a"} then {"query": "a", "limit": 10} is a
    repeat in both."""
    chart = sc.Chart(
        "one",
        states=(
            sc.State("look", tools=(search_with_default,), max_iterations=6),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("look", "done"),),
        budget=sc.Budget(max_steps=60),
    )
    model = sc.ScriptedModel(
        [
            sc.reply(sc.call("search_with_default", query="a")),
            sc.reply(sc.call("search_with_default", query="a", limit=10)),
        ]
    )
    store = sc.MemoryStore()
    run = sc.run_sync(chart, store=store, model=model)
    refused = [e.refused for e in anyio.run(store.events, run.run_id) if e.refused]
    assert refused and "already ran with these arguments" in refused[0]  # the driver

    judged = Shadow(chart).start(run_id="defaults")
    wrapped = judged.wrap(lambda tool, arguments: "results")
    wrapped("search_with_default", {"query": "a"})
    wrapped("search_with_default", {"query": "a", "limit": 10})
    assert [r.kind for r in judged.refusals] == ["repeat"]


def test_shadow_observe_hook_gets_the_parsed_arguments() -> None:
    """Arguments given as a JSON string reach the `observe` hook parsed into a mapping, so
    the hook's outcome is used."""
    seen: list[Any] = []

    def observe(tool: str, arguments: Any, result: Any) -> dict[str, Any]:
        seen.append(arguments)
        return {}

    judged = Shadow(two_states(), observe=observe).start(run_id="json")
    judged.wrap(lambda tool, arguments: {"outcome": "hit"})("search", '{"query": "refund"}')
    assert seen == [{"query": "refund"}]
    assert [s.event.outcome for s in judged.steps] == ["hit"]


class Hit(BaseModel):
    outcome: str
    body: str = ""


def test_shadow_default_outcome_reads_an_outcome_attribute_like_the_driver() -> None:
    """The shadow's `default_outcome` labels a typed result by its `outcome` attribute, as
    the driver's `outcome_class` does."""
    result = Hit(outcome="hit")
    assert outcome_class(result) == "hit"
    assert default_outcome("search", result) == "hit"


# -- stored shadow runs -----------------------------------------------------------------------


class Seen(BaseModel):
    searched_at: dt.datetime | None = None


def test_shadow_observe_patch_is_stored_as_json_values() -> None:
    """An `observe` hook's patch is validated against the context type and kept as JSON
    values (a datetime as its ISO string), so the stored snapshot equals the fold of its
    events."""
    chart = two_states(context=Seen)

    def observe(tool: str, arguments: Any, result: Any) -> dict[str, Any]:
        return {"searched_at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)}

    judged = Shadow(chart, observe=observe).start(run_id="patched")
    judged.wrap(lambda tool, arguments: "ok")("search", {"query": "a"})
    judged.finish()
    store = sc.MemoryStore()
    judged.save_sync(store)

    async def both() -> tuple[sc.Run, sc.Run]:
        folded = replay(compiled(chart), await store.base("patched"), await store.events("patched"))
        return (await store.load("patched")).snapshot, folded

    loaded, folded = anyio.run(both)
    assert loaded == folded


def test_stored_shadow_refusals_match_the_live_ones() -> None:
    """`shadow_refusals(store)` (what `statechart mine --shadow` reports) gives the same
    refusals as the live run: the same leaves, and the tool whose call needed a move."""
    chart = two_states(guard=lambda facts: "not yet")
    judged = Shadow(chart).replay(Trace("t", (Call("search"), Call("draft"))))
    store = sc.MemoryStore()
    judged.save_sync(store)
    stored = anyio.run(shadow_refusals, store)[judged.run.run_id]
    assert judged.refusals
    assert stored == judged.refusals


class _Outer(BaseModel):
    ticket: str = "T-1"


class _Own(BaseModel):
    ref: str


def ported_chart(initial_ported: bool) -> sc.Chart:
    """`nested_chart` with the research sub-chart on a context of its own."""

    def research() -> sc.Chart:
        return sc.Chart(
            "research",
            states=(
                sc.State("look", tools=(SEARCH,), max_iterations=4, reads=("ref",)),
                sc.State("check", tools=(LOOKUP,), reads=("ref",)),
                sc.State("found", kind="terminal"),
            ),
            edges=(sc.Edge("look", "check"), sc.Edge("check", "found")),
            context=_Own,
        )

    research_state = sc.State(
        "research", kind="chart", chart=research, input={"ref": "ticket"}, exits={"found": "draft"}
    )
    states = (
        (research_state,)
        if initial_ported
        else (sc.State("intake", tools=(FETCH,)), research_state)
    )
    return sc.Chart(
        "ported",
        states=(*states, sc.State("draft", tools=(DRAFT,)), sc.State("done", kind="terminal")),
        edges=(
            (() if initial_ported else (sc.Edge("intake", "research"),))
            + (sc.Edge("draft", "done"),)
        ),
        context=_Outer,
        budget=sc.Budget(max_steps=60),
    )


@pytest.mark.parametrize("initial_ported", [False, True])
def test_shadow_follows_a_sub_chart_on_its_own_context(initial_ported: bool) -> None:
    """Shadow mode sees a ported sub-chart's nesting as the driver does: it enters with
    its own context (also when the chart starts inside it) and the fold equals the run."""
    tools = ["search_kb", "lookup_account", "draft_reply"]
    if not initial_ported:
        tools.insert(0, "fetch_ticket")
    judged = Shadow(ported_chart(initial_ported)).replay(Trace("t", tuple(Call(t) for t in tools)))
    assert judged.refusals == [] and judged.run.status == "ended"
    assert judged.initial is not None
    if initial_ported:
        assert judged.initial.contexts == {"research": {"ref": "T-1"}}
    entered = [s.event.inputs for s in judged.steps if s.event.inputs]
    assert entered == ([] if initial_ported else [{"research": {"ref": "T-1"}}])
    folded = replay(
        compiled(ported_chart(initial_ported)), judged.initial, [s.event for s in judged.steps]
    )
    assert folded == judged.run and folded.contexts == {}
