"""A child process that drives a run whose `def` tool blocks for a while, for the test
that a blocking tool never lets its lease lapse:
`python -m tests.support.blocking_tool DB MARKER ROLE SECONDS TTL INLINE`.

The tool appends the child's pid to MARKER each time it starts, then sleeps SECONDS (a
blocking `time.sleep`). ROLE `first` starts the run and drives it; ROLE `second` tries
to resume it until it ends, as a second driver racing for the run would. Each prints one
line: what happened to it.
"""

from __future__ import annotations

import os
import sys
import time

import anyio

from statechart import (
    Budget,
    Chart,
    Edge,
    LeaseHeldError,
    RunEndedError,
    ScriptedModel,
    SQLiteStore,
    State,
    StatechartError,
    call,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)

RUN_ID = "blocking"


def chart(marker: str, seconds: float, inline: bool) -> Chart:
    @tool(retry="safe", inline=inline)
    def fetch(order: str) -> str:
        """Fetch an order from a slow system (a blocking call)."""
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(seconds)
        return f"order {order}: shipped"

    return Chart(
        "blocking",
        states=(
            State("work", tools=(fetch,), instructions="Fetch the order, then finish."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20),
    )


def script() -> ScriptedModel:
    return ScriptedModel(
        [reply(call("fetch", order="A-7")), reply(call("next_state", target="done"))]
    )


async def main(db: str, marker: str, role: str, seconds: float, ttl: float, inline: bool) -> None:
    store = SQLiteStore(db)
    c = chart(marker, seconds, inline)
    try:
        if role == "first":
            run = await start(c, store=store, model=script(), run_id=RUN_ID)
            end = await run_to_end(c, run, store=store, model=script(), lease_ttl=ttl)
            print(f"first: {end.state}")
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                end = await resume(c, RUN_ID, store=store, model=script(), lease_ttl=ttl)
            except LeaseHeldError:
                await anyio.sleep(0.05)
                continue
            except RunEndedError:
                print("second: ended by the first")
                return
            print(f"second: drove it to {end.state}")
            return
        print("second: gave up")
    except StatechartError as exc:
        print(f"{role}: {type(exc).__name__}")
    finally:
        store.close()


if __name__ == "__main__":
    db_, marker_, role_, seconds_, ttl_, inline_ = sys.argv[1:7]
    anyio.run(main, db_, marker_, role_, float(seconds_), float(ttl_), inline_ == "1")
