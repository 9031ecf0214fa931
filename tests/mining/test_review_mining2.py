"""Second review of mining, shadow mode and the runtime changes made for them.

Every test here pins one confirmed bug: it fails on the code as reviewed and passes once
the bug it names is fixed.
"""

from __future__ import annotations

import datetime as dt
import types
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

import statechart as sc
from statechart.chart.tools import outcome_class
from statechart.engine import compiled
from statechart.engine.replay import replay
from statechart.mining import Call, Shadow, Trace, synthetic_traces
from statechart.mining.propose import propose
from statechart.mining.shadow import default_outcome, shadow_refusals
from statechart.records.run import Event, Run, Step, build
from statechart.records.spent import Spent
from statechart.runtime.driver import _stamped
from tests.support.helpers import loop_tool

SEARCH, DRAFT = loop_tool("search"), loop_tool("draft")


def two_states(guard: sc.Guard | None = None, context: type[BaseModel] | None = None) -> sc.Chart:
    """look (search) -> write (draft) -> done, the first edge optionally guarded."""
    extra: dict[str, Any] = {"context": context} if context is not None else {}
    return sc.Chart(
        "two",
        states=(
            sc.State("look", tools=(SEARCH,), max_iterations=6),
            sc.State("write", tools=(DRAFT,), max_iterations=6),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("look", "write", guard=guard), sc.Edge("write", "done")),
        budget=sc.Budget(max_steps=60),
        **extra,
    )


# -- shadow judgements that differ from the driver's -------------------------------------


def searched(facts: sc.Facts) -> str | None:
    visit = facts.run.visit
    return None if visit is not None and visit.succeeded.get("search") else "nothing found yet"


def test_shadow_failed_call_does_not_count_as_succeeded() -> None:
    """`ShadowRun._call` adds every call to `visit.succeeded`, also one whose dispatcher
    raised (outcome 'error'), and records no `error` on its event. The driver counts only
    calls that returned (`_after_tool`), and guards read `facts.run.visit.succeeded`: with
    a guard 'leave look only after a successful search', the driver refuses look -> write
    after a search that raised, the shadow lets it through. A failed call must not count
    as succeeded (and its event should carry `error`, so the fold agrees)."""
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
    """The driver fingerprints a call's arguments after the tool's schema parsed them
    (`parsed.model_dump(mode="json")`: defaults filled in, values coerced), so
    {"query": "a"} and {"query": "a", "limit": 10} are one call and the second is refused
    as a repeat. The shadow fingerprints the raw arguments and lets it through. When the
    chart's tool can parse the arguments, the shadow must fingerprint the parsed form."""
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
    """Arguments 'may be a dict or the JSON string a provider sent' (docs/mining.md), and
    the shadow parses the string for its own use, but `record()` hands the raw string to
    the `observe` hook, whose type says Mapping. A hook that reads `arguments["query"]`
    then raises TypeError and the call is mislabelled 'hook_error'. The hook must get
    the parsed mapping."""
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
    """The driver labels a tool result by `outcome_class`, which reads a mapping's
    'outcome' key or an object's `outcome` attribute (a pydantic result). The shadow's
    `default_outcome` reads mappings only, so the same typed result is mined as 'ok' from
    shadow runs and as 'hit' from driven runs, and drift between the two sets of runs
    reports edges that did not change. Both must label a result alike."""
    result = Hit(outcome="hit")
    assert outcome_class(result) == "hit"
    assert default_outcome("search", result) == "hit"


# -- stored shadow runs ------------------------------------------------------------------


class Seen(BaseModel):
    searched_at: dt.datetime | None = None


