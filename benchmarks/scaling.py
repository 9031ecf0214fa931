"""Many workers on one PostgreSQL, side by side with LangGraph on PostgreSQL and statechart on
SQLite, in one run (issue #18). Needs the local server (`--admin-dsn`) and the bench extra.

1. One durable run of the 200-step workload of benchmarks/run_all.py (a model calls a
   ~500-character tool, then finishes; scripted, so only framework and store cost count):
   µs per transition for statechart on PostgreSQL, statechart on SQLite and LangGraph with
   `PostgresSaver` (`durability="sync"`), interleaved round by round; ratio LangGraph/ours;
   and the floor of any design that commits once per transition (a bare autocommit INSERT of
   the same event row, issue #27),
   each also with `synchronous_commit=off` for the session.
2. CPU-bound workers: R runs of 20 transitions (no model latency) drained by 1, 2 and 4
   `statechart worker` processes: completed runs per second, µs per transition (wall), and
   the CPU the workers and the PostgreSQL server each used (from /proc), so the database's
   share of the 2 cores shows.
3. Model latency 20 ms: 10,000 runs across 4 workers; the workers' CPU per transition
   (summed over the processes) against the CPU per transition of one run at a time on
   PostgreSQL in this process.

    python benchmarks/scaling.py            # full, several minutes; writes results/scaling.json
    python benchmarks/scaling.py --quick    # smoke run, well under a minute
    python benchmarks/scaling.py --quick --no-langgraph    # without the bench extra (the test)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
from durable import _Lean, chart_for, make_policy
from side_common import HERE, ROOT, machine, r, spread, versions
from side_statechart import statechart_once

import statechart as sc
from statechart.engine import compiled
from statechart.io.loading import chart_source, load_chart
from statechart.store.postgres import _COLUMNS, _JSONB, _VALUES, PostgresStore

AGENT = f"{HERE}/agents/scaling.py:chart"
DEFAULT_OUT = HERE / "results" / "scaling.json"
FULL = {"single": 5, "cpu_runs": 600, "latency_runs": 10_000, "latency_single": 20}
QUICK = {"single": 2, "cpu_runs": 80, "latency_runs": 400, "latency_single": 5}
TICK = os.sysconf("SC_CLK_TCK")


@contextmanager
def database(admin: str) -> Iterator[str]:
    name = f"statechart_scaling_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


TARGET_FLOOR = 1.5
"""Issue #27: a durable transition on PostgreSQL at most 1.5x the bare INSERT of its row."""


# -- 1. one run, three contenders -----------------------------------------------------------


async def statechart_postgres(dsn: str, steps: int) -> float:
    store = PostgresStore(dsn)
    chart, model = chart_for(steps), _Lean(make_policy(steps))
    compiled(chart)
    await store.summaries()  # the pool open and the schema migrated outside the timed span
    t0 = time.perf_counter()
    run = await sc.start(chart, store=store, model=model)
    end = await sc.run_to_end(chart, run, store=store, model=model)
    elapsed = time.perf_counter() - t0
    await store.close()
    assert end.state == "done" and end.seq == steps, (end.state, end.seq)
    return elapsed / steps * 1e6


def langgraph_postgres(dsn: str, steps: int) -> float:
    from langgraph.checkpoint.postgres import PostgresSaver
    from side_langgraph import ScriptedChat, config, hand_written, inputs, node_runs

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        graph = hand_written(ScriptedChat(), saver)
        t0 = time.perf_counter()
        out = graph.invoke(inputs(steps), config(steps, uuid.uuid4().hex), durability="sync")
        elapsed = time.perf_counter() - t0
    n = node_runs(out)
    return elapsed / n * 1e6


