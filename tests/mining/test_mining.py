"""Mining: the miner, the proposal and drift against generated traces of known structure."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    replay_all,
    synthetic_traces,
    transition_counts,
    write_jsonl,
)
from statechart.mining.propose import propose

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
        == 0
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
