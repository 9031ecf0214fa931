"""`statechart worker` as real processes on the local PostgreSQL: SIGTERM drains (the step
under way is stored, the lease released clean, the run put back for another worker), and
two workers racing for many runs never drive one run at once."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import psycopg
import pytest

from statechart.store.queue import Held
from tests.support.cli import cli_env, run_cli
from tests.support.postgres import fresh_database
from tests.support.soak import one_at_a_time

SLOW = '''
import os
import time

from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply, tool
from statechart.models import register

HERE = os.path.dirname(os.path.abspath(__file__))


@tool(retry="safe", needs_approval=os.environ.get("SLOW_APPROVAL") == "1")
def slow(text: str) -> str:
    """Take a while."""
    with open(os.path.join(HERE, "calls.txt"), "a") as f:
        f.write(text + "\\n")
    time.sleep(float(os.environ.get("SLOW_SECONDS", "0")))
    return text.upper()


def policy(request):
    if not any(m.role == "tool" for m in request.transcript):
        return reply(call("slow", "s1", text=str(request.context.get("order_id", "x"))))
    return reply(call("next_state", target="done"))


chart = Chart(
    "slow",
    budget=Budget(max_steps=10),
    states=(State("work", tools=(slow,), instructions="Work."), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
)


def demo_model(spec="demo:slow"):
    return FunctionModel(policy, spec=spec)


register("demo:slow", demo_model)
'''


def _agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "slow.py").write_text(textwrap.dedent(SLOW))
    return folder


def _worker(
    tmp_path: Path, dsn: str, agents: Path, *args: str, **env: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "statechart.cli",
            "worker",
            "--db",
            dsn,
            "--agents",
            str(agents),
            *list(args),
        ],
        cwd=tmp_path,
        env=cli_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(check, seconds: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_sigterm_drains_the_step_under_way_and_another_worker_finishes(tmp_path: Path) -> None:
    agents = _agents(tmp_path)
    calls = agents / "calls.txt"
    with fresh_database() as dsn:
        run_id = run_cli(
            tmp_path, "submit", f"{agents}/slow.py:chart", "--db", dsn, "--run-id", "r1"
        ).stdout.strip()
        worker = _worker(tmp_path, dsn, agents, "--lease-ttl", "30", SLOW_SECONDS="1.5")
        try:
            _wait(calls.exists, 20)  # the tool call is under way
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        finally:
            worker.kill()
        assert worker.returncode == 0, err
        assert "draining" in err and "stopped after 1 drives" in err
        with psycopg.connect(dsn) as db:
            holder, ready, status = db.execute(
                "SELECT lease_holder, ready, status FROM runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            ((clean,),) = db.execute(
                "SELECT clean FROM leases WHERE run_id = %s", (run_id,)
            ).fetchall()
        assert (holder, ready, status, clean) == (None, True, "running", True)
        shown = json.loads(run_cli(tmp_path, "show", run_id, "--json", "--db", dsn).stdout)
        last = shown["events"][-1]
        assert last["tool"] == "slow" and last["target"] == "work.think"  # its result stored
        second = _worker(tmp_path, dsn, agents, "--lease-ttl", "30")
        try:
            _wait(
                lambda: (
                    json.loads(run_cli(tmp_path, "runs", "--json", "--db", dsn).stdout)[0]["status"]
                    == "ended"
                ),
                20,
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=20)
        assert second.returncode == 0
        assert calls.read_text().splitlines() == ["x"]  # the call ran once, across two workers


def test_two_workers_racing_never_drive_one_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run waits for an approval half-way, so its second half may go to either worker:
    a run's events change holder only after the first holder released its lease (or at a
    takeover of it)."""
    monkeypatch.setenv("SLOW_APPROVAL", "1")
    agents = _agents(tmp_path)
    target = f"{agents}/slow.py:chart"
    n = int(os.environ.get("STATECHART_RACE_RUNS", "1000"))
    with fresh_database() as dsn:
        run_cli(
            tmp_path,
            "submit",
            target,
            "--db",
            dsn,
            "--run-id",
            "r0",
            environ=cli_env(SLOW_APPROVAL="1"),
        )
        with psycopg.connect(dsn, autocommit=True) as db:  # n - 1 more like the first, fast
            db.execute(
                "INSERT INTO runs (run_id, chart, status, state, seq, snapshot, chart_version, "
                "ready) SELECT 'r' || i, chart, status, state, seq, "
                "jsonb_set(snapshot, '{run_id}', to_jsonb('r' || i)), chart_version, TRUE "
                "FROM runs, generate_series(1, %s) AS i WHERE run_id = 'r0'",
                (n - 1,),
            )
            db.execute(
                "INSERT INTO bases (run_id, seq, snapshot) SELECT run_id, seq, snapshot "
                "FROM runs WHERE run_id <> 'r0'"
            )
        workers = [
            _worker(
                tmp_path,
                dsn,
                agents,
                "--concurrency",
                "8",
                "--lease-ttl",
                "5",
                "--quiet",
                SLOW_APPROVAL="1",
            )
            for _ in range(2)
        ]
        try:
            anyio.run(_approve_all, dsn, target, n, backend="asyncio")
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                w.communicate(timeout=30)
        with psycopg.connect(dsn) as db:
            rows = db.execute(
                "SELECT r.run_id, e.id & 4294967295, e.holder FROM runs r "
                "JOIN event_rows e ON e.id >> 32 = r.num ORDER BY r.num, e.id"
            ).fetchall()
            logged: dict[str, list[Held]] = {}
            for run_id, *held in db.execute(
                "SELECT run_id, holder, acquired, seq, took_over_from, released, clean "
                "FROM leases ORDER BY n"
            ):
                logged.setdefault(run_id, []).append(Held(*held))
            states = set(db.execute("SELECT DISTINCT state FROM runs").fetchall())
        assert states == {("done",)}
        by_run: dict[str, list[tuple[int, str | None]]] = {}
        for run_id, seq, holder in rows:
            by_run.setdefault(run_id, []).append((seq, holder))
        assert len(by_run) == n
        writers = {h for hs in by_run.values() for _, h in hs if h is not None}
        assert len({w.split("#")[0] for w in writers}) == 2  # both workers drove runs
        changed = 0
        for run_id, seen in by_run.items():
            writes = [(q, h) for q, h in seen if h is not None]  # None: the person's approval
            assert len(seen) - len(writes) == 1
            assert one_at_a_time(logged[run_id], writes) is None, (run_id, seen)
            workers = [h.split("#")[0] for _, h in writes]
            changed += any(a != b for a, b in itertools.pairwise(workers))
        assert changed > 0  # some runs' halves went to different workers