def test_shadow_observe_patch_is_stored_as_json_values() -> None:
    """The driver writes context patches as JSON values (`checked_patch` dumps them with
    mode="json"); the shadow merges an `observe` hook's patch as it is. A hook that
    writes a datetime into a datetime field leaves a datetime in the run's context, while
    its stored event holds the ISO string, so the MemoryStore snapshot differs from the
    fold of its own events (SQLite happens to agree, as it stores the snapshot as JSON).
    The patch must be validated against the context type and stored as JSON values."""
    chart = two_states(context=Seen)

    def observe(tool: str, arguments: Any, result: Any) -> dict[str, Any]:
        return {"searched_at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)}

    judged = Shadow(chart, observe=observe).start(run_id="patched")
    judged.wrap(lambda tool, arguments: "ok")("search", {"query": "a"})
    judged.finish()
    store = sc.MemoryStore()
    judged.save_sync(store)

    async def both() -> tuple[Run, Run]:
        folded = replay(compiled(chart), await store.base("patched"), await store.events("patched"))
        return await store.load("patched"), folded

    loaded, folded = anyio.run(both)
    assert loaded == folded


def test_stored_shadow_refusals_match_the_live_ones() -> None:
    """`ShadowRun.refusals` name the leaves ('write.think') and, for a refused move, the
    tool whose call needed it; `shadow_refusals(store)` (what `statechart mine --shadow`
    reports) rebuilds them from the events with the owner states ('write') and an empty
    tool, because a move event has no call. The same run judged live and read back from
    the store must give the same refusals."""
    chart = two_states(guard=lambda facts: "not yet")
    judged = Shadow(chart).replay(Trace("t", (Call("search"), Call("draft"))))
    store = sc.MemoryStore()
    judged.save_sync(store)
    stored = anyio.run(shadow_refusals, store)[judged.run.run_id]
    assert judged.refusals
    assert stored == judged.refusals


# -- proposals ---------------------------------------------------------------------------


def test_proposal_reaches_done_when_every_end_move_is_rare() -> None:
    """Long runs that cycle a -> b -> c and stop after any of the three make every move
    to END rare (here 10 of about 310 moves of each tool, under --threshold 0.05). The draft
    then has no edge into 'done', and building it fails with UnreachableStateError
    ("state 'done' cannot be reached"), so `statechart check` rejects it. The draft must
    keep a way to 'done' (e.g. from the phase runs most often end in)."""
    traces = [
        Trace(f"r{i}", tuple(Call(t) for t in ["a", "b", "c"] * 10 + ["a", "b"][: i % 3]))
        for i in range(30)
    ]
    source = propose(traces, threshold=0.05).source
    module = types.ModuleType("draft")
    exec(compile(source, "draft.py", "exec"), module.__dict__)  # builds and validates the chart
    assert isinstance(module.__dict__["chart"], sc.Chart)


# -- runtime changes ---------------------------------------------------------------------


class _SpanContext:
    span_id = 0xABC


class _Span:
    def get_span_context(self) -> _SpanContext:
        return _SpanContext()


def test_stamping_a_span_does_not_change_other_events_fields_set() -> None:
    """`build()` now gives every record built from the same field names one shared
    `__pydantic_fields_set__` ("never changed in place"), but the driver's `_stamped`
    adds 'span' to the event's set in place. With tracing on, every other event built
    from those names (past and future, in every run of the process) then reports 'span'
    as set: `model_fields_set` and `model_dump(exclude_unset=True)` are wrong. Stamping
    must give the event a set of its own."""
    names = {
        "run_id": "r",
        "time": 0.0,
        "source": "review-a",
        "target": "review-b",
        "trigger": "review-stamp",
        "actor": "code",
        "usage": Spent(),
        "reason": "review",
        "exhausted": "review:steps",
        "by": "review",
    }
    other = build(Event, {**names, "seq": 1})
    traced = build(Event, {**names, "seq": 2})
    _stamped(Step(run=None, event=traced), _Span())  # type: ignore[arg-type]
    assert "span" in traced.model_fields_set
    assert "span" not in other.model_fields_set
    assert "span" not in build(Event, {**names, "seq": 3}).model_fields_set


def test_memory_store_keeps_runs_as_a_database_would() -> None:
    """MemoryStore now keeps events, transcripts and intents as JSON so that 'a test on
    this store meets the values a database would refuse', but it keeps run snapshots as
    the objects it was given. A run whose context holds a value JSON turns into another
    (a datetime written by a shadow `observe` hook, a tuple) loads back unchanged from
    memory and as a string (a list) from SQLite, so code tested on MemoryStore sees values
    SQLiteStore never returns. Snapshots must round-trip through JSON like the rest."""
    at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    run = Run(
        run_id="m",
        chart="c",
        chart_version="v",
        model="scripted",
        state="look.think",
        context={"at": at, "ids": (1, 2)},
    )
    store = sc.MemoryStore()
    anyio.run(store.create, run)
    loaded = anyio.run(store.load, "m")
    assert loaded.context == {"at": "2024-01-01T00:00:00Z", "ids": [1, 2]}


# -- synthetic traces --------------------------------------------------------------------


def test_synthetic_traces_with_few_runs_is_not_an_obscure_crash() -> None:
    """`synthetic_traces(20)` plants 14 + 9 + 3 = 26 anomalous runs with
    `rng.sample(range(20), 26)` and fails with 'Sample larger than population or is
    negative', which names none of its parameters. Asking for fewer runs than planted ones
    must either plant what fits or say which parameters to lower."""
    try:
        week = synthetic_traces(20, seed=0)
    except ValueError as exc:
        assert "runs" in str(exc) or "repeated" in str(exc), str(exc)
    else:
        assert len(week.traces) == 20
