"""Rows written by statechart 0.1 (`tests/support/stored_v0_1.py`: an SQLite file and a
PostgreSQL dump of the same runs) read back as 0.1 read them, replay to their snapshots,
and the runs left open go on: the waiting run is approved and finished, the fork of a run
approved in 0.1 finishes with the same idempotency key, the run whose driver died
mid-call is taken over, the fork with a call in doubt settles it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from statechart import SQLiteStore, approve, resume, to_dict
from statechart.engine import compiled, replay
from tests.support import stored_v0_1 as old


def dumped(record: Any) -> Any:
    """A record as JSON values (what the fixtures hold), without the fields records gained
    since, at their defaults (`old.added_defaults`)."""
    return old.without_added(to_dict(record))


pytestmark = pytest.mark.anyio

DATA = Path(__file__).parent / "data"


async def read_as_written(store: Any, seen: dict[str, Any]) -> None:
    """Every run reads back exactly as 0.1 read it, and its events replay to its snapshot."""
    chart = old.chart()
    for run_id in old.RUNS:
        was = seen[run_id]
        loaded = await store.load(run_id)
        assert loaded.tail == ()
        assert dumped(loaded.snapshot) == was["run"], run_id
        events = await store.events(run_id)
        assert [dumped(e) for e in events] == was["events"], run_id
        assert [dumped(i) for i in await store.intents(run_id)] == was["intents"], run_id
        transcripts = {
            visit: [dumped(m) for m in await store.transcript(run_id, int(visit))]
            for visit in was["transcripts"]
        }
        assert transcripts == was["transcripts"], run_id
        assert sorted(await store.fingerprints(run_id)) == was["fingerprints"], run_id
        assert replay(compiled(chart), await store.base(run_id), events) == loaded.snapshot
    assert [dumped(s) for s in await store.summaries()] == seen["summaries"]


def refunded(events: list[Any]) -> list[dict[str, Any]]:
    """The results of the refund calls that ran."""
    return [
        json.loads(e.result) for e in events if e.call and e.call.name == "refund" and e.fingerprint
    ]


async def goes_on(store: Any, seen: dict[str, Any]) -> None:
    """The runs 0.1 left open are driven on by the code under test."""
    chart = old.chart()
    key = seen[old.WAITING_ID]["run"]["pending"][0]["key"]
    assert key and seen[old.APPROVED_ID]["run"]["pending"][0]["approved_by"] == "ops"

    await approve(chart, old.WAITING_ID, store=store, by="ops")
    end = await resume(chart, old.WAITING_ID, store=store, model=old.after_approval())
    assert (end.state, end.status) == ("done", "ended")
    assert end.context["resolution"] == "verified: refunded 500"
    assert (await store.load(old.WAITING_ID)).snapshot == end
    events = await store.events(old.WAITING_ID)
    assert [e.trigger for e in events[len(seen[old.WAITING_ID]["events"]) :]] == [
        "approved",
        "results",
        "propose",
        "go:check",
        "go:done",
    ]
    assert refunded(events) == [
        {"amount_cents": 500, "key": key, "order_id": "B-9", "outcome": "refunded"}
    ]

    # approved by 0.1, resumed now: the fork presents its parent's key
    end = await resume(chart, old.APPROVED_ID, store=store, model=old.after_approval())
    assert (end.state, end.status) == ("done", "ended")
    assert refunded(await store.events(old.APPROVED_ID)) == [
        {"amount_cents": 500, "key": key, "order_id": "B-9", "outcome": "refunded"}
    ]

    # killed in 0.1 while running search s2: taken over, s2 runs (retry="safe"), finished
    end = await resume(chart, old.KILLED_ID, store=store, model=old.after_takeover())
    assert (end.state, end.status) == ("done", "ended")
    events = await store.events(old.KILLED_ID)
    after = events[len(seen[old.KILLED_ID]["events"]) :]
    assert (after[0].trigger, after[0].call and after[0].call.id) == ("takeover", "s2")
    assert [e.call.id for e in events if e.fingerprint] == ["s1", "s2"]
    assert end.contexts == {} and end.context["findings"] == "nothing new"

    # forked by 0.1 with l1 in doubt: l1 runs, its duplicate l2 is refused, then it gives up
    end = await resume(chart, old.FORK_ID, store=store, model=old.fork_finishing())
    assert (end.state, end.doubt) == ("failed", None)
    events = await store.events(old.FORK_ID)
    assert [(e.call.id, e.trigger) for e in events if e.call and e.call.id in ("l1", "l2")] == [
        ("l1", "next_call"),
        ("l2", "refuse"),
    ]

    for run_id in old.RUNS:  # old rows and new ones replay together; no call is left open
        assert all(i.completed for i in await store.intents(run_id)), run_id
        loaded = await store.load(run_id)
        events = await store.events(run_id)
        assert replay(compiled(chart), await store.base(run_id), events) == loaded.snapshot


async def test_an_sqlite_file_written_by_0_1_reads_back_and_its_runs_go_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v0_1.db"
    shutil.copyfile(DATA / "v0_1.db", path)
    seen = json.loads((DATA / "v0_1.json").read_text())
    store = SQLiteStore(path)
    try:
        await read_as_written(store, seen)
        await goes_on(store, seen)
    finally:
        store.close()


def restore(dsn: str, dump: str) -> None:
    """Run a plain-SQL `pg_dump` into the empty database `dsn` (psql's meta-commands, the
    lines starting with a backslash, dropped: the fixture has none)."""
    import psycopg

    text = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(text.encode())  # no parameters: one simple query, many statements


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # psycopg's async API: asyncio only
async def test_a_postgres_database_written_by_0_1_reads_back_and_its_runs_go_on() -> None:
    from statechart.store.postgres import PostgresStore
    from tests.support.postgres import fresh_database

    seen = json.loads((DATA / "v0_1_postgres.json").read_text())
    with fresh_database() as dsn:
        restore(dsn, (DATA / "v0_1_postgres.sql").read_text())
        store = PostgresStore(dsn)
        try:
            await read_as_written(store, seen)
            await goes_on(store, seen)
        finally:
            await store.close()
