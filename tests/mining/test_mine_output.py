"""What a new user of `statechart mine` and `drift` trips on (issue #14): every run id in
the rare-moves table, `--json` documents, flags shown as flags in `--help`, the run ids
of JSONL lines, and a proposal from traces without a single tool call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statechart.mining import (
    Call,
    Trace,
    TraceFormatError,
    drift,
    mine,
    read_jsonl,
    synthetic_traces,
    write_jsonl,
)
from statechart.mining.propose import propose

ROOT = Path(__file__).resolve().parents[2]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )


def section(out: str, title: str) -> str:
    return out.split(f"## {title}")[1].split("\n## ")[0]


# -- the rare-moves table ------------------------------------------------------------------


def test_rare_moves_table_lists_every_run_id_on_wrapped_lines(tmp_path: Path) -> None:
    """A rare move taken by 40 runs lists all 40 ids (no '... (+N)'), wrapped over rows of
    the table so no line grows without bound."""
    traces = [Trace(f"common-{i:04d}", (Call("a"), Call("b"))) for i in range(4960)]
    traces += [Trace(f"rare-{i:02d}", (Call("a"), Call("c"))) for i in range(40)]
    write_jsonl(traces, tmp_path / "t.jsonl")
    done = cli(tmp_path, "mine", "t.jsonl")
    assert done.returncode == 0, done.stderr
    rare = section(done.stdout, "Rare moves")
    assert "(+" not in rare and "..." not in rare
    assert all(f"rare-{i:02d}" in rare for i in range(40)), rare
    assert max(len(line) for line in rare.splitlines()) < 120, rare
    assert "| a:ok | c:ok | 40    | 5000 | 0.80% | rare-00, " in rare


def test_rare_moves_table_of_the_planted_week_names_all_nine_unreviewed_runs(
    tmp_path: Path,
) -> None:
    week = synthetic_traces(1200, seed=0)
    write_jsonl(week.traces, tmp_path / "t.jsonl")
    rare = section(cli(tmp_path, "mine", "t.jsonl").stdout, "Rare moves")
    assert len(week.unreviewed) == 9
    assert all(run in rare for run in week.unreviewed), rare


# -- --json ----------------------------------------------------------------------------------


def test_mine_json_holds_the_same_facts_as_the_tables(tmp_path: Path) -> None:
    week = synthetic_traces(1200, seed=0)
    write_jsonl(week.traces, tmp_path / "t.jsonl")
    done = cli(tmp_path, "mine", "t.jsonl", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    mined = mine(week.traces)
    assert (doc["runs"], doc["calls"], doc["by"]) == (1200, 7430, "label")
    assert (doc["threshold"], doc["repeat_limit"]) == (0.01, 3)
    assert len(doc["transitions"]) == len(mined.edges()) == 30
    assert doc["rare"] == [
        {
            "source": e.source,
            "target": e.target,
            "count": e.count,
            "total": e.total,
            "share": e.share,
            "runs": list(e.runs),
        }
        for e in mined.rare
    ]
    unreviewed = [r for r in doc["rare"] if r["target"] == "send_reply:sent"]
    assert [set(r["runs"]) for r in unreviewed] == [set(week.unreviewed)]
    assert {r["run_id"] for r in doc["repeats"]} == set(week.repeated)
    assert doc["repeats"][0].keys() == {"run_id", "tool", "streak"}
    assert doc["visits"]["fetch_ticket:ok"] == [
        {"times": n, "runs": k} for n, k in mined.visits["fetch_ticket:ok"].items()
    ]


@pytest.mark.parametrize("other", ["--mermaid", "--propose=d.py"])
def test_mine_json_with_another_output_is_one_clear_error(tmp_path: Path, other: str) -> None:
    write_jsonl(
        synthetic_traces(100, seed=0, repeated=1, unreviewed=1, early_drafts=1).traces,
        tmp_path / "t.jsonl",
    )
    done = cli(tmp_path, "mine", "t.jsonl", "--json", other)
    assert done.returncode == 1 and done.stdout == ""
    assert "--json" in done.stderr and other.split("=")[0] in done.stderr
    assert not (tmp_path / "d.py").exists()


def test_drift_json_lists_every_edge_with_its_flag(tmp_path: Path) -> None:
    before, after = synthetic_traces(seed=1).traces, synthetic_traces(seed=2, redraft=0.25).traces
    write_jsonl(before, tmp_path / "before.jsonl")
    write_jsonl(after, tmp_path / "after.jsonl")
    done = cli(tmp_path, "drift", "before.jsonl", "after.jsonl", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    found = drift(before, after)
    assert (doc["runs_before"], doc["runs_after"], doc["alpha"]) == (1200, 1200, 0.01)
    assert len(doc["edges"]) == len(found.edges)
    flagged = [(e["source"], e["target"]) for e in doc["edges"] if e["flagged"]]
    assert flagged == [("draft_reply:ok", "draft_reply:ok")]
    assert doc["edges"][0].keys() >= {
        "before",
        "after",
        "rate_before",
        "rate_after",
        "g",
        "p",
        "p_holm",
        "flagged",
    }
    assert doc["appeared"] == [{"source": s, "target": t, "count": n} for s, t, n in found.appeared]
    assert doc["vanished"] == [{"source": s, "target": t, "count": n} for s, t, n in found.vanished]
    assert all(s.keys() >= {"source", "df", "g", "p_holm", "flagged"} for s in doc["sources"])


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("mine", ["--json", "--mermaid", "--force", "--shadow"]),
        ("drift", ["--json", "--all"]),
    ],
)
def test_help_shows_boolean_options_as_flags(
    tmp_path: Path, command: str, flags: list[str]
) -> None:
    """`--json` in `--help`, not `--json <bool>`: a flag takes no value."""
    done = cli(tmp_path, command, "--help")
    assert done.returncode == 0, done.stderr
    for flag in flags:
        lines = [x for x in done.stdout.splitlines() if f" {flag} " in x]
        assert lines, (flag, done.stdout)
        assert all("<bool>" not in x for x in lines), (flag, lines)


# -- run ids of JSONL lines ------------------------------------------------------------------


def test_jsonl_lines_take_their_run_id_from_run_id_or_id_else_the_line_number(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                '[{"tool": "a"}]',
                "",
                '{"run_id": "r-3", "steps": [{"tool": "a"}]}',
                '{"id": "x-4", "steps": [{"tool": "a"}]}',
                '{"id": 5, "steps": []}',
                '{"steps": [{"tool": "a"}]}',
                '{"run_id": "both", "id": "ignored", "steps": []}',
            ]
        )
        + "\n"
    )
    assert [t.run_id for t in read_jsonl(path)] == ["line-1", "r-3", "x-4", "5", "line-6", "both"]


@pytest.mark.parametrize("value", ["null", '""', "true", '["a"]'])
def test_jsonl_run_id_that_is_not_a_name_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('[{"tool": "a"}]\n{"run_id": ' + value + ', "steps": []}\n')
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:2: run_id must be a non-empty string"):
        read_jsonl(path)


def test_jsonl_object_without_steps_says_so(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"run_id": "r", "calls": []}\n')
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:1: .*needs 'steps'"):
        read_jsonl(path)


# -- a proposal needs a tool call -----------------------------------------------------------

NO_CALLS = "no tool calls in any trace; a proposal needs at least one"


def test_propose_from_traces_without_calls_raises_trace_format_error() -> None:
    with pytest.raises(TraceFormatError, match=f"runs.jsonl: {NO_CALLS}"):
        propose([Trace("line-1", ()), Trace("line-2", ())], where="runs.jsonl")
    with pytest.raises(TraceFormatError, match=NO_CALLS):
        propose([Trace("line-1", ())])


@pytest.mark.parametrize("content", ["[]\n", '[]\n\n{"run_id": "a", "steps": []}\n'])
def test_mine_propose_from_a_file_without_calls_fails_and_writes_nothing(
    tmp_path: Path, content: str
) -> None:
    (tmp_path / "empty.jsonl").write_text(content)
    done = cli(tmp_path, "mine", "empty.jsonl", "--propose", "d.py")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == f"error: empty.jsonl: {NO_CALLS}"
    assert not (tmp_path / "d.py").exists()


def test_check_refuses_a_chart_without_states(tmp_path: Path) -> None:
    (tmp_path / "c.py").write_text(
        "from statechart import Budget, Chart\n"
        "chart = Chart('c', states=(), budget=Budget(max_steps=5))\n"
    )
    done = cli(tmp_path, "check", "c.py:chart")
    assert done.returncode == 1 and not done.stdout.startswith("ok")
    assert "has no states" in done.stderr, done.stderr
