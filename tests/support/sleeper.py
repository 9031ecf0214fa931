"""A child process that drives a run into a retry backoff and sleeps there, for the test
that a SIGKILL during the backoff loses nothing:
`python -m tests.support.sleeper STORE MARKER`, STORE a SQLite path or a PostgreSQL DSN.

The `flaky` tool appends a line to MARKER on every attempt and fails the first one; its
`Retry` waits 1.5 s. The child drives the run in process, so it is asleep (holding the
lease) when the parent kills it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from statechart import (
    Budget,
    Chart,
    Edge,
    Retry,
    ScriptedModel,
    State,
    Store,
    call,
    reply,
    run_to_end,
    start,
    tool,
)

RUN_ID = "sleeper"
BACKOFF = 1.5


def chart(marker: str) -> Chart:
    @tool(retry="safe", retries=Retry(attempts=3, initial=BACKOFF, jitter=0))
    def flaky(order: str) -> str:
        """Fetch an order from a system that fails the first time."""
        with open(marker, "a") as f:
            f.write("attempt\n")
        if len(Path(marker).read_text().split()) == 1:
            raise ConnectionError("the order system is down")
        return f"order {order}: shipped"

    return Chart(
        "sleeper",
        states=(
            State("work", tools=(flaky,), instructions="Fetch the order, then finish."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20),
    )


def script() -> ScriptedModel:
    return ScriptedModel(
        [reply(call("flaky", order="A-7")), reply(call("next_state", target="done"))]
    )


def open_store(where: str) -> Store:
    if where.startswith("postgresql://"):
        from statechart.store.postgres import PostgresStore

        return PostgresStore(where)
    from statechart import SQLiteStore

    return SQLiteStore(where)


async def main(where: str, marker: str) -> None:
    store = open_store(where)
    c = chart(marker)
    run = await start(c, store=store, model=script(), run_id=RUN_ID)
    await run_to_end(c, run, store=store, model=script(), lease_ttl=1.0)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
