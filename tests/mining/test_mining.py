"""Mining: the miner, the proposal and drift against generated traces of known structure;
traces read from files and stores; the mine command."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
import types
from collections import Counter, defaultdict
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statechart as sc
from statechart.mining import (
    END,
    START,
    Call,
    Trace,
    TraceFormatError,
    chi2_sf,
    drift,
    holm,
    mine,
    read_jsonl,
    read_store,
    replay_all,
    synthetic_traces,
    transition_counts,
    write_jsonl,
)
from statechart.mining.propose import propose
from statechart.mining.render import mined_mermaid
from statechart.runtime.lineage import fork

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (0, 1, 2, 7)


def load_source(source: str) -> object:
    namespace: dict[str, object] = {}
    exec(compile(source, "draft.py", "exec"), namespace)
    return namespace["chart"]


# -- reading traces ----------------------------------------------------------------------


def test_jsonl_round_trip_and_both_line_shapes(tmp_path: Path) -> None:
    s = synthetic_traces(50, seed=3, repeated=1, unreviewed=1, early_drafts=1)
    path = tmp_path / "t.jsonl"
    write_jsonl(s.traces, path)
    assert tuple(read_jsonl(path)) == s.traces
    bare = tmp_path / "bare.jsonl"
    bare.write_text('[{"tool": "a", "outcome": "x"}, {"tool": "b"}]\n\n[]\n')
    found = read_jsonl(bare)
    assert found == [Trace("line-1", (Call("a", "x"), Call("b", "ok"))), Trace("line-3", ())]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "t.jsonl:2: not JSON"),
        ('"text"', "must be a JSON list of steps"),
        ('[{"outcome": "hit"}]', "step 0 needs a non-empty string 'tool'"),
        ('[{"tool": "a"}, {"tool": "b", "outcome": 3}]', "step 1 (b) has outcome 3"),
    ],
)
def test_malformed_trace_lines_name_the_line_and_the_step(
    tmp_path: Path,
    line: str,
    says: str,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('[{"tool": "a"}]\n' + line + "\n")
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:2") as err:
        read_jsonl(path)
    assert says in str(err.value)


# -- the miner ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_miner_finds_exactly_the_planted_runs_and_edges(seed: int) -> None:
    s = synthetic_traces(seed=seed)
    m = mine(s.traces)
    assert m.rare_keys == s.rare_edges
    takers = {run for e in m.rare for run in e.runs}
    assert takers == s.unreviewed | s.early_drafts
    by_edge = {(e.source, e.target): set(e.runs) for e in m.rare}
    assert by_edge[("draft_reply:ok", "send_reply:sent")] == s.unreviewed
    assert by_edge[(START, "draft_reply:ok")] == s.early_drafts
    assert {r.run_id for r in m.repeats} == s.repeated
    assert all(r.tool == "search_kb" and r.streak >= 5 for r in m.repeats)
    assert m.runs == 1200 and m.steps == sum(len(t.calls) for t in s.traces)
    assert m.visits["fetch_ticket:ok"] == {1: 1200}
    assert sum(m.visits["search_kb:hit"].values()) == 1200


def naive_counts(runs: list[list[str]]) -> dict[str, Counter[str]]:
    """Seed 003's own loop, written out again to compare against."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for labels in runs:
        prev = START
        for label in [*labels, END]:
            counts[prev][label] += 1
            prev = label
    return counts


runs_strategy = st.lists(
    st.lists(st.sampled_from(["a:x", "a:y", "b:x", "c:z"]), max_size=12), max_size=30
)


@given(runs_strategy)
@settings(max_examples=80, deadline=None)
def test_counts_equal_the_seed_recipe_and_flow_is_conserved(runs: list[list[str]]) -> None:
    counts = transition_counts(runs)
    assert {k: dict(v) for k, v in naive_counts(runs).items()} == counts
    inflow: Counter[str] = Counter()
    for row in counts.values():
        inflow.update(row)
    for label, row in counts.items():
        if label != START:
            assert inflow[label] == sum(row.values())  # every label entered is left
    assert sum(counts.get(START, {}).values()) == len(runs) == inflow[END]


