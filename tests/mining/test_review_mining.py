"""Review of issue #7 (mining, shadow mode, drift): each test pins one confirmed bug.

Every test here fails on the code as reviewed and passes once the bug it names is fixed.
"""

from __future__ import annotations

import subprocess
import sys
import types
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
    drift,
    mine,
    read_jsonl,
    read_store,
    replay_all,
    write_jsonl,
)
from statechart.mining.propose import propose
from statechart.mining.render import mined_mermaid
from statechart.runtime.lineage import fork
from tests.support.helpers import loop_tool

ROOT = Path(__file__).resolve().parents[2]


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


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )


def check_draft(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "draft.py").write_text(source, encoding="utf-8")
    return cli(tmp_path, "check", "draft.py:chart")


def load_chart(source: str) -> sc.Chart:
    module = types.ModuleType("draft")
    exec(compile(source, "draft.py", "exec"), module.__dict__)
    chart = module.__dict__["chart"]
    assert isinstance(chart, sc.Chart)
    return chart


def runs(tools: list[str], n: int, prefix: str = "r") -> list[Trace]:
    return [Trace(f"{prefix}{i}", tuple(Call(t) for t in tools)) for i in range(n)]


# -- shadow mode judges budgets differently from the driver ------------------------------


def test_shadow_charges_a_move_two_steps_like_the_driver() -> None:
    """shadow.py MOVE_COST charges one step for a change of state, but the driver spends
    two (the model call that asks for next_state, then the next_state step, which plan()
    checks against the hard caps after the model call was charged). With max_steps=7,
    three calls (6 steps) and a finish exhaust the real run; the shadow must report a
    budget refusal for the finishing move instead of nothing."""
    chart = one_state(sc.Budget(max_steps=7))
    assert driver_run(chart, 3).state != "done"  # the driver runs out of steps
    assert ("budget", "") in shadowed(chart, 3)


def test_shadow_move_checks_every_cap_the_model_call_needs() -> None:
    """`ShadowRun._move` only checks the hard caps (steps, wall), but a move needs a model
    call, and the driver checks every cap (model_calls, tool_calls, tokens) before one.
    With max_tool_calls=2 and two calls the driver cannot ask to finish; the shadow must
    flag the final move as a budget refusal."""
    chart = one_state(sc.Budget(max_steps=100, max_tool_calls=2))
    assert driver_run(chart, 2).state != "done"
    assert ("budget", "") in shadowed(chart, 2)


def test_shadow_call_checks_caps_after_the_model_call_that_picks_it() -> None:
    """`_check_call` checks the caps before charging the model call that chose the tool;
    the driver checks again after it (plan() before RunTool). With max_model_calls=3 the
    driver's third model call is allowed but its tool is not run; the shadow must refuse
    the third call of `x`, not let it through."""
    chart = one_state(sc.Budget(max_steps=100, max_model_calls=3))
    run = driver_run(chart, 3)
    assert run.ledger[""].tool_calls == 2  # the driver never ran the third call
    assert ("budget", "x") in shadowed(chart, 3)


# -- the stored shadow snapshot is not the fold of its events ----------------------------


def test_shadow_unknown_tool_snapshot_matches_the_fold() -> None:
    """`_refuse` (a tool no state offers) charges a model call and records the call, so
    `replay()` adds an iteration and a call to the visit, but the snapshot's visit is left
    unchanged. The stored run must equal the fold of its events."""
    chart = one_state(sc.Budget(max_steps=100))
    judged = Shadow(chart).start(run_id="u")
    judged.record("x", {}, "ok")
    judged.record("translate", {}, "ok")
    assert [r.kind for r in judged.refusals] == ["tool"]
    assert judged.initial is not None
    folded = replay(compiled(chart), judged.initial, [s.event for s in judged.steps])
    assert folded == judged.run


def test_shadow_budget_refusals_snapshot_matches_the_fold() -> None:
    """Budget refusals are committed with `exhausted=`, which `replay()` reads as a routing
    (`routed` + 1), but the shadow never routes and its snapshot keeps routed=0. After a
    run whose last events are budget refusals the fold and the snapshot differ."""
    chart = one_state(sc.Budget(max_steps=4))
    judged = Shadow(chart).start(run_id="b")
    for i in range(4):
        judged.record("x", {"i": i}, "ok")
    judged.finish()
    assert {r.kind for r in judged.refusals} == {"budget"}
    assert judged.initial is not None
    folded = replay(compiled(chart), judged.initial, [s.event for s in judged.steps])
    assert folded == judged.run


class Ticket(BaseModel):
    review_passed: bool = False


async def review(ticket: Ticket) -> sc.Decision:
    return sc.Decision("send", patch={"review_passed": True})


