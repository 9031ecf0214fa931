"""The worker soak: 4 `statechart worker` processes drive refund-desk runs on one PostgreSQL
while a killer SIGKILLs a random worker every 0.2-2 s and restarts it, and a separate
process approves each refund as it comes to wait.

Half the runs are driven with the same-host instant takeover on (a restarted worker takes
a dead worker's runs at once), half with it off (they wait out the 2 s lease). Then every
run must have ended in `done`, the bank must hold exactly one refund per order, every run's
events must fold to its stored snapshot, and a run's events may change lease holder only
after a release or at a takeover. Prints the figures; exits non-zero on any failure.

    python -m tests.support.soak --runs 1000        (make soak)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from statechart.store.queue import Held

ROOT = Path(__file__).resolve().parents[2]
TARGET = f"{ROOT}/agents/refund_desk.py:chart"
WORKERS = 4
TTL = 2.0


def _env(bank: Path, dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, "PYTHONPATH": str(ROOT), "REFUND_DESK_BANK": str(bank), "STATECHART_DB": dsn}


def _worker(env: dict[str, str], instant: bool, log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "statechart.cli",
            "worker",
            "--agents",
            str(ROOT / "agents"),
            "--lease-ttl",
            str(TTL),
            "--concurrency",
            "8",
            "--quiet",
            "--instant-takeover" if instant else "--no-instant-takeover",
        ],
        env=env,
        stdout=log,
        stderr=log,
    )


async def _submit(dsn: str, orders: list[str]) -> None:
    from statechart import start
    from statechart.io.loading import chart_source, load_chart
    from statechart.store.postgres import PostgresStore
    from statechart.store.queue import RunQueue

    chart, module = load_chart(TARGET)
    store = PostgresStore(dsn)
    try:
        await store.save_chart(chart.version, chart.describe(), chart_source(TARGET))
        queue = RunQueue(store)
        for order in orders:
            await start(
                chart,
                store=store,
                model=module.demo_model(),
                context={"order_id": order},
                run_id=f"run-{order}",
            )
            await queue.enqueue(f"run-{order}")
    finally:
        await store.close()


def _ended(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as db:
        found = db.execute("SELECT count(*) FROM runs WHERE status = 'ended'").fetchone()
    return int(found[0]) if found else 0


def _holding(dsn: str) -> set[int]:
    """Pids of the processes that hold a live lease now (from their lease identity)."""
    import psycopg

    with psycopg.connect(dsn) as db:
        rows = db.execute(
            "SELECT lease_process FROM runs WHERE lease_holder IS NOT NULL "
            "AND lease_expires > extract(epoch FROM clock_timestamp())"
        ).fetchall()
    return {int(p.split("/")[2]) for (p,) in rows if p and p.count("/") == 3}


def phase(dsn: str, env: dict[str, str], orders: list[str], instant: bool, log: Any) -> int:
    """Submit `orders`, drive them with killed and restarted workers until all end; the
    number of kills."""
    anyio.run(_submit, dsn, orders, backend="asyncio")
    workers = [_worker(env, instant, log) for _ in range(WORKERS)]
    kills = 0
    before = _ended(dsn)  # the runs of earlier phases
    deadline = time.monotonic() + 120 + len(orders) * 2.0
    next_kill = time.monotonic() + random.uniform(0.2, 2.0)
    try:
        while True:
            ended = _ended(dsn) - before
            if ended >= len(orders):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"soak: only {ended} of {len(orders)} runs ended")
            i = -1
            if kills == 0:  # the first kill of a phase hits a worker that holds a run
                holding = _holding(dsn)
                i = next((j for j, w in enumerate(workers) if w.pid in holding), -1)
            elif time.monotonic() >= next_kill:
                i = random.randrange(WORKERS)
            if i >= 0:
                workers[i].send_signal(signal.SIGKILL)
                workers[i].wait()
                kills += 1
                workers[i] = _worker(env, instant, log)
                next_kill = time.monotonic() + random.uniform(0.2, 2.0)
            time.sleep(0.05)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
    return kills


async def _approver(dsn: str) -> None:
    """Approve every run that waits, as it comes, until killed."""
    from statechart import approve
    from statechart.errors import StatechartError
    from statechart.io.loading import load_chart
    from statechart.store.postgres import PostgresStore

    chart, _ = load_chart(TARGET)
    store = PostgresStore(dsn)
    while True:
        for s in await store.summaries(status="waiting"):
            try:
                await approve(chart, s.run_id, store=store, by="soak-approver")
            except StatechartError:
                continue  # decided meanwhile (cannot happen with one approver): look again
        await anyio.sleep(0.05)


def one_at_a_time(leases: Sequence[Held], writes: Sequence[tuple[int, str]]) -> str | None:
    """What breaks "one driver at a time" in a run's lease log (in the order taken) and its
    events' (seq, writer) (a person's events left out), or None. Each lease follows a clean
    release of the one before or takes that one over (an unclean release or a death), and
    each holder wrote only seqs after the one its lease started from and up to the one the
    next lease started from: a lease lost before it wrote anything is fine."""
    for before, after in itertools.pairwise(leases):
        if before.clean is not True and after.took_over_from != before.holder:
            return f"{after.holder} took the lease while {before.holder} held it"
        if before.clean is True and after.took_over_from is not None:
            return f"{after.holder} took over {after.took_over_from} after a clean release"
    span = {
        h.holder: (h.seq, leases[i + 1].seq if i + 1 < len(leases) else None)
        for i, h in enumerate(leases)
    }
    for seq, holder in writes:
        if holder not in span:
            return f"event {seq} was written by {holder}, which holds no lease"
        start, end = span[holder]
        if seq <= start or (end is not None and seq > end):
            return f"event {seq} by {holder} is outside its lease (seqs {start} to {end})"
    return None


async def _check(dsn: str, n: int, second: set[str]) -> dict[str, Any]:
    from statechart import load_run
    from statechart.engine import compiled
    from statechart.engine.replay import replay
    from statechart.io.loading import load_chart
    from statechart.store.postgres import PostgresStore
    from statechart.store.queue import RunQueue

    chart, _ = load_chart(TARGET)
    store = PostgresStore(dsn)
    queue = RunQueue(store)
    problems: list[str] = []
    takeovers = [0, 0]
    holder_changes = 0
    try:
        listed = await store.summaries()
        if len(listed) != n:
            problems.append(f"{len(listed)} runs stored, {n} submitted")
        for s in listed:
            if (s.status, s.state) != ("ended", "done"):
                problems.append(f"{s.run_id} is {s.status} in {s.state}")
            loaded = await store.load(s.run_id)
            base = await store.base(s.run_id)
            folded = replay(compiled(chart), base, await store.events(s.run_id, after=base.seq))
            if loaded.tail or folded != loaded.snapshot:
                problems.append(f"{s.run_id}: its events do not fold to its snapshot")
            if folded != await load_run(chart, s.run_id, store=store):
                problems.append(f"{s.run_id}: load_run differs from the fold")
            leases = await queue.leases(s.run_id)
            takeovers[s.run_id in second] += sum(h.took_over_from is not None for h in leases)
            writes = [(q, h) for q, h in await queue.holders(s.run_id) if h is not None]
            holder_changes += sum(a[1] != b[1] for a, b in itertools.pairwise(writes))
            problem = one_at_a_time(leases, writes)
            if problem is not None:
                problems.append(f"{s.run_id}: {problem}")
    finally:
        await store.close()
    return {
        "problems": problems,
        "takeovers": takeovers,
        "holder_changes": holder_changes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument(
        "--admin-dsn",
        default=os.environ.get("STATECHART_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test"),
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("command", nargs="?", default="soak", choices=("soak", "approve"))
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    if args.command == "approve":
        anyio.run(_approver, args.dsn, backend="asyncio")
        return 0
    import psycopg

    seed = args.seed if args.seed is not None else random.randrange(2**32)
    random.seed(seed)
    name = f"statechart_soak_{os.getpid()}"
    admin = psycopg.connect(args.admin_dsn, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    dsn = args.admin_dsn.rsplit("/", 1)[0] + f"/{name}"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        bank = Path(tmp) / "bank.db"
        env = _env(bank, dsn)
        log = open(Path(tmp) / "workers.log", "ab")  # noqa: SIM115
        approver = subprocess.Popen(
            [sys.executable, "-m", "tests.support.soak", "approve", "--dsn", dsn],
            env=env,
            cwd=ROOT,
        )
        try:
            orders = [f"S-{i:05d}" for i in range(args.runs)]
            half = args.runs // 2
            kills_on = phase(dsn, env, orders[:half], True, log)
            kills_off = phase(dsn, env, orders[half:], False, log)
        finally:
            approver.kill()
            approver.wait()
            log.close()
        elapsed = time.monotonic() - started
        second = {f"run-{o}" for o in orders[half:]}
        found = anyio.run(_check, dsn, args.runs, second, backend="asyncio")
        with sqlite3.connect(bank) as db:
            per_order = dict(
                db.execute("SELECT order_id, count(*) FROM refunds GROUP BY order_id").fetchall()
            )
    admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    doubles = sum(1 for c in per_order.values() if c > 1)
    missing = sum(1 for o in orders if per_order.get(o, 0) == 0)
    figures = {
        "runs": args.runs,
        "workers": WORKERS,
        "lease_ttl_s": TTL,
        "kills": kills_on + kills_off,
        "kills_instant_takeover": kills_on,
        "kills_lease_expiry": kills_off,
        "takeovers_instant_takeover": found["takeovers"][0],
        "takeovers_lease_expiry": found["takeovers"][1],
        "holder_changes": found["holder_changes"],
        "double_refunds": doubles,
        "runs_without_refund": missing,
        "problems": len(found["problems"]),
        "seconds": round(elapsed, 1),
        "seed": seed,
    }
    print(json.dumps(figures))
    for problem in found["problems"][:20]:
        print("problem:", problem, file=sys.stderr)
    return 0 if not found["problems"] and doubles == 0 and missing == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
