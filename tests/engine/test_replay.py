"""Random runs stored in SQLite read back exactly, and their logs replay to their snapshots."""

from __future__ import annotations

import anyio
from hypothesis import given
from hypothesis import strategies as st

from statechart import MemoryStore, SQLiteStore
from statechart.engine import compiled
from statechart.engine.replay import replay
from tests.engine.test_properties import SETTINGS, simulate


@given(st.data())
@SETTINGS
def test_sqlite_keeps_every_random_run_exactly(data: st.DataObject) -> None:
    o = simulate(data, decide=True)
    run_id = o.initial.run_id

    async def check() -> None:
        sqlite, memory = SQLiteStore(":memory:"), MemoryStore()
        for store in (sqlite, memory):
            await store.create(o.initial)
            for step in o.steps:
                await store.append(step)
        assert await sqlite.events(run_id) == o.events
        assert await sqlite.load(run_id) == o.final
        assert await sqlite.intents(run_id) == await memory.intents(run_id)
        assert await sqlite.fingerprints(run_id) == await memory.fingerprints(run_id)
        for visit, messages in o.transcripts.items():
            assert await sqlite.transcript(run_id, visit) == messages
        base = await sqlite.base(run_id)
        assert replay(compiled(o.chart), base, await sqlite.events(run_id)) == o.final
        sqlite.close()

    anyio.run(check)
