"""What only the PostgreSQL store does: a value JSONB refuses is a clear error that
leaves the run as it was."""

from __future__ import annotations

import pytest

from statechart import ScriptedModel, StoreError, call, reply, start, tool
from statechart.store.postgres import PostgresStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API runs on asyncio only


async def test_a_nul_character_is_a_clear_error_and_the_run_is_kept(
    pg_store: PostgresStore,
) -> None:
    from statechart import Budget, Chart, Edge, State, run_to_end

    @tool(retry="safe")
    async def read(path: str) -> str:
        """Read a file."""
        return "binary\x00junk"

    chart = Chart(
        "reader",
        budget=Budget(max_steps=10),
        states=(State("work", tools=(read,), instructions="Read."), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
    )
    model = ScriptedModel([reply(call("read", "r1", path="a"))])
    run = await start(chart, store=pg_store, model=model)
    with pytest.raises(StoreError, match="NUL character"):
        await run_to_end(chart, run, store=pg_store, model=model)
    loaded = await pg_store.load(run.run_id)
    assert loaded.seq == 1 and loaded.state == "work.act"  # the proposal stored, nothing lost