@given(runs_strategy, st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_rare_edges_and_repeats_follow_their_definitions(runs: list[list[str]], limit: int) -> None:
    traces = [Trace(f"r{i}", tuple(Call(*x.split(":")) for x in r)) for i, r in enumerate(runs)]
    m = mine(traces, threshold=0.2, repeat_limit=limit)
    for e in m.edges():
        assert ((e.source, e.target) in m.rare_keys) == (e.count / e.total < 0.2)
    flagged = {r.run_id for r in m.repeats}
    for t in traces:
        tools = [c.tool for c in t.calls]
        longest = max((len(list(g)) for _, g in itertools.groupby(tools)), default=0)
        assert (t.run_id in flagged) == (longest > limit)


# -- the proposal ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_proposal_forbids_the_rare_edges_and_replays_every_common_trace(seed: int) -> None:
    s = synthetic_traces(seed=seed)
    draft = propose(s.traces)
    chart = load_source(draft.source)
    refusals = replay_all(chart, list(s.traces))  # type: ignore[arg-type]
    flagged = {run for run, found in refusals.items() if found}
    assert flagged == s.anomalous
    phase = {t: ph.name for ph in draft.phases for t in ph.tools}
    allowed = set(draft.edges)
    for src, dst in {("draft_reply", "send_reply"), ("draft_reply", "fetch_ticket")}:
        assert (phase[src], phase[dst]) not in allowed
    assert draft.initial == phase["fetch_ticket"]
    for run in s.unreviewed | s.early_drafts:
        assert {r.kind for r in refusals[run]} >= {"illegal"}
    for run in s.repeated:
        assert any(r.kind == "budget" and r.tool == "search_kb" for r in refusals[run])
    assert phase["search_kb"] == phase["lookup_account"] != phase["draft_reply"]


def test_proposal_passes_statechart_check(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    write_jsonl(synthetic_traces(seed=5).traces, traces)
    run = subprocess.run(
        [sys.executable, "-m", "statechart.cli", "mine", str(traces), "--propose", "draft.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    assert "3 rare moves left out" in run.stdout
    check = subprocess.run(
        [sys.executable, "-m", "statechart.cli", "check", "draft.py:chart"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("ok: mined version")


def test_proposal_with_several_starts_gets_a_router_and_odd_tool_names() -> None:
    traces = [
        Trace(f"r{i}", (Call("web-search" if i % 2 else "class"), Call("send"))) for i in range(40)
    ]
    draft = propose(traces)
    assert draft.initial == "start"
    chart = load_source(draft.source)
    assert not any(replay_all(chart, traces).values())  # type: ignore[arg-type]
    assert "name='web-search'" in draft.source and "async def tool_class()" in draft.source


# -- drift -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "df", "p"),
    [
        (3.841459, 1, 0.05),
        (6.634897, 1, 0.01),
        (5.991465, 2, 0.05),
        (7.814728, 3, 0.05),
        (11.0705, 5, 0.05),
        (18.30704, 10, 0.05),
        (37.56623, 20, 0.01),
        (0.0, 4, 1.0),
    ],
)
def test_chi_square_tail_matches_the_tables(x: float, df: int, p: float) -> None:
    assert math.isclose(chi2_sf(x, df), p, rel_tol=1e-4, abs_tol=1e-9)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_adjusts_up_and_keeps_the_order(ps: list[float]) -> None:
    adjusted = holm(ps)
    assert all(a >= p - 1e-12 and a <= 1 for a, p in zip(adjusted, ps, strict=True))
    ranked = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(adjusted[ranked[i]] <= adjusted[ranked[i + 1]] for i in range(len(ps) - 1))


@pytest.mark.parametrize("seed", SEEDS)
def test_drift_flags_the_one_edge_that_changed_and_nothing_else(seed: int) -> None:
    before = synthetic_traces(seed=100 + seed).traces
    after = synthetic_traces(seed=200 + seed, redraft=0.2).traces
    same = synthetic_traces(seed=300 + seed).traces
    changed = drift(before, after)
    assert [(e.source, e.target) for e in changed.flagged] == [("draft_reply:ok", "draft_reply:ok")]
    assert changed.flagged[0].rate_after > changed.flagged[0].rate_before
    assert drift(before, same).flagged == []


def test_drift_lists_edges_that_appeared_or_vanished() -> None:
    before = [Trace(f"b{i}", (Call("a"), Call("b"))) for i in range(50)]
    after = [Trace(f"a{i}", (Call("a"), Call("c"))) for i in range(50)]
    d = drift(before, after, by="tool")
    assert ("a", "c", 50) in d.appeared and ("a", "b", 50) in d.vanished
    assert {(e.source, e.target) for e in d.flagged} == {
        ("a", "b"),
        ("a", "c"),
        ("b", END),
        ("c", END),
    }


def test_drift_cli_on_two_files(tmp_path: Path) -> None:
    write_jsonl(synthetic_traces(seed=1).traces, tmp_path / "before.jsonl")
    write_jsonl(synthetic_traces(seed=2, redraft=0.25).traces, tmp_path / "after.jsonl")
    run = subprocess.run(
        [sys.executable, "-m", "statechart.cli", "drift", "before.jsonl", "after.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    section = run.stdout.split("## Edges whose frequency changed")[1].split("##")[0]
    rows = [x for x in section.splitlines() if x.startswith("| ")]
    assert len(rows) == 2 and "| draft_reply:ok | draft_reply:ok |" in rows[1]


# -- the mine command --------------------------------------------------------------------


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )


def test_mine_prints_tables_and_mermaid_and_reads_a_store(tmp_path: Path) -> None:
    write_jsonl(synthetic_traces(seed=0).traces, tmp_path / "t.jsonl")
    out = cli(tmp_path, "mine", "t.jsonl", "--top", "0").stdout
    assert out.startswith("1200 runs, 7430 calls, 30 distinct moves")
    assert "| draft_reply:ok | send_reply:sent | 9     | 1458 | 0.62% |" in out
    assert out.count("| search_kb |") == 14
    drawn = cli(tmp_path, "mine", "t.jsonl", "--mermaid").stdout
    assert drawn.startswith("flowchart LR")
    assert 'n0_draft_reply_ok -.->|"9 (1%)"| n8_send_reply_sent' in drawn
    assert 'n5_policy_check_pass -->|"1191 (100%)"| n8_send_reply_sent' in drawn
    assert (
        cli(
            tmp_path,
            "run",
            str(ROOT / "agents/support_triage.py:chart"),
            "--input",
            '{"ticket_id": "T-1001"}',
        ).returncode
        == 3  # the run waits for an approval (docs/cli.md's exit codes)
    )
    stored = cli(tmp_path, "mine", "--db", "statechart.db", "--by", "tool")
    assert stored.returncode == 0, stored.stderr
    flat = " ".join(stored.stdout.split())
    assert flat.startswith("1 runs, 4 calls, 5 distinct moves (labels by tool)")
    assert "| START | fetch_ticket | 1 | 100.0% |" in flat
    assert "| lookup_account | draft_reply | 1 | 100.0% |" in flat
    assert "## Visits per run to each chart state" in flat and "| research | 1:1 |" in flat


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "give exactly one source"),
        (("t.jsonl", "--db", "x.db"), "give exactly one source"),
        (("missing.jsonl",), "no trace file at missing.jsonl"),
        (("--db", "missing.db"), "no store at missing.db"),
        (("--db", "t.jsonl"), "t.jsonl is not a SQLite store"),
        (("t.jsonl", "--shadow"), "--shadow reads shadow runs from a store"),
        (("empty.jsonl",), "holds no runs to mine"),
        (("t.jsonl", "--threshold", "2"), "threshold=2.0"),
    ],
)
def test_mine_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    (tmp_path / "t.jsonl").write_text('[{"tool": "a"}]\n')
    (tmp_path / "empty.jsonl").write_text("\n")
    done = cli(tmp_path, "mine", *args)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: ") and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_mine_propose_does_not_overwrite_its_own_input(tmp_path: Path) -> None:
    """`statechart mine t.jsonl --propose t.jsonl` never writes the draft over the traces
    it was mined from."""
    traces = tmp_path / "t.jsonl"
    write_jsonl(traces_of(["a", "b"], 5), traces)
    before = traces.read_text()
    cli(tmp_path, "mine", "t.jsonl", "--propose", "t.jsonl")
    assert traces.read_text() == before


# -- drafts that `statechart check` accepts -------------------------------------------------


def traces_of(tools: list[str], n: int, prefix: str = "r") -> list[Trace]:
    """`n` runs that each call `tools` in order, named prefix0, prefix1, ..."""
    return [Trace(f"{prefix}{i}", tuple(Call(t) for t in tools)) for i in range(n)]


def check_draft(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "draft.py").write_text(source, encoding="utf-8")
    return cli(tmp_path, "check", "draft.py:chart")


def load_draft(source: str) -> sc.Chart:
    module = types.ModuleType("draft")
    exec(compile(source, "draft.py", "exec"), module.__dict__)
    chart = module.__dict__["chart"]
    assert isinstance(chart, sc.Chart)
    return chart


def test_proposal_with_a_tool_only_rare_runs_use_passes_check(tmp_path: Path) -> None:
    """A tool seen only in a rare run (every move into and out of it rare) leaves no
    unreachable state in the draft: the draft passes `statechart check`."""
    traces = [*traces_of(["a", "b"], 200), Trace("odd", (Call("a"), Call("x"), Call("b")))]
    result = check_draft(tmp_path, propose(traces).source)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("tool", ["2fa_check", "über_search"])
def test_proposal_state_names_are_valid_chart_names(tmp_path: Path, tool: str) -> None:
    """State names made from tool names that start with a digit or hold a non-ASCII letter
    are valid chart names (^[A-Za-z][A-Za-z0-9_-]*$): the draft passes check."""
    result = check_draft(tmp_path, propose(traces_of([tool, "send"], 20)).source)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("tool", ['say "hi"', "C:\\new"])
def test_proposal_quotes_tool_names_in_its_source(tmp_path: Path, tool: str) -> None:
    """Tool names holding quotes or backslashes are written as proper string literals (in
    the note that keeps the traces' name): the draft loads, and offers each tool under the
    nearest name providers accept."""
    source = propose(traces_of([tool, "send"], 20)).source
    result = check_draft(tmp_path, source)
    assert result.returncode == 0, result.stderr
    chart = load_draft(source)
    offered = {'say "hi"': "say_hi", "C:\\new": "C_new"}[tool]
    assert {t.name for s in chart.states for t in s.tools} == {offered, "send"}
    assert f"# the traces call it {tool!r}" in source


def test_proposal_tool_named_sc_does_not_shadow_the_import(tmp_path: Path) -> None:
    """A tool named like a name the draft itself uses (`sc`, its statechart import) gets an
    identifier that does not rebind it: the draft passes check."""
    result = check_draft(tmp_path, propose(traces_of(["sc", "send"], 20)).source)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("starts", [["a"], ["a", "b"]])
def test_proposal_allows_runs_without_calls(tmp_path: Path, starts: list[str]) -> None:
    """A common START -> END (runs that called no tool) becomes an edge from the initial
    state (or the start router) to done, so the draft replays those runs too."""
    traces = traces_of([], 30, "e")
    for tool in starts:
        traces += traces_of([tool, "send"], 30 // len(starts), tool)
    draft = propose(traces)
    result = check_draft(tmp_path, draft.source)
    assert result.returncode == 0, result.stderr
    assert set(draft.common) == {t.run_id for t in traces}
    refused = replay_all(load_draft(draft.source), traces)
    assert not any(refused.values())


def test_proposal_reaches_done_when_every_end_move_is_rare() -> None:
    """When every move to END is rare (long cycling runs that stop anywhere), the draft
    still keeps a way to 'done', so the chart builds and validates."""
    traces = [
        Trace(f"r{i}", tuple(Call(t) for t in ["a", "b", "c"] * 10 + ["a", "b"][: i % 3]))
        for i in range(30)
    ]
    source = propose(traces, threshold=0.05).source
    module = types.ModuleType("draft")
    exec(compile(source, "draft.py", "exec"), module.__dict__)  # builds and validates the chart
    assert isinstance(module.__dict__["chart"], sc.Chart)


# -- traces read from a store or a file -------------------------------------------------------


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
    """A call whose stored result was cut to the tool's output cap (no longer JSON) is
    still mined with its outcome ('hit'), not as 'ok'."""

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
    """A forked run's trace starts with the calls it inherited from its parent before the
    fork point, then its own."""
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


def test_read_jsonl_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    """A JSONL file saved with a UTF-8 byte order mark (PowerShell, Excel, Notepad) reads
    like one without."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf[{"tool": "a", "outcome": "hit"}]\n')
    assert [c.label for t in read_jsonl(path) for c in t.calls] == ["a:hit"]


# -- drift, rendering and synthetic traces ----------------------------------------------------


def test_drift_rejects_an_unknown_by() -> None:
    """`drift(by=...)` accepts only 'label' or 'tool', as `mine` does."""
    traces = traces_of(["a"], 3)
    with pytest.raises(ValueError, match="by="):
        drift(traces, traces, by="bogus")


def test_mermaid_gives_distinct_labels_distinct_nodes() -> None:
    """Labels that differ only in punctuation ('web-search:ok', 'web_search:ok') are drawn
    as distinct Mermaid nodes."""
    traces = traces_of(["web-search", "send"], 5) + traces_of(["web_search", "send"], 5, "s")
    drawn = mined_mermaid(mine(traces))
    nodes = [line.split("[")[0].strip() for line in drawn.splitlines() if '["' in line]
    assert len(nodes) == len(set(nodes)) == 3


def test_synthetic_traces_with_few_runs_is_not_an_obscure_crash() -> None:
    """Asking for fewer runs than the anomalies planted by default either plants what fits
    or says which parameters to lower."""
    try:
        week = synthetic_traces(20, seed=0)
    except ValueError as exc:
        assert "runs" in str(exc) or "repeated" in str(exc), str(exc)
    else:
        assert len(week.traces) == 20


def test_each_region_of_a_parallel_run_is_mined_as_a_trace_of_its_own() -> None:
    """Three regions' lookups interleave in the log as the driver scheduled them; mined,
    each region is its own trace (no transition from one region's call to another's),
    and the run's own trace keeps what it did outside them."""
    from tests.support.parallel import desk, policy

    chart = desk(names=("web", "papers", "people"))

    async def go() -> list[Trace]:
        store = sc.MemoryStore()
        model = policy(lookups=2)
        run = await sc.start(chart, store=store, model=model)
        await sc.run_to_end(chart, run, store=store, model=model)
        return await read_store(store)

    traces = anyio.run(go)
    run_id = traces[0].run_id
    assert [t.run_id for t in traces] == [
        run_id,
        *(f"{run_id}:gather.{r}" for r in ("web", "papers", "people")),
    ]
    assert traces[0].calls == ()
    for t in traces[1:]:
        region = t.run_id.split(":")[1]
        assert [c.label for c in t.calls] == ["lookup:ok", "lookup:ok"]
        assert {c.state for c in t.calls} == {f"{region}.search"}
        assert dict(t.visits) == {region: 1, f"{region}.search": 1, f"{region}.found": 1}
    mined = mine(traces[1:])
    assert mined.counts["lookup:ok"] == {"lookup:ok": 3, "END": 3}
