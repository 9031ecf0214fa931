"""The `statechart` command, each invocation a real process on a real SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from statechart import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{ROOT}/agents/support_triage.py:chart"
TICKET = '{"ticket_id": "T-1001"}'


def cli(tmp_path: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def started(tmp_path: Path) -> str:
    out = cli(tmp_path, "run", AGENT, "--input", TICKET).stdout
    assert "waiting in 'send.approve'" in out
    assert "steps 1 (59 left)" in out  # live progress shows each budget spent and left
    (line,) = [x for x in out.splitlines() if x.startswith("approve: ")]
    return line.split()[3]


def test_run_waits_then_approve_in_another_process_resumes_to_done(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    assert (tmp_path / "statechart.db").exists()  # the default store, in the working dir
    listed = cli(tmp_path, "runs", "--status", "waiting").stdout
    assert run_id in listed and "send.approve" in listed
    out = cli(tmp_path, "approve", run_id, "--by", "dana", "--note", "checked").stdout
    assert "approved by dana" in out and f"run {run_id}: ended in 'done'" in out
    assert cli(tmp_path, "runs", "--status", "waiting").stdout == ""
    shown = cli(tmp_path, "show", run_id).stdout
    assert "human:dana" in shown and "send_reply" in shown
    assert "total: 21 transitions, 20 steps, 9 model calls, 5 tool calls" in shown
    data = json.loads(cli(tmp_path, "show", run_id, "--json").stdout)
    assert data["run"]["state"] == "done" and len(data["events"]) == 21
    assert data["totals"]["tool_calls"] == 5
    assert [e["by"] for e in data["events"] if e["actor"] == "human"] == ["dana"]


def test_approve_with_an_edit_and_no_resume_only_records_it(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    out = cli(
        tmp_path, "approve", run_id, "--edit", '{"text": "edited reply"}', "--no-resume"
    ).stdout
    assert "approved by cli" in out and "ended" not in out
    db = sqlite3.connect(tmp_path / "statechart.db")
    status, state = db.execute("SELECT status, state FROM runs").fetchone()
    assert (status, state) == ("running", "send.act")
    assert "done" in cli(tmp_path, "resume", run_id).stdout


def test_reject_then_resume_and_cancel(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    out = cli(tmp_path, "reject", run_id, "--reason", "too terse").stdout
    assert "rejected by cli" in out and "statechart resume" in out
    cli(tmp_path, "cancel", run_id, "--reason", "customer called")
    shown = cli(tmp_path, "show", run_id).stdout
    assert "now: ended in 'cancelled' (cancelled: customer called)" in shown


def test_fork_starts_a_new_run_that_resume_drives(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    out = cli(tmp_path, "fork", run_id, "--at", "4").stdout
    child = out.split()[1]
    assert f"forked from {run_id} at seq 4" in out
    assert "waiting in 'send.approve'" in cli(tmp_path, "resume", child).stdout


NESTED = """
from statechart import Budget, Chart, Edge, State

DONE = State("done", kind="terminal")


def inner():
    return Chart("deep", states=(State("probe"), DONE), edges=(Edge("probe", "done"),))


def middle():
    return Chart("middle", states=(State("inner", kind="chart", chart=inner,
                                         exits={"done": "done"}), DONE))


def workflow():
    return Chart("workflow", budget=Budget(max_steps=60), states=(
        State("explore", kind="chart", chart=middle, exits={"done": "report"}),
        State("report"), DONE), edges=(Edge("report", "done"),))
"""


def test_check_and_diagram(tmp_path: Path) -> None:
    assert cli(tmp_path, "check", AGENT).stdout.startswith("ok: support_triage version ")
    (tmp_path / "nested.py").write_text(NESTED)
    nested = cli(tmp_path, "diagram", "nested.py:workflow").stdout
    assert nested.startswith("stateDiagram-v2\n")
    assert 'state "explore" as s_explore {' in nested
    assert 'state "inner" as s_explore__inner {' in nested
    assert "s_explore --> s_report : exit done" in nested
    run_id = started(tmp_path)
    marked = cli(tmp_path, "diagram", "--run", run_id).stdout
    assert "s_intake --> s_research : taken 1x" in marked
    assert marked.rstrip().endswith("class s_send current")


@pytest.mark.parametrize(
    "args",
    [
        ("resume", "no-such-run"),
        ("check", f"{ROOT}/agents/support_triage.py:nope"),
        ("check", "agents/missing.py:chart"),
        ("run", AGENT, "--input", "{not json"),
        ("runs", "--status", "sleeping"),
    ],
)
def test_errors_are_one_line_and_a_nonzero_exit(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = cli(tmp_path, *args, ok=False)
    assert done.returncode != 0
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "statechart.db").close()
    done = cli(tmp_path, "--debug", "resume", "no-such-run", ok=False)
    assert done.returncode != 0 and "Traceback" in done.stderr
    assert "RunNotFoundError" in done.stderr


@pytest.mark.parametrize(
    "command",
    ["run", "runs", "show", "resume", "approve", "reject", "cancel", "fork", "check", "diagram"],
)
def test_every_command_has_help_with_an_example(tmp_path: Path, command: str) -> None:
    assert "Example" in cli(tmp_path, command, "--help").stdout


def test_input_file_and_filtering_runs_by_chart(tmp_path: Path) -> None:
    (tmp_path / "ticket.json").write_text(TICKET)
    out = cli(tmp_path, "run", AGENT, "--input-file", "ticket.json", "--run-id", "r-1").stdout
    assert "run r-1 of support_triage" in out and "waiting" in out
    assert cli(tmp_path, "runs", "--chart", "support_triage").stdout.startswith("r-1 ")
    assert cli(tmp_path, "runs", "--chart", "refund_desk").stdout == ""