async def _approve_all(dsn: str, target: str, n: int) -> None:
    """Approve every run as it comes to wait, until all n have ended."""
    from statechart import approve
    from statechart.io.loading import load_chart
    from statechart.store.postgres import PostgresStore

    chart, _ = load_chart(target)
    store = PostgresStore(dsn)
    try:
        with anyio.fail_after(240):
            while True:
                listed = await store.summaries()
                if sum(s.status == "ended" for s in listed) == n:
                    return
                for s in listed:
                    if s.status == "waiting":
                        await approve(chart, s.run_id, store=store, by="racer")
                await anyio.sleep(0.05)
    finally:
        await store.close()


def test_workers_export_spans_from_the_otel_variables(tmp_path: Path) -> None:
    """Only OTEL_EXPORTER_OTLP_ENDPOINT set: submit, a worker driving to the approval,
    `approve --no-resume`, and a second worker finishing it are one trace, every span
    parented, one span per stored transition."""
    from tests.support.otlp_receiver import Receiver

    agents = _agents(tmp_path)
    with Receiver() as rx, fresh_database() as dsn:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint, "SLOW_APPROVAL": "1"}
        target = f"{agents}/slow.py:chart"
        run_cli(tmp_path, "submit", target, "--db", dsn, "--run-id", "t1", environ=cli_env(**otel))

        def status() -> str:
            shown = run_cli(tmp_path, "show", "t1", "--json", "--db", dsn).stdout
            return str(json.loads(shown)["run"]["status"])

        for step, want in (("drive", "waiting"), ("finish", "ended")):
            worker = _worker(tmp_path, dsn, agents, "--lease-ttl", "30", **otel)
            try:
                _wait(lambda want=want: status() == want, 30)  # type: ignore[misc]
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.communicate(timeout=30)
            assert worker.returncode == 0
            if step == "drive":
                run_cli(
                    tmp_path, "approve", "t1", "--no-resume", "--db", dsn, environ=cli_env(**otel)
                )
        spans = rx.snapshot()[0]
        events = json.loads(run_cli(tmp_path, "show", "t1", "--json", "--db", dsn).stdout)["events"]
    assert len({s.trace_id for s in spans}) == 1  # one trace, across four processes
    ids = {s.span_id for s in spans}
    assert [s.name for s in spans if s.parent_span_id and s.parent_span_id not in ids] == []
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "create_agent slow"
    stepped = sorted(
        s.attributes["statechart.step"] for s in spans if "statechart.step" in s.attributes
    )
    assert stepped == [e["seq"] for e in events]  # one span per stored transition
    assert sum(s.name == "invoke_agent slow" for s in spans) == 2  # one per worker's drive


