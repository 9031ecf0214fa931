"""The runs a replay reads: from every store (SQLite, PostgreSQL), picked by id, chart
name and date, with an unknown id refused before anything is replayed."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import statechart as sc
from statechart.errors import RunNotFoundError
from tests.rerun.test_divergence import chart, policy, refuse
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[sc.Store]:
    if request.param == "postgres":
        from statechart.store.postgres import PostgresStore

        if request.getfixturevalue("anyio_backend") != "asyncio":
            pytest.skip("PostgresStore runs on asyncio only (psycopg's async API)")
        with fresh_database() as dsn:
            postgres = PostgresStore(dsn)
            yield postgres
            await postgres.close()
        return
    sqlite = sc.SQLiteStore(tmp_path / "runs.db")
    yield sqlite
    sqlite.close()


async def test_runs_are_read_from_the_store_and_picked(store: sc.Store) -> None:
    original = chart()
    model = sc.FunctionModel(policy, spec="policy")
    ids = []
    for ticket in ("T-1", "T-2", "T-3"):
        run = await sc.start(original, store=store, model=model, context={"ticket_id": ticket})
        ids.append((await sc.run_to_end(original, run, store=store, model=model)).run_id)
    everything = await sc.replay(original, store=store)
    assert [v.run_id for v in everything.verdicts] == ids and everything.counts() == {"agree": 3}

    picked = await sc.replay(chart(guard=refuse), [ids[2], ids[0]], store=store)
    assert [(v.run_id, v.kind) for v in picked.verdicts] == [
        (ids[2], "guard_refused"),
        (ids[0], "guard_refused"),
    ]
    assert (await sc.replay(original, store=store, chart_name="other")).verdicts == ()
    later = await sc.replay(original, store=store, since=time.time() + 3600)
    assert later.verdicts == () and later.ok
    with pytest.raises(RunNotFoundError, match="no run nope"):
        await sc.replay(original, ["nope", ids[0]], store=store)
