"""Approvals across processes: each command below runs in its own Python process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from statechart import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]


def proc(tmp_path: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "SENT_FILE": str(tmp_path / "sent.txt")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.approval_proc",
            args[0],
            str(tmp_path / "runs.db"),
            *args[1:],
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def sent(tmp_path: Path) -> list[str]:
    path = tmp_path / "sent.txt"
    return path.read_text().splitlines() if path.exists() else []


def human_events(tmp_path: Path) -> list[tuple[str, str | None, str]]:
    async def read() -> list[tuple[str, str | None, str]]:
        store = SQLiteStore(tmp_path / "runs.db")
        events = await store.events("r1")
        store.close()
        return [(e.trigger, e.by, e.reason) for e in events if e.actor == "human"]

    return anyio.run(read)


def test_approve_with_edits_in_another_process_then_resume_in_a_third(tmp_path: Path) -> None:
    first = proc(tmp_path, "start")
    assert first["status"] == "waiting" and first["state"] == "send.approve"
    approved = proc(tmp_path, "approve", json.dumps({"text": "final"}))
    assert approved["status"] == "running" and approved["pid"] != first["pid"]
    assert sent(tmp_path) == []  # approving records the decision; it does not drive
    end = proc(tmp_path, "resume")
    assert end["state"] == "done"
    assert sent(tmp_path) == ["final"]
    assert human_events(tmp_path) == [("approved", "lead", "approved by lead: ok")]


def test_reject_in_another_process_then_resume(tmp_path: Path) -> None:
    proc(tmp_path, "start")
    proc(tmp_path, "reject", "tone is wrong")
    end = proc(tmp_path, "resume")
    assert end["state"] == "done" and sent(tmp_path) == []
    assert human_events(tmp_path) == [("rejected", "lead", "rejected by lead: tone is wrong")]


def test_cancel_from_another_process_ends_the_run(tmp_path: Path) -> None:
    proc(tmp_path, "start")
    cancelled = proc(tmp_path, "cancel", "customer called")
    assert cancelled["state"] == "cancelled" and cancelled["status"] == "ended"
    assert cancelled["reason"] == "cancelled: customer called"
    end = proc(tmp_path, "resume")
    assert end["state"] == "cancelled" and sent(tmp_path) == []
    assert human_events(tmp_path) == [("cancel", "ops", "customer called")]


@pytest.mark.parametrize("command", ["approve", "reject"])
def test_deciding_twice_is_a_clear_error(tmp_path: Path, command: str) -> None:
    proc(tmp_path, "start")
    proc(tmp_path, command, "" if command == "approve" else "no")
    env = {**os.environ, "SENT_FILE": str(tmp_path / "sent.txt")}
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.approval_proc",
            command,
            str(tmp_path / "runs.db"),
            "",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode != 0
    assert "NotWaitingError: run r1 is running in 'send." in again.stderr
    assert "not waiting for approval; nothing to approve or reject" in again.stderr
