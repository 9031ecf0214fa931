"""The run inspector's pages with many stored runs (issue #19): server-side time to serve the
runs page (first page, filtered by status, searched by id) and one run's page, with N runs
of S transitions each stored in SQLite and in PostgreSQL.

One real run of the scaling chart (`benchmarks/agents/scaling.py`, S transitions, each
tool result ~500 characters) is driven and stored; its rows are then copied in SQL to make
the other N - 1 runs (the same shape a driver writes, made in seconds, not hours). Each
page is requested through the app in this process (httpx's ASGI transport: no network),
`--repeats` times, after one warm-up; the median is judged against the targets (runs page
≤ 300 ms, run page ≤ 500 ms).

    python benchmarks/ui.py                         # 10,000 runs of 200 steps: minutes
    python benchmarks/ui.py --runs 200 --steps 20   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
AGENT = f"{HERE}/agents/scaling.py:chart"
TARGETS_MS = {"runs": 300.0, "run": 500.0}
MASK = (1 << 32) - 1


async def first_run(store: Any, steps: int) -> str:
    """Drive one real run of `steps` transitions; its id."""
    import statechart as sc
    from statechart.io.loading import chart_source, load_chart

    chart, module = load_chart(AGENT)
    await store.save_chart(chart.version, chart.describe(), chart_source(AGENT))
    model = module.demo_model()
    run = await sc.start(chart, store=store, model=model, run_id="r0")
    end = await sc.run_to_end(chart, run, store=store, model=model)
    assert end.state == "done" and end.seq == steps, (end.state, end.seq)
    return run.run_id


def copy_sqlite(path: Path, runs: int) -> None:
    """N - 1 more runs like r0, in SQL."""
    import sqlite3

    from statechart.store.rows import COLUMNS

    rest = ", ".join(c.strip() for c in COLUMNS.split(",")[1:])
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?) "
            "INSERT INTO runs (run_id, chart, status, state, seq, snapshot) "
            "SELECT 'r' || i, chart, status, state, seq, json_set(snapshot, '$.run_id', 'r' || i) "
            "FROM runs, s WHERE run_id = 'r0'",
            (runs - 1,),
        )
        (num0,) = db.execute("SELECT num FROM runs WHERE run_id = 'r0'").fetchone()
        db.execute(
            f"INSERT INTO event_rows (id, {rest}) SELECT (r.num << 32) | (e.id & {MASK}), {rest} "
            f"FROM event_rows e, runs r WHERE e.id >> 32 = ? AND r.run_id <> 'r0'",
            (num0,),
        )
        db.execute(
            "INSERT INTO bases (run_id, seq, snapshot) SELECT r.run_id, b.seq, "
            "json_set(b.snapshot, '$.run_id', r.run_id) FROM bases b, runs r "
            "WHERE b.run_id = 'r0' AND r.run_id <> 'r0'"
        )
    db.close()


def copy_postgres(dsn: str, runs: int) -> None:
    from statechart.store.rows import COLUMNS

    rest = ", ".join([*(c.strip() for c in COLUMNS.split(",")[1:]), "holder"])
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(
            "INSERT INTO runs (run_id, chart, status, state, seq, snapshot, chart_version) "
            "SELECT 'r' || i, chart, status, state, seq, "
            "jsonb_set(snapshot, '{run_id}', to_jsonb('r' || i)), chart_version "
            "FROM runs, generate_series(1, %s) AS i WHERE run_id = 'r0'",
            (runs - 1,),
        )
        (num0,) = db.execute("SELECT num FROM runs WHERE run_id = 'r0'").fetchone()
        db.execute(
            f"INSERT INTO event_rows (id, {rest}) SELECT (r.num << 32) | (e.id & {MASK}), {rest} "
            f"FROM event_rows e, runs r WHERE e.id >> 32 = %s AND r.run_id <> 'r0'",
            (num0,),
        )
        db.execute(
            "INSERT INTO bases (run_id, seq, snapshot) SELECT r.run_id, b.seq, "
            "jsonb_set(b.snapshot, '{run_id}', to_jsonb(r.run_id)) FROM bases b, runs r "
            "WHERE b.run_id = 'r0' AND r.run_id <> 'r0'"
        )
        db.execute("ANALYZE")


async def serve_times(store: Any, runs: int, repeats: int) -> dict[str, Any]:
    """Milliseconds per page, through the app in this process."""
    import httpx

    from statechart.ui import create_app

    app = create_app(store, token="t", agents=HERE / "agents")
    pages = {
        "runs": "/",
        "runs_by_status": "/?status=ended&chart=scaling",
        "runs_searched": "/?q=r12",
        "runs_last_page": f"/?page={max(1, -(-runs // 50))}",
        "run": f"/runs/r{runs // 2}",
    }
    out: dict[str, Any] = {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        for name, url in pages.items():
            times = []
            for i in range(repeats + 1):
                t0 = time.perf_counter()
                answer = await client.get(url)
                elapsed = (time.perf_counter() - t0) * 1e3
                assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
                if i:
                    times.append(elapsed)
            if name == "run":
                assert "mermaid" in answer.text and answer.text.count('class="event"') > 1
            out[name] = {
                "median_ms": round(statistics.median(times), 1),
                "min_ms": round(min(times), 1),
                "max_ms": round(max(times), 1),
                "bytes": len(answer.content),
            }
    return out


def sqlite_case(tmp: Path, runs: int, steps: int, repeats: int) -> dict[str, Any]:
    from statechart import SQLiteStore

    path = tmp / "ui.db"
    store = SQLiteStore(path)
    anyio.run(first_run, store, steps)
    store.close()
    t0 = time.perf_counter()
    copy_sqlite(path, runs)
    made = time.perf_counter() - t0
    store = SQLiteStore(path)
    try:
        times = anyio.run(serve_times, store, runs, repeats)
    finally:
        store.close()
    return {"store_mb": round(path.stat().st_size / 2**20, 1), "copy_s": round(made, 1), **times}


def postgres_case(admin: str, runs: int, steps: int, repeats: int) -> dict[str, Any]:
    from statechart.store.postgres import PostgresStore

    name = f"statechart_ui_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    dsn = admin.rsplit("/", 1)[0] + f"/{name}"
    try:

        async def one() -> None:
            store = PostgresStore(dsn)
            await first_run(store, steps)
            await store.close()

        anyio.run(one, backend="asyncio")
        t0 = time.perf_counter()
        copy_postgres(dsn, runs)
        made = time.perf_counter() - t0

        async def timed() -> dict[str, Any]:
            store = PostgresStore(dsn)
            try:
                return await serve_times(store, runs, repeats)
            finally:
                await store.close()

        times = anyio.run(timed, backend="asyncio")
        with psycopg.connect(dsn) as db:
            (size,) = db.execute("SELECT pg_database_size(current_database())").fetchone()
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    return {"store_mb": round(size / 2**20, 1), "copy_s": round(made, 1), **times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--admin-dsn",
        default=os.environ.get("STATECHART_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test"),
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "ui.json")
    args = parser.parse_args()
    os.environ["SCALING_STEPS"] = str(args.steps)
    out: dict[str, Any] = {"runs": args.runs, "steps": args.steps, "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"SQLite: {args.runs} runs of {args.steps} steps", flush=True)
        out["sqlite"] = sqlite_case(Path(tmp), args.runs, args.steps, args.repeats)
        print(json.dumps(out["sqlite"]), flush=True)
    if not args.no_postgres:
        print(f"PostgreSQL: {args.runs} runs of {args.steps} steps", flush=True)
        out["postgres"] = postgres_case(args.admin_dsn, args.runs, args.steps, args.repeats)
        print(json.dumps(out["postgres"]), flush=True)
    verdicts = {}
    for store in ("sqlite", "postgres"):
        for page, found in out.get(store, {}).items():
            if isinstance(found, dict):
                target = TARGETS_MS["run" if page == "run" else "runs"]
                verdicts[f"{store} {page}"] = f"{found['median_ms']} ms (target ≤ {target:g}): " + (
                    "met" if found["median_ms"] <= target else "NOT met"
                )
    out["targets"] = verdicts
    for line in verdicts.values():
        print(line)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
