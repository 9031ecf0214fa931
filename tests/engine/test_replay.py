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
        assert (await sqlite.load(run_id)).snapshot == o.final
        assert await sqlite.intents(run_id) == await memory.intents(run_id)
        assert await sqlite.fingerprints(run_id) == await memory.fingerprints(run_id)
        for visit, messages in o.transcripts.items():
            assert await sqlite.transcript(run_id, visit) == messages
        base = await sqlite.base(run_id)
        assert replay(compiled(o.chart), base, await sqlite.events(run_id)) == o.final
        sqlite.close()

    anyio.run(check)


def test_a_reply_stored_under_the_old_next_state_rule_still_replays() -> None:
    """Before a next_state sent with other calls waited for their results, such a reply
    queued both (one message: the reply); now the next_state is answered at once (two
    messages). The fold tells the two apart by the messages the event added."""
    from msgspec.structs import replace

    from statechart import Budget, Chart, Edge, State, call, reply, tool
    from statechart.engine import fold
    from tests.support.helpers import run_script

    @tool(retry="safe")
    def look(q: str) -> str:
        """Look."""
        return q

    chart = Chart(
        "c",
        states=(State("work", tools=(look,), instructions="Look."), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    both = reply(call("look", "a", q="x"), call("next_state", "n", target="done"))

    async def go() -> None:
        _, steps, _, store = await run_script(
            chart, [both, reply(call("next_state", target="done"))]
        )
        propose = steps[0].event
        assert propose.trigger == "propose" and propose.delta == 2
        base = await store.base(steps[0].run.run_id)
        assert [q.call.id for q in fold(compiled(chart), base, propose).pending] == ["a"]
        old = replace(propose, delta=1)
        assert [q.call.id for q in fold(compiled(chart), base, old).pending] == ["a", "n"]

    anyio.run(go)
