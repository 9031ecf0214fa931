"""The `statechart` command on a PostgreSQL store: `--db postgresql://...` (or
`STATECHART_DB`) wherever it takes a SQLite file, each command a real process."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import AGENT, OK, TICKET, WAITING, cli_env, run_cli, waiting_id
from tests.support.postgres import fresh_database


def test_run_waits_then_approve_in_another_process_resumes_to_done(tmp_path: Path) -> None:
    with fresh_database() as dsn:
        out = run_cli(tmp_path, "run", AGENT, "--input", TICKET, "--db", dsn, code=WAITING)
        run_id = waiting_id(out.stdout)
        assert f"--db {dsn}" in out.stdout  # the hints name the same database
        assert not (tmp_path / "statechart.db").exists()  # no SQLite file was made
        (waiting,) = json.loads(
            run_cli(tmp_path, "runs", "--status", "waiting", "--json", "--db", dsn).stdout
        )
        assert (waiting["run_id"], waiting["state"], waiting["steps"]) == (
            run_id,
            "send.approve",
            17,
        )
        env = cli_env(STATECHART_DB=dsn)  # the variable names the store as --db does
        done = run_cli(tmp_path, "approve", run_id, "--by", "dana", environ=env, code=OK)
        assert f"run {run_id}: ended in 'done'" in done.stdout
        shown = json.loads(run_cli(tmp_path, "show", run_id, "--json", environ=env).stdout)
        assert shown["run"]["state"] == "done" and len(shown["events"]) == 21


def test_fork_and_resume_a_fork_on_postgres(tmp_path: Path) -> None:
    with fresh_database() as dsn:
        env = cli_env(STATECHART_DB=dsn)
        out = run_cli(tmp_path, "run", AGENT, "--input", TICKET, environ=env, code=WAITING)
        run_id = waiting_id(out.stdout)
        forked = run_cli(tmp_path, "fork", run_id, "--at", "4", environ=env).stdout
        child = forked.split()[1]
        assert f"forked from {run_id} at seq 4" in forked
        again = run_cli(tmp_path, "resume", child, environ=env, code=WAITING).stdout
        assert "waiting in 'send.approve'" in again
        listed = json.loads(run_cli(tmp_path, "runs", "--json", environ=env).stdout)
        assert {r["run_id"] for r in listed} == {run_id, child}
        shown = json.loads(run_cli(tmp_path, "show", child, "--json", environ=env).stdout)
        assert shown["run"]["parent_run"] == run_id