def test_a_blocked_run_is_shown_blocked_and_unblock_readies_it(tmp_path: Path) -> None:
    agents = _agents(tmp_path)
    with fresh_database() as dsn:
        run_cli(tmp_path, "submit", f"{agents}/slow.py:chart", "--db", dsn, "--run-id", "b1")
        (agents / "slow.py").write_text("raise RuntimeError('deploy broke it')\n")
        worker = _worker(
            tmp_path, dsn, agents, "--poll", "0.05", "--max-tries", "2", "--backoff", "0.05"
        )
        try:
            _wait(
                lambda: (
                    json.loads(run_cli(tmp_path, "runs", "--json", "--db", dsn).stdout)[0][
                        "blocked"
                    ]
                    is not None
                ),
                30,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.communicate(timeout=30)
        listed = run_cli(tmp_path, "runs", "--db", dsn).stdout
        assert "blocked" in listed and "deploy broke it" in listed
        shown = run_cli(tmp_path, "show", "b1", "--db", dsn).stdout
        assert "blocked after 2 tries: LoadError" in shown and "statechart unblock b1" in shown
        assert json.loads(run_cli(tmp_path, "show", "b1", "--json", "--db", dsn).stdout)[
            "blocked"
        ].startswith("LoadError")
        out = run_cli(tmp_path, "unblock", "b1", "--db", dsn).stdout
        assert "ready for a worker again" in out
        with psycopg.connect(dsn) as db:
            row = db.execute(
                "SELECT blocked, tries, ready, problem FROM runs WHERE run_id = 'b1'"
            ).fetchone()
        assert row == (False, 0, True, None)
        assert run_cli(tmp_path, "unblock", "nope", "--db", dsn, code=1).stderr


def test_submit_refuses_a_chart_file_function_a_worker_would_not_call(tmp_path: Path) -> None:
    agents = _agents(tmp_path)
    with (agents / "slow.py").open("a") as f:
        f.write("\n\ndef build():\n    return chart\n")
    with fresh_database() as dsn:
        done = run_cli(tmp_path, "submit", f"{agents}/slow.py:build", "--db", dsn, code=1)
        assert "names a function; a worker loads only Chart objects" in done.stderr
        with psycopg.connect(dsn) as db:  # nothing stored: not even the schema
            assert db.execute("SELECT to_regclass('runs')").fetchone() == (None,)


def test_reject_on_postgres_says_a_worker_continues_the_run(tmp_path: Path) -> None:
    """On PostgreSQL a rejection queues the run for the workers: the command says so, not
    `statechart resume` (which a worker would race)."""
    agents = _agents(tmp_path)
    with fresh_database() as dsn:
        env = cli_env(SLOW_APPROVAL="1")
        run_cli(
            tmp_path,
            "run",
            f"{agents}/slow.py:chart",
            "--run-id",
            "r-1",
            "--db",
            dsn,
            code=3,
            environ=env,
        )
        done = run_cli(tmp_path, "reject", "r-1", "--reason", "no", "--db", dsn, environ=env)
        assert (
            done.stdout.strip()
            == "rejected by cli; now running in 'work.think'; a worker continues it"
        )