async def bare_commit(dsn: str) -> float:
    """µs of the floor of a durable transition on this server (issue #27's judge): one
    autocommit INSERT of the same event row, for each row of the last statechart run in
    this database, into a copy of `event_rows` (its columns and keys), with no fence and
    no engine, on one psycopg async connection."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        await c.execute("DROP TABLE IF EXISTS floor_rows")
        await c.execute("CREATE TABLE floor_rows (LIKE event_rows INCLUDING ALL)")
        names = ", ".join(_COLUMNS)
        read = ", ".join(f"{n}::text" if n in _JSONB else n for n in _COLUMNS)
        cur = await c.execute(
            f"SELECT {read} FROM event_rows WHERE id >> 32 = (SELECT max(num) FROM runs) "
            "ORDER BY id"
        )
        rows = await cur.fetchall()
        insert = f"INSERT INTO floor_rows ({names}) VALUES ({_VALUES})"
        t0 = time.perf_counter()
        for row in rows:
            await c.execute(insert, row)
        elapsed = time.perf_counter() - t0
        await c.execute("DROP TABLE floor_rows")
        return elapsed / len(rows) * 1e6


def single(
    dsn: str, repeats: int, workdir: Path, steps: int = 200, langgraph: bool = True
) -> dict[str, Any]:
    """Each contender once per round, rounds interleaved; on the server's settings and with
    `synchronous_commit=off` for the session (both contenders alike)."""
    relaxed = dsn + "?options=-c%20synchronous_commit%3Doff"
    names = ("statechart_postgres", "bare_commit") + (("langgraph_postgres",) if langgraph else ())
    rounds: dict[str, list[float]] = {"statechart_sqlite": []}
    for name in names:
        rounds[name] = []
        rounds[name + "_async_commit"] = []
    for i in range(repeats):
        seconds, made = anyio.run(statechart_once, "process", steps, workdir / f"s{i}.db")
        rounds["statechart_sqlite"].append(seconds / made * 1e6)
        for where, suffix in ((dsn, ""), (relaxed, "_async_commit")):
            rounds["statechart_postgres" + suffix].append(
                anyio.run(statechart_postgres, where, steps, backend="asyncio")
            )
            if langgraph:
                rounds["langgraph_postgres" + suffix].append(langgraph_postgres(where, steps))
            rounds["bare_commit" + suffix].append(anyio.run(bare_commit, where, backend="asyncio"))
        print(f"  round {i + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rounds.items()))

    def ratio(a: str, b: str) -> dict[str, Any]:
        return spread([x / y for x, y in zip(rounds[a], rounds[b], strict=True)], 2)

    out: dict[str, Any] = {
        "steps": steps,
        "us_per_transition": {k: spread(v, 1) for k, v in rounds.items()},
        "statechart_postgres_over_bare_commit": ratio("statechart_postgres", "bare_commit"),
    }
    judged = out["statechart_postgres_over_bare_commit"]["median"]
    out["target_commit_floor"] = {"wanted": TARGET_FLOOR, "met": judged <= TARGET_FLOOR}
    if not langgraph:
        return out
    return out | {
        "langgraph_over_statechart_postgres": ratio("langgraph_postgres", "statechart_postgres"),
        "langgraph_over_bare_commit": ratio("langgraph_postgres", "bare_commit"),
        "langgraph_over_statechart_postgres_async_commit": ratio(
            "langgraph_postgres_async_commit", "statechart_postgres_async_commit"
        ),
    }


# -- 2 and 3. worker processes ----------------------------------------------------------------


def cpu_ticks(pids: list[int]) -> int:
    """utime + stime of these processes, in clock ticks (0 for one that is gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def postgres_pids() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


async def submit(dsn: str, runs: int) -> None:
    """Store `runs` runs of the scaling chart, not yet ready (made ready all at once)."""
    chart, module = load_chart(AGENT)
    store = PostgresStore(dsn)
    await store.save_chart(chart.version, chart.describe(), chart_source(AGENT))
    for _ in range(runs):
        await sc.start(chart, store=store, model=module.demo_model())
    await store.close()


def drain(
    dsn: str, runs: int, workers: int, concurrency: int, env: dict[str, str], pool: int = 8
) -> dict[str, Any]:
    """Start the workers, wait until they listen, make every run ready, time until all end."""
    anyio.run(submit, dsn, runs, backend="asyncio")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "statechart.cli",
                "worker",
                "--db",
                dsn,
                "--agents",
                str(HERE / "agents"),
                "--concurrency",
                str(concurrency),
                "--pool-size",
                str(min(concurrency, pool)),
                "--lease-ttl",
                "30",
                "--quiet",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        with psycopg.connect(dsn, autocommit=True) as db:
            while (
                db.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '%-listen'"
                ).fetchone()[0]
                < workers
            ):
                time.sleep(0.05)
            pg = postgres_pids()
            mine = [p.pid for p in procs]
            before = (cpu_ticks(mine), cpu_ticks(pg))
            t0 = time.perf_counter()
            db.execute(
                "WITH u AS (UPDATE runs SET ready = TRUE RETURNING 1) "
                "SELECT pg_notify('statechart_runs', '') FROM u LIMIT 1"
            )
            while (
                db.execute("SELECT count(*) FROM runs WHERE status = 'ended'").fetchone()[0] < runs
            ):
                time.sleep(0.02)
            wall = time.perf_counter() - t0
            after = (cpu_ticks(mine), cpu_ticks(postgres_pids()))
            transitions = db.execute("SELECT count(*) FROM event_rows").fetchone()[0]
            done = db.execute("SELECT count(*) FROM runs WHERE state = 'done'").fetchone()[0]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
    workers_cpu = (after[0] - before[0]) / TICK
    db_cpu = (after[1] - before[1]) / TICK
    return {
        "workers": workers,
        "runs": runs,
        "runs_done": done,
        "transitions": transitions,
        "seconds": r(wall, 3),
        "runs_per_s": r(runs / wall, 1),
        "us_per_transition_wall": r(wall / transitions * 1e6, 1),
        "workers_cpu_s": r(workers_cpu, 2),
        "database_cpu_s": r(db_cpu, 2),
        "database_cpu_share": r(db_cpu / (db_cpu + workers_cpu), 3)
        if db_cpu + workers_cpu
        else None,
        "workers_cpu_us_per_transition": r(workers_cpu / transitions * 1e6, 1),
        "cores_busy": r((workers_cpu + db_cpu) / wall, 2),
    }


