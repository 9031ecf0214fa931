"""A child process driving a run that sits inside a sub-chart with its own context, for
the crash test of ported sub-charts: `python -m tests.support.ported_proc start|resume DB
EFFECTS` (set `STATECHART_FAILPOINT` to kill it on the way).

The sub-chart's keyed tool appends `ref key` to EFFECTS once per key (the outside
system dedupes by the idempotency key, as a payment API would).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    FunctionModel,
    Reply,
    Request,
    SQLiteStore,
    State,
    call,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)

RUN_ID = "ported"


class Order(BaseModel):
    order_id: str
    note: str | None = None


class Lookup(BaseModel):
    ref: str
    found: str | None = None


@tool(retry="keyed")
def fetch_record(ref: str, idempotency_key: str) -> str:
    """Fetch the record of an order (the outside system dedupes by key)."""
    effects = Path(os.environ["PORTED_EFFECTS"])
    seen = effects.read_text().split("\n") if effects.exists() else []
    if f"{ref} {idempotency_key}" not in seen:
        with effects.open("a") as f:
            f.write(f"{ref} {idempotency_key}\n")
    return f"record of {ref}"


def lookup() -> Chart:
    return Chart(
        "lookup",
        states=(
            State(
                "fetch",
                tools=(fetch_record,),
                reads=("ref",),
                writes=("found",),
                instructions="Fetch the record.",
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("fetch", "done"),),
        context=Lookup,
    )


def chart() -> Chart:
    return Chart(
        "orders",
        states=(
            State(
                "look",
                kind="chart",
                chart=lookup,
                input={"ref": "order_id"},
                output={"note": "found"},
                exits={"done": "done"},
            ),
            State("done", kind="terminal"),
        ),
        context=Order,
        budget=Budget(max_steps=20),
    )


def policy(request: Request) -> Reply:
    results = [m.content for m in request.transcript if m.role == "tool"]
    if results:
        return reply(call("next_state", target="done", found=results[-1]))
    return reply(call("fetch_record", ref=request.context["ref"]))


def model() -> FunctionModel:
    return FunctionModel(policy, spec="ported")


async def main(op: str, db: str) -> None:
    store = SQLiteStore(db)
    c = chart()
    if op == "start":
        run = await start(c, store=store, model=model(), run_id=RUN_ID, context={"order_id": "A-7"})
        await run_to_end(c, run, store=store, model=model())
    else:
        await resume(c, RUN_ID, store=store, model=model())
    store.close()


if __name__ == "__main__":
    os.environ["PORTED_EFFECTS"] = sys.argv[3]
    anyio.run(main, sys.argv[1], sys.argv[2])
