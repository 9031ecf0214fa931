"""`statechart replay` as a real process: recorded runs against their own chart and a
changed one, the table, --json, --rename, --since, and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import AGENT, ROOT, cli
from tests.support.cli import ERROR, USAGE, WAITING, waiting_id

DIVERGED = 7

CHANGED = f"""
import dataclasses

from statechart.io.loading import load_chart

triage, support = load_chart("{ROOT}/agents/support_triage.py:chart")
chart = triage.with_tools("research", support.search_kb)  # lookup_account is gone


def name(state: str) -> str:
    return "compose" if state == "draft" else state


renamed = dataclasses.replace(  # the draft state is called compose now
    triage,
    states=tuple(dataclasses.replace(s, name=name(s.name)) for s in triage.states),
    edges=tuple(
        dataclasses.replace(e, source=name(e.source), target=name(e.target))
        for e in triage.edges
    ),
)
"""


def recorded(tmp_path: Path) -> str:
    out = cli(tmp_path, "run", AGENT, "--input", '{"ticket_id": "T-1001"}', code=WAITING).stdout
    run_id = waiting_id(out)
    assert "ended in 'done'" in cli(tmp_path, "approve", run_id, "--by", "op").stdout
    return run_id


def test_runs_replayed_against_their_own_chart_agree_and_exit_0(tmp_path: Path) -> None:
    first, second = recorded(tmp_path), recorded(tmp_path)
    out = cli(tmp_path, "replay", "--against", AGENT).stdout
    assert "replayed 2 run(s) against support_triage" in out
    assert [line.split() for line in out.splitlines() if line.startswith("agree")] == [
        ["agree", "2"]
    ]
    doc = json.loads(cli(tmp_path, "replay", first, second, "--against", AGENT, "--json").stdout)
    assert doc["ok"] is True and doc["counts"] == {"agree": 2}
    assert [v["run_id"] for v in doc["verdicts"]] == [first, second]
    assert all(v["agreed"] == 21 for v in doc["verdicts"])  # the demo's 21 steps, each met


def test_a_changed_chart_diverges_with_its_kind_and_step_and_exits_7(tmp_path: Path) -> None:
    run_id = recorded(tmp_path)
    (tmp_path / "changed.py").write_text(CHANGED)
    done = cli(tmp_path, "replay", "--against", "changed.py:chart", code=DIVERGED)
    assert "diverge:call_not_allowed" in done.stdout
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(run_id)]
    assert row.split()[1:4] == ["call_not_allowed", "8", "research"]
    assert "no longer allows tool 'lookup_account'" in row
    doc = json.loads(
        cli(tmp_path, "replay", "--against", "changed.py:chart", "--json", code=DIVERGED).stdout
    )
    (verdict,) = doc["verdicts"]
    assert (verdict["outcome"], verdict["kind"], verdict["seq"]) == (
        "diverge",
        "call_not_allowed",
        8,
    )


def test_a_renamed_state_diverges_until_the_rename_is_given(tmp_path: Path) -> None:
    run_id = recorded(tmp_path)
    (tmp_path / "changed.py").write_text(CHANGED)
    against = ["replay", "--against", "changed.py:renamed", "--chart", "support_triage"]
    done = cli(tmp_path, *against, code=DIVERGED)
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(run_id)]
    assert row.split()[1:3] == ["state_missing", "10"] and "'draft'" in row
    assert "agree" in cli(tmp_path, *against, "--rename", "draft=compose").stdout


def test_selection_by_date_and_the_usage_errors(tmp_path: Path) -> None:
    run_id = recorded(tmp_path)
    later = cli(tmp_path, "replay", "--against", AGENT, "--since", "2999-01-01", "--json")
    assert json.loads(later.stdout)["runs"] == 0
    assert "no recorded run matched" in later.stderr
    earlier = cli(tmp_path, "replay", "--against", AGENT, "--since", "2000-01-01", "--json")
    assert [v["run_id"] for v in json.loads(earlier.stdout)["verdicts"]] == [run_id]
    assert json.loads(cli(tmp_path, "replay", "--against", AGENT, "--all", "--json").stdout)[
        "counts"
    ] == {"agree": 1}
    assert "--against" in cli(tmp_path, "replay", code=USAGE).stderr
    assert (
        "not both"
        in cli(tmp_path, "replay", run_id, "--all", "--against", AGENT, code=USAGE).stderr
    )
    assert (
        "use OLD=NEW"
        in cli(tmp_path, "replay", "--against", AGENT, "--rename", "oops", code=USAGE).stderr
    )
    assert (
        "ISO date"
        in cli(tmp_path, "replay", "--against", AGENT, "--since", "May", code=USAGE).stderr
    )
    missing = cli(tmp_path, "replay", "nope", "--against", AGENT, code=ERROR)
    assert "no run nope" in missing.stderr
