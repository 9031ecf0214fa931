"""A driver of a three-region desk that a crash test kills: each region charges a bank (a
`keyed` tool writing its own SQLite file), the three charges in flight at once.

    python -m tests.support.parallel_proc RUNS_DB BANK_DB start
    python -m tests.support.parallel_proc RUNS_DB BANK_DB resume RUN_ID

`start` prints the run id before it drives; both print `ended STATE` at the end. Arm a
fail-point with `STATECHART_FAILPOINT` to be killed at it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from pathlib import Path

import anyio

from statechart import Chart, LeaseHeldError, SQLiteStore, resume, run_to_end, start, tool
from tests.support.parallel import desk, policy

TTL = 0.3
NAMES = ("web", "papers", "people")


class Bank:
    """A bank in its own file: every attempt is logged; a key is applied once."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS attempts (key TEXT, query TEXT)")
        self.db.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT PRIMARY KEY, query TEXT)")
        self.lock = threading.Lock()

    def charge(self, key: str, query: str) -> None:
        with self.lock:
            self.db.execute("INSERT INTO attempts VALUES (?, ?)", (key, query))
            self.db.execute("INSERT OR IGNORE INTO applied VALUES (?, ?)", (key, query))

    def rows(self, table: str) -> list[tuple[str, str]]:
        return [tuple(r) for r in self.db.execute(f"SELECT key, query FROM {table}")]


def chart_for(bank: Bank | None) -> Chart:
    together = threading.Barrier(len(NAMES), timeout=2)

    @tool(retry="keyed", name="lookup")
    def charge(query: str, idempotency_key: str) -> str:
        """Buy the facts about a query."""
        with contextlib.suppress(threading.BrokenBarrierError):  # a resumed one runs alone
            together.wait()  # the three calls are in flight at once
        assert bank is not None
        bank.charge(idempotency_key, query)
        return f"bought {query}"

    return desk(names=NAMES, tools=(charge,))


async def main(runs: str, bank_path: str, mode: str, run_id: str = "") -> None:
    chart = chart_for(Bank(Path(bank_path)))
    store, model = SQLiteStore(runs), policy(lookups=1)
    if mode == "start":
        run = await start(chart, store=store, model=model)
        print(run.run_id, flush=True)
        end = await run_to_end(chart, run, store=store, model=model, lease_ttl=TTL)
    else:
        deadline = time.monotonic() + 10
        while True:
            try:
                end = await resume(chart, run_id, store=store, model=model, lease_ttl=TTL)
                break
            except LeaseHeldError:  # the killed driver's lease has not expired yet
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(TTL / 3)
    print("ended", end.state, flush=True)
    store.close()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
