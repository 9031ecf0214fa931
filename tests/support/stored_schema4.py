"""Runs written by statechart at schema version 4 (commit a136105, before the events moved
into `event_rows` and snapshots were written behind), kept as
`tests/store/data/schema_4.db` with what that code read back from it in
`tests/store/data/schema_4.json`: a finished run with tool calls, a run whose driver was
killed between recording a call's intent and running it, and a run waiting for approval.

Regenerate (only ever from a checkout of that commit):
    PYTHONPATH=<checkout> python -m tests.support.stored_schema4 tests/store/data/schema_4.db
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

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

DONE_ID = "schema4-done"
KILLED_ID = "schema4-killed"
WAITING_ID = "schema4-waiting"
RUNS = (DONE_ID, KILLED_ID, WAITING_ID)


@tool(retry="safe")
def look(q: str) -> str:
    """Look something up."""
    return f"seen {q}: " + "x" * 300


@tool(retry="never", needs_approval=True)
def send(text: str) -> str:
    """Send the answer (needs approval)."""
    return f"sent {text}"


def chart() -> Chart:
    """work (looks things up, sends behind approval) -> done, in 30 steps at most."""
    return Chart(
        "schema4",
        states=(
            State("work", tools=(look, send), instructions="Look, send, finish."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=30),
    )


def finishing() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(call("look", "l1", q="a")),
            reply(call("look", "l2", q="b"), call("look", "l3", q="c")),
            reply(call("next_state", "n1", target="done")),
        ]
    )


def to_approval() -> ScriptedModel:
    return ScriptedModel([reply(call("look", "l1", q="a")), reply(call("send", "s1", text="hi"))])


def after_approval() -> ScriptedModel:
    return ScriptedModel([reply(call("next_state", "n1", target="done"))])


async def write(path: str) -> None:
    store = SQLiteStore(path)
    c = chart()
    run = await start(c, store=store, model=finishing(), run_id=DONE_ID)
    end = await run_to_end(c, run, store=store, model=finishing())
    assert end.state == "done", end
    model = finishing()
    run = await start(c, store=store, model=model, run_id=KILLED_ID)
    async with contextlib.aclosing(drive(c, run, store=store, model=model)) as steps:
        async for record in steps:
            if record.opened is not None and record.opened.call.id == "l2":
                break  # the intent of l2 is stored; the call never ran
    # a driver killed there leaves its lease behind (expired here, so no test waits)
    store._db.execute(
        "UPDATE runs SET lease_holder='killed#1', lease_expires=0 WHERE run_id=?", (KILLED_ID,)
    )
    model = to_approval()
    run = await start(c, store=store, model=model, run_id=WAITING_ID)
    end = await run_to_end(c, run, store=store, model=model)
    assert end.status == "waiting", end
    seen = {}
    for run_id in RUNS:
        seen[run_id] = {
            "run": (await store.load(run_id)).model_dump(mode="json"),
            "events": [e.model_dump(mode="json") for e in await store.events(run_id)],
            "intents": [i.model_dump(mode="json") for i in await store.intents(run_id)],
            "transcript": [m.model_dump(mode="json") for m in await store.transcript(run_id, 1)],
            "fingerprints": sorted(await store.fingerprints(run_id)),
        }
    store.close()
    Path(path).with_suffix(".json").write_text(json.dumps(seen, indent=1, sort_keys=True))


if __name__ == "__main__":
    anyio.run(write, sys.argv[1])
