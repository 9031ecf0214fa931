"""`statechart submit`: a run stored ready to drive, idempotent by its id, driven later
by `resume` (and by workers); each command a real process, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import AGENT, DESK, ERROR, OK, TICKET, WAITING, run_cli
from tests.support.postgres import fresh_database


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "runs.db")
        return
    with fresh_database() as dsn:
        yield dsn


def test_submit_stores_a_run_once_and_resume_drives_it(db: str, tmp_path: Path) -> None:
    args = ("submit", AGENT, "--input", TICKET, "--run-id", "t-1", "--db", db)
    first = run_cli(tmp_path, *args, code=OK)
    again = run_cli(tmp_path, *args, code=OK)  # the same id twice: the first run
    assert first.stdout.strip() == again.stdout.strip() == "t-1"
    assert "statechart resume t-1" in first.stderr
    (listed,) = json.loads(run_cli(tmp_path, "runs", "--json", "--db", db).stdout)
    assert (listed["run_id"], listed["status"], listed["seq"]) == ("t-1", "running", 0)
    out = run_cli(tmp_path, "resume", "t-1", "--db", db, code=WAITING).stdout
    assert "waiting in 'send.approve'" in out


def test_submit_refuses_an_id_taken_by_another_chart(db: str, tmp_path: Path) -> None:
    run_cli(tmp_path, "submit", AGENT, "--input", TICKET, "--run-id", "x", "--db", db)
    done = run_cli(
        tmp_path,
        *("submit", DESK, "--input", '{"order_id": "A-7"}', "--run-id", "x", "--db", db),
        code=ERROR,
    )
    assert "run x exists and is a run of support_triage, not refund_desk" in done.stderr
