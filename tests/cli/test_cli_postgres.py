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


def test_a_dsn_that_leads_nowhere_is_one_error_line_at_once(tmp_path: Path) -> None:
    """A database that does not exist, a port nothing listens on, a malformed password
    escape: `runs` and `worker` each answer with one `error:` line carrying the reason the
    client or the server gave (the password hidden) and exit 1 at once, never after the
    pool's 30 s timeout and its warnings."""
    import time

    from tests.support.cli import ERROR

    with fresh_database() as dsn:  # a server that answers: only the DSNs below are wrong
        base = dsn.rsplit("/", 1)[0]
        host = base.split("://", 1)[1]
        cases = (
            (f"{base}/statechart_no_such_db", 'database "statechart_no_such_db" does not exist'),
            (f"postgresql://{host.split(':')[0]}:1/test", "Connection refused"),
            (f"postgresql://bob:s3cr%zz@{host}/test", "invalid percent-encoded token"),
        )
        for bad, reason in cases:
            for command in ("runs", "worker"):
                t0 = time.monotonic()
                out = run_cli(tmp_path, command, "--db", bad, code=ERROR)
                took = time.monotonic() - t0
                errors = [x for x in out.stderr.splitlines() if x.startswith("error:")]
                assert len(errors) == 1 and reason in errors[0], (command, out.stderr)
                assert "cannot connect to PostgreSQL" in errors[0]
                assert "s3cr" not in out.stderr and "PoolTimeout" not in out.stderr
                assert "WARNING" not in out.stderr and "reopening" not in out.stderr
                assert took < 20, (command, bad, took)  # no pool timeout, no retry loop
