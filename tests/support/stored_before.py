"""A chart and a run written by statechart before the layout change (commit afdadff), kept
as `tests/store/data/before_layout.db`, so a file written then must load now.

Regenerate (only ever from a checkout of that commit, which has the same public API):
    PYTHONPATH=<checkout> python -m tests.support.stored_before tests/store/data/before_layout.db
"""

from __future__ import annotations

import sys

import anyio
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    ScriptedModel,
    SQLiteStore,
    State,
    call,
    reply,
    run_to_end,
    start,
    tool,
)

RUN_ID = "before-layout-1"


class Ticket(BaseModel):
    """The context: a ticket and the answer written for it."""

    ticket: str = ""
    answer: str = ""


@tool(retry="safe")
def lookup(ticket: str) -> str:
    """Look the ticket up."""
    return f"{ticket}: card charged twice"


@tool(retry="keyed", needs_approval=True)
def refund(ticket: str, cents: int, idempotency_key: str) -> str:
    """Refund the ticket's customer (needs a human's approval)."""
    return f"refunded {cents} for {ticket}"


def chart() -> Chart:
    """look (a safe lookup) -> pay (a refund behind approval) -> done."""
    return Chart(
        "before_layout",
        states=(
            State("look", tools=(lookup,), reads=("ticket",), writes=("answer",)),
            State("pay", tools=(refund,), reads=("ticket", "answer")),
            State("done", kind="terminal"),
        ),
        edges=(Edge("look", "pay"), Edge("pay", "done")),
        context=Ticket,
        budget=Budget(max_steps=40),
    )


def model_to_approval() -> ScriptedModel:
    """Looks up, moves on with an answer, asks for a refund (which then waits)."""
    return ScriptedModel(
        [
            reply(call("lookup", ticket="T-1")),
            reply(call("next_state", target="pay", answer="charged twice")),
            reply(call("refund", ticket="T-1", cents=1250)),
        ]
    )


def model_after_approval() -> ScriptedModel:
    """After the refund ran: leave for `done`."""
    return ScriptedModel([reply(call("next_state", target="done"))])


async def write(path: str) -> None:
    store = SQLiteStore(path)
    c, model = chart(), model_to_approval()
    run = await start(c, store=store, model=model, run_id=RUN_ID, context={"ticket": "T-1"})
    end = await run_to_end(c, run, store=store, model=model)
    assert end.status == "waiting", end
    store.close()


if __name__ == "__main__":
    anyio.run(write, sys.argv[1])
