"""The CLI's live output (cli/live.py): a rich view in a real pseudo-terminal, JSON
lines with --json, and today's plain lines when piped."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.support.cli import ROOT, cli_env, run_cli

LIVE = f"{ROOT}/tests/support/live_agent.py:chart"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def in_terminal(cwd: Path, *args: str, timeout: float = 60) -> tuple[int, str]:
    """`statechart ARGS` with a pseudo-terminal as its stdout and stderr: its exit code
    and everything it wrote, escape codes removed, in the order written."""
    leader, follower = pty.openpty()
    env = cli_env(TERM="xterm-256color", COLUMNS="120", LINES="40")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    out = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    os.close(leader)
    code = proc.wait(timeout=10)
    return code, _ESCAPES.sub("", out.decode(errors="replace"))


def test_run_on_a_terminal_shows_the_state_budget_bars_and_text_as_it_streams(
    tmp_path: Path,
) -> None:
    code, out = in_terminal(tmp_path, "run", LIVE, "--db", str(tmp_path / "runs.db"))
    assert code == 0, out
    assert "work.think" in out and "root steps" in out and "root tokens" in out
    assert "tool gather: page" in out  # the tool's progress, live
    assert '→ gather {"topic": "tides"}' in out  # a call's arguments as they stream
    # the reply streams: frames show its first words before the whole reply, and before
    # the step that stores the reply (seq 3) is printed
    first, last = out.index("word1 word2"), out.index("word40")
    stored = re.search(r"\b3\s+work\.think -> work\.act", out)
    assert stored is not None and first < last < stored.start()
    kept = re.search(r" {6}word1 word2", out[stored.end() :])  # not the live panel's "│ word1"
    assert kept is not None  # printed below its stored step, where it stays
    assert re.search(r"\b4\s+work\.act -> done", out)
    assert out.rstrip().endswith(": ended in 'done'")


def test_json_prints_one_live_event_per_line_and_the_outcome_on_stderr(tmp_path: Path) -> None:
    fast = cli_env(LIVE_AGENT_DELAY="0.001")
    done = run_cli(tmp_path, "run", LIVE, "--db", str(tmp_path / "runs.db"), "--json", environ=fast)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "call_started" and kinds[-1] == "ended"
    assert {"token", "progress", "step"} <= set(kinds)
    said = "".join(
        e["text"] for e in events if e["kind"] == "token" and not e.get("tool") and e["seq"] == 3
    )
    assert said.strip().endswith("word40")
    steps = [e for e in events if e["kind"] == "step"]
    assert [s["seq"] for s in steps] == list(range(1, len(steps) + 1))
    assert events[-1]["state"] == "done" and events[-1]["status"] == "ended"
    assert "ended in 'done'" in done.stderr and "run " in done.stderr


def test_piped_output_stays_one_plain_line_per_step(tmp_path: Path) -> None:
    fast = cli_env(LIVE_AGENT_DELAY="0.001")
    done = run_cli(tmp_path, "run", LIVE, "--db", str(tmp_path / "runs.db"), environ=fast)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run ") and "of live_agent" in lines[0]
    assert re.match(r"\s+1\s+work\.think -> work\.act\s+\[root: steps 1 \(11 left\)", lines[1])
    assert not any("word1" in line for line in lines)  # no streamed text when piped
    assert "\x1b" not in done.stdout


def test_resume_json_streams_the_rest_of_a_waiting_run(tmp_path: Path) -> None:
    from tests.support.cli import AGENT, TICKET, WAITING, waiting_id

    db = str(tmp_path / "runs.db")
    first = run_cli(tmp_path, "run", AGENT, "--db", db, "--input", TICKET, code=WAITING)
    rid = waiting_id(first.stdout)
    run_cli(tmp_path, "approve", rid, "--db", db, "--no-resume")
    done = run_cli(tmp_path, "resume", rid, "--db", db, "--json")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["kind"] == "ended" and events[-1]["run_id"] == rid
    assert any(e["kind"] == "call_started" and e["call"] == "tool" for e in events)


def test_output_closed_by_its_reader_stops_quietly_and_says_how_to_go_on(tmp_path: Path) -> None:
    """`statechart run ... --json | head -1`: the drive stops at the step it was on, the
    run stays stored, and the exit code is a closed pipe's, not a failure's."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "statechart.cli", "run", LIVE, "--json", "--run-id", "cut-1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(LIVE_AGENT_DELAY="0.05"),
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = json.loads(proc.stdout.readline())
    assert first["kind"] == "call_started"
    proc.stdout.close()  # the reader goes away, as `head -1` does
    assert proc.wait(timeout=60) == 141
    said = proc.stderr.read().decode()
    assert "stopped: the output was closed" in said and "Traceback" not in said
    shown = run_cli(tmp_path, "show", "cut-1", "--json").stdout
    assert json.loads(shown)["run"]["status"] == "running"  # stored, ready to resume
    assert run_cli(tmp_path, "resume", "cut-1", code=None).returncode == 0
