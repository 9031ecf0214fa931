"""A run loaded while its snapshot is written behind (the last snapshot plus the folded
tail of events) is exactly the run the driver held, whatever the snapshot cadence."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statechart import MemoryStore, Spent, SQLiteStore, Store
from statechart.records.run import ROOT_LEVEL
from statechart.runtime.current import current
from statechart.store.base import summary_of
from statechart.store.postgres import PostgresStore
from tests.engine.test_properties import SETTINGS, simulate
from tests.support.postgres import emptied, fresh_database


def check_cadence(data: st.DataObject, k: int, dsn: str) -> None:
    """Random runs of charts up to three levels deep, appended under a lease (human
    decisions without one, as `approve` does) to a memory, an SQLite and a PostgreSQL
    store (the database `dsn`, emptied first) that write the snapshot every `k` events:
    after every event, load + fold == the run as held, the tail stays shorter than `k`, the
    run's listing line is live, and once the lease is released the snapshot is the run."""
    o = simulate(data, decide=True)
    run_id = o.initial.run_id

    async def check(store: Store) -> None:
        await store.create(o.initial)
        lease = await store.acquire(run_id, "driver")
        for step in o.steps:
            human = step.event.actor == "human"
            await store.append(step, None if human else lease)
            loaded = await store.load(run_id)
            assert current(o.chart, loaded) == step.run, (k, step.event.seq)
            assert len(loaded.tail) < k
            assert loaded.snapshot.status == step.run.status  # every status change is written
            assert (loaded.seq, loaded.state) == (step.run.seq, step.run.state)
            assert loaded.spent == step.run.ledger.get(ROOT_LEVEL, Spent())
            (listed,) = await store.summaries()
            assert listed == summary_of(step.run, step.event.time)  # live, from the last event
        await store.release(lease)
        loaded = await store.load(run_id)
        assert loaded.tail == () and loaded.snapshot == o.final

    async def each() -> None:
        sqlite = SQLiteStore(":memory:", snapshot_every=k)
        postgres = PostgresStore(emptied(dsn), snapshot_every=k)
        for store in (MemoryStore(snapshot_every=k), sqlite, postgres):
            await check(store)
        sqlite.close()
        await postgres.close()

    anyio.run(each)


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    """One fresh PostgreSQL database for the module's examples."""
    with fresh_database() as found:
        yield found


@given(st.data(), st.integers(1, 100))
@SETTINGS
def test_snapshot_plus_folded_tail_is_the_run_the_driver_held(
    dsn: str, data: st.DataObject, k: int
) -> None:
    check_cadence(data, k, dsn)


@pytest.mark.parametrize("k", [1, 64, 100])
@given(data=st.data())
@SETTINGS
def test_the_same_at_every_event_at_the_default_and_at_100(
    dsn: str, k: int, data: st.DataObject
) -> None:
    check_cadence(data, k, dsn)