def test_shadow_follows_a_move_through_a_code_state() -> None:
    """The enforced chart of docs/mining.md section 5 puts a code state (review) between
    draft and send. The loop's draft -> send goes draft -> review -> send under the driver
    (the handler decides), but the shadow only tries one `go:` move into the host of the
    next tool and reports every such run as an 'illegal' edge. Moves that pass through
    code states (whose edges lead to the host) must not be refused as illegal."""
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


# -- the wrapped dispatcher --------------------------------------------------------------


def test_shadow_retry_after_a_failed_call_is_not_a_repeat() -> None:
    """`_check_call` remembers a call's fingerprint before knowing it failed, so a loop that
    retries a call that raised is refused as a 'repeat'. The driver only remembers calls
    that succeeded ("a failed call may be retried"); the retry must not be refused."""
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
    """Loops built on provider SDKs pass a tool call's arguments as the JSON string the
    model sent. `record()` calls dict() on it and raises ValueError into the loop after the
    tool already ran. The loop must get its result; the shadow should parse the string
    (as the driver's parse_arguments does) or record the call without arguments."""
    chart = one_state(sc.Budget(max_steps=100))
    judged = Shadow(chart).start(run_id="s")
    wrapped = judged.wrap(lambda tool, arguments: "fine")
    assert wrapped("x", '{"q": 1}') == "fine"
    assert [s.event.call.name for s in judged.steps if s.event.call] == ["x"]


def test_shadow_sees_the_outcome_of_an_async_callable_dispatcher() -> None:
    """`wrap()` decides sync/async with inspect.iscoroutinefunction, which is False for an
    object with `async def __call__`. The sync wrapper then records the call before it ran,
    labels it 'ok' and never sees its exception. A call that raised must be recorded as
    'error'."""
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
    """A plain loop may pass Python objects as arguments. The shadow copies them into the
    event's ToolCall as they are, and `save_sync` then fails with a
    PydanticSerializationError, so the run (and every refusal in it) is lost. Arguments
    must be stored in a JSON form (e.g. through canonical_json, which already uses
    default=str for the fingerprint)."""

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


# -- proposals whose draft fails `statechart check` or refuses common runs ----------------


def test_proposal_with_a_tool_only_rare_runs_use_passes_check(tmp_path: Path) -> None:
    """A tool seen only in a rare run becomes a state, but every move into and out of it is
    rare and left out, so the draft has an unreachable state and `statechart check` fails
    ("state 'x' cannot be reached"). The draft must pass check (leave such tools out, or
    list them in the docstring)."""
    traces = [*runs(["a", "b"], 200), Trace("odd", (Call("a"), Call("x"), Call("b")))]
    result = check_draft(tmp_path, propose(traces).source)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("tool", ["2fa_check", "über_search"])
def test_proposal_state_names_are_valid_chart_names(tmp_path: Path, tool: str) -> None:
    """`_name` keeps any \\w character, but state names must match
    ^[A-Za-z][A-Za-z0-9_-]*$: a tool starting with a digit or holding a non-ASCII letter
    gives a draft that `statechart check` rejects as malformed."""
    result = check_draft(tmp_path, propose(runs([tool, "send"], 20)).source)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("tool", ['say "hi"', "C:\\new"])
def test_proposal_quotes_tool_names_in_its_source(tmp_path: Path, tool: str) -> None:
    """`render()` pastes tool names into Python string literals with f-strings, so a '"'
    breaks the draft (SyntaxError) and a backslash is read as an escape ('C:\\new' becomes
    'C:' + newline + 'ew'). Names must be written with repr() so the draft loads and its
    tools keep the names the traces use."""
    source = propose(runs([tool, "send"], 20)).source
    result = check_draft(tmp_path, source)
    assert result.returncode == 0, result.stderr
    chart = load_chart(source)
    assert {t.name for s in chart.states for t in s.tools} == {tool, "send"}


def test_proposal_tool_named_sc_does_not_shadow_the_import(tmp_path: Path) -> None:
    """The draft does `import statechart as sc` and then `async def <tool>()`; a tool named
    `sc` rebinds the module name and the next `@sc.tool` fails. Identifiers must avoid the
    names the draft itself uses."""
    result = check_draft(tmp_path, propose(runs(["sc", "send"], 20)).source)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("starts", [["a"], ["a", "b"]])
