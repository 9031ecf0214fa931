"""Runs written by statechart at schema version 2 (commit a3890ab, before the root budget
level was named `root` and leases recorded their process), kept as
`tests/store/data/schema_2.db`: one run the root's step cap exhausted, one waiting for
approval with its lease left behind by a killed driver.

Regenerate (only ever from a checkout of that commit):
    PYTHONPATH=<checkout> python -m tests.support.stored_schema2 tests/store/data/schema_2.db
"""

from __future__ import annotations

import sys

import anyio

from statechart import (
    Budget,
    Chart,
    Edge,
    ScriptedModel,
    SQLiteStore,
    State,
    call,
    drive,
    reply,
    run_to_end,
    start,
    tool,
)

EXHAUSTED_ID = "schema2-exhausted"
WAITING_ID = "schema2-waiting"


@tool(retry="safe", repeatable=True)
def look(q: str) -> str:
    """Look something up."""
    return f"seen {q}"


@tool(retry="never", needs_approval=True)
def send(text: str) -> str:
    """Send the answer (needs approval)."""
    return f"sent {text}"


def chart() -> Chart:
    """work (looks things up, sends behind approval) -> done, in 12 steps at most."""
    return Chart(
        "schema2",
        states=(
            State("work", tools=(look, send), instructions="Look, send, finish."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=12),
    )


def looping() -> ScriptedModel:
    return ScriptedModel([reply(call("look", q=str(i))) for i in range(20)])


def to_approval() -> ScriptedModel:
    return ScriptedModel([reply(call("send", text="hi"))])


def after_approval() -> ScriptedModel:
    return ScriptedModel([reply(call("next_state", target="done"))])


async def write(path: str) -> None:
    store = SQLiteStore(path)
    c = chart()
    run = await start(c, store=store, model=looping(), run_id=EXHAUSTED_ID)
    end = await run_to_end(c, run, store=store, model=looping())
    assert (end.state, end.status) == ("escalated", "ended"), end
    model = to_approval()
    run = await start(c, store=store, model=model, run_id=WAITING_ID)
    steps = [step async for step in drive(c, run, store=store, model=model)]
    assert steps[-1].run.status == "waiting", steps[-1].run
    # a driver killed mid-run leaves its lease behind, unexpired:
    store._db.execute(
        "UPDATE runs SET lease_holder='killed#1', lease_expires=4e9 WHERE run_id=?",
        (WAITING_ID,),
    )
    store.close()


if __name__ == "__main__":
    anyio.run(write, sys.argv[1])
