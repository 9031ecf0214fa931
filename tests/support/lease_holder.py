"""A child process that holds a run's lease and stays in a tool call, for the lease
takeover tests: `python -m tests.support.lease_holder DB MARKER`.

The tool writes MARKER once it runs, then sleeps (in the child only), so the parent can
kill the holder mid-call or leave it alive.
"""

from __future__ import annotations

import os
import sys
import time
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
    start,
    tool,
)

RUN_ID = "held"


@tool(retry="safe")
def slow_lookup(q: str) -> str:
    """Look something up, slowly in the child."""
    marker = os.environ.get("LEASE_MARKER")
    if marker:
        Path(marker).write_text(str(os.getpid()))
        time.sleep(3600)
    return f"found {q}"


def chart() -> Chart:
    return Chart(
        "lease",
        states=(
            State("work", tools=(slow_lookup,), instructions="Look it up, then finish."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20),
    )


def script() -> ScriptedModel:
    return ScriptedModel(
        [reply(call("slow_lookup", q="x")), reply(call("next_state", target="done"))]
    )


async def main(db: str) -> None:
    store = SQLiteStore(db)
    c, model = chart(), script()
    run = await start(c, store=store, model=model, run_id=RUN_ID)
    async for _ in drive(c, run, store=store, model=model, lease_ttl=3600):
        pass


if __name__ == "__main__":
    os.environ["LEASE_MARKER"] = sys.argv[2]
    anyio.run(main, sys.argv[1])