def test_proposal_allows_runs_without_calls(tmp_path: Path, starts: list[str]) -> None:
    """START -> END (a run that called no tool) is ignored when building edges, so when it
    is common the draft refuses those runs ("'a' has no edge to 'done'", or the same from
    the router 'start' when runs begin in several phases). A common START -> END must
    become an edge from the initial state (or router) to done."""
    traces = runs([], 30, "e")
    for tool in starts:
        traces += runs([tool, "send"], 30 // len(starts), tool)
    draft = propose(traces)
    result = check_draft(tmp_path, draft.source)
    assert result.returncode == 0, result.stderr
    assert set(draft.common) == {t.run_id for t in traces}
    refused = replay_all(load_chart(draft.source), traces)
    assert not any(refused.values())


# -- reading runs from a store ------------------------------------------------------------


@sc.tool(retry="safe")
async def search_kb(query: str) -> dict[str, str]:
    """Search."""
    return {
        "body": "x" * 9000 if query == "long" else "",
        "outcome": "hit" if "a" in query or query == "long" else "empty",
    }


def search_chart() -> sc.Chart:
    return sc.Chart(
        "find",
        states=(sc.State("look", tools=(search_kb,)), sc.State("done", kind="terminal")),
        edges=(sc.Edge("look", "done"),),
        budget=sc.Budget(max_steps=40),
    )


def test_store_outcome_survives_a_truncated_result() -> None:
    """`outcome_of` parses the stored result text, which the driver cut to the tool's
    output_cap (8000) and marked '[truncated: ...]'. canonical_json sorts keys, so a long
    'body' comes before 'outcome', the text is no longer JSON, and the call is mined as
    'ok' instead of 'hit'."""

    async def go() -> list[Trace]:
        store = sc.MemoryStore()
        model = sc.ScriptedModel(
            [
                sc.reply(sc.call("search_kb", query="long")),
                sc.reply(sc.call("next_state", target="done")),
            ]
        )
        run = await sc.start(search_chart(), store=store, model=model)
        await sc.run_to_end(search_chart(), run, store=store, model=model)
        return await read_store(store)

    (trace,) = anyio.run(go)
    assert [c.label for c in trace.calls] == ["search_kb:hit"]


def test_store_forked_run_keeps_the_calls_before_the_fork() -> None:
    """`read_store` reads only a run's own events. A forked run's events start after the
    fork point, so its trace loses the parent's calls and the miner counts a START edge
    into the middle of the run. The fork's trace must include the calls it inherited."""
    chart = search_chart()

    async def go() -> dict[str, list[str]]:
        store = sc.MemoryStore()
        model = sc.ScriptedModel(
            [
                sc.reply(sc.call("search_kb", query="a")),
                sc.reply(sc.call("search_kb", query="b")),
                sc.reply(sc.call("next_state", target="done")),
            ]
        )
        run = await sc.start(chart, store=store, model=model)
        run = await sc.run_to_end(chart, run, store=store, model=model)
        first = next(e.seq for e in await store.events(run.run_id) if e.trigger == "results")
        child = await fork(
            chart, run.run_id, first, store=store, now=run.created_at + 1, new_run_id="child"
        )
        again = sc.ScriptedModel(
            [
                sc.reply(sc.call("search_kb", query="c")),
                sc.reply(sc.call("next_state", target="done")),
            ]
        )
        await sc.run_to_end(chart, child, store=store, model=again)
        return {t.run_id: [c.label for c in t.calls] for t in await read_store(store)}

    found = anyio.run(go)
    assert found["child"] == ["search_kb:hit", "search_kb:empty"]


# -- input files, the CLI, drift and rendering --------------------------------------------


def test_read_jsonl_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    """A JSONL file saved with a UTF-8 BOM (PowerShell, Excel, Notepad) fails on line 1
    with 'Unexpected UTF-8 BOM (decode using utf-8-sig)', an instruction the CLI user cannot
    follow. Reading with utf-8-sig loses nothing."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf[{"tool": "a", "outcome": "hit"}]\n')
    assert [c.label for t in read_jsonl(path) for c in t.calls] == ["a:hit"]


def test_mine_propose_does_not_overwrite_its_own_input(tmp_path: Path) -> None:
    """`statechart mine t.jsonl --propose t.jsonl` writes the draft over the traces it was
    mined from (out.write_text with no check). Bad input must lose nothing: refuse to
    write the draft onto the source (or any existing file without --force)."""
    traces = tmp_path / "t.jsonl"
    write_jsonl(runs(["a", "b"], 5), traces)
    before = traces.read_text()
    cli(tmp_path, "mine", "t.jsonl", "--propose", "t.jsonl")
    assert traces.read_text() == before


def test_drift_rejects_an_unknown_by() -> None:
    """`mine(by=...)` rejects anything but 'label' or 'tool', but `drift(by="bogus")` (and
    `statechart drift --by bogus`) silently compares tool:outcome labels."""
    traces = runs(["a"], 3)
    with pytest.raises(ValueError, match="by="):
        drift(traces, traces, by="bogus")


def test_mermaid_gives_distinct_labels_distinct_nodes() -> None:
    """`_node` maps every non-word character to '_', so 'web-search:ok' and 'web_search:ok'
    become one node `n_web_search_ok` and the drawn graph merges two tools' edges."""
    traces = runs(["web-search", "send"], 5) + runs(["web_search", "send"], 5, "s")
    drawn = mined_mermaid(mine(traces))
    nodes = [line.split("[")[0].strip() for line in drawn.splitlines() if '["' in line]
    assert len(nodes) == len(set(nodes)) == 3