async def one_at_a_time(dsn: str, runs: int) -> float:
    """CPU µs per transition of runs driven one after another in this process."""
    chart, module = load_chart(AGENT)
    store = PostgresStore(dsn)
    await store.summaries()
    model = module.demo_model()
    made = 0
    c0 = time.process_time()
    for _ in range(runs):
        run = await sc.start(chart, store=store, model=model)
        end = await sc.run_to_end(chart, run, store=store, model=model)
        assert end.state == "done"
        made += end.seq
    cpu = time.process_time() - c0
    await store.close()
    return cpu / made * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--admin-dsn",
        default=os.environ.get("STATECHART_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test"),
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--no-langgraph", action="store_true", help="leave LangGraph out (no bench extra)"
    )
    args = parser.parse_args()
    size = QUICK if args.quick else FULL
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"PYTHONPATH": str(ROOT), "SCALING_STEPS": "20"}
    out: dict[str, Any] = {"machine": machine(), "versions": versions(), "quick": args.quick}
    with tempfile.TemporaryDirectory() as tmp, database(args.admin_dsn) as dsn:
        print("1. one run of 200 transitions")
        out["single"] = single(dsn, size["single"], Path(tmp), langgraph=not args.no_langgraph)
    out["cpu_bound"] = []
    for workers in (1, 2, 4):
        with database(args.admin_dsn) as dsn:
            print(f"2. CPU-bound: {size['cpu_runs']} runs, {workers} worker(s)")
            out["cpu_bound"].append(drain(dsn, size["cpu_runs"], workers, 8, env))
            print("  ", out["cpu_bound"][-1])
    base = out["cpu_bound"][0]["runs_per_s"]
    out["cpu_bound_speedup"] = [r(x["runs_per_s"] / base, 2) for x in out["cpu_bound"]]
    os.environ["SCALING_LATENCY"] = "0.02"
    with database(args.admin_dsn) as dsn:
        print(f"3. latency 20 ms: one at a time, then {size['latency_runs']} runs on 4 workers")
        single_cpu = anyio.run(one_at_a_time, dsn, size["latency_single"], backend="asyncio")
    with database(args.admin_dsn) as dsn:
        many = drain(dsn, size["latency_runs"], 4, 100, env | {"SCALING_LATENCY": "0.02"})
    out["latency"] = {
        "single_run_cpu_us_per_transition": r(single_cpu, 1),
        "workers": many,
        "workers_over_single_cpu": r(many["workers_cpu_us_per_transition"] / single_cpu, 3),
        "all_ended": many["runs_done"] == many["runs"],
    }
    print(json.dumps({k: v for k, v in out.items() if k not in ("machine", "versions")}, indent=1))
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
