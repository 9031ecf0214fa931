"""Refund desk: seed 002's classify -> gather -> resolve -> verify machine.

The refund tool is keyed (the payments API dedupes by idempotency key) and needs a
person's approval before money moves; `verify` is code that checks the payments
ledger, so the run cannot claim success without the refund on record. The model is
a deterministic offline stand-in (`demo_model`); pass `--model` to use a real one.

    statechart run agents/refund_desk.py:chart --input '{"order_id": "A-7"}'
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    FunctionModel,
    MemoryStore,
    Reply,
    Request,
    State,
    Usage,
    approve,
    call,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)
from statechart.models import register


def beside_store(name: str) -> Path:
    """A data file next to the SQLite store the `statechart` command uses (`STATECHART_DB`),
    or in the working directory when the store is a PostgreSQL database."""
    store = os.environ.get("STATECHART_DB", "statechart.db")
    return Path(name) if "://" in store else Path(store).with_name(name)


ORDERS = {"A-7": {"customer": "acme", "amount_cents": 2000, "status": "charged twice"}}
"""The shop's orders; any other `A-<number>` is one more of acme's, charged twice."""
BANK = os.environ.get("REFUND_DESK_BANK") or str(beside_store("refund_bank.db"))
"""The payments API's ledger, a SQLite file of its own: one refund per idempotency key."""


def _bank() -> sqlite3.Connection:
    db = sqlite3.connect(BANK, isolation_level=None)
    db.execute(
        "CREATE TABLE IF NOT EXISTS refunds (key TEXT PRIMARY KEY, order_id TEXT, "
        "amount_cents INTEGER)"
    )
    return db


def refunds(order_id: str) -> list[tuple[str, int]]:
    """(idempotency key, amount) of every refund the bank issued for an order."""
    with closing(_bank()) as db:
        return db.execute(
            "SELECT key, amount_cents FROM refunds WHERE order_id=?", (order_id,)
        ).fetchall()


class Ticket(BaseModel):
    order_id: str
    category: Literal["billing", "technical", "account", "unknown"] | None = None
    facts: str | None = None
    resolution: str | None = None


@tool(retry="safe")
def lookup_order(order_id: str) -> dict[str, object]:
    """Look an order up: customer, amount in cents, status, and refunds already issued."""
    order = ORDERS.get(order_id)
    if order is None and re.fullmatch(r"A-[0-9]+", order_id):
        order = {"customer": "acme", "amount_cents": 2000, "status": "charged twice"}
    if order is None:
        return {"error": f"no order {order_id}"}
    issued = refunds(order_id)
    if issued:  # another run refunded it already: the bank shows it
        return {**order, "status": "already refunded", "refunded_cents": issued[0][1]}
    return order


@tool(retry="keyed", needs_approval=True)
def issue_refund(order_id: str, amount_cents: int, idempotency_key: str) -> str:
    """Refund an order through the payments API (deduplicated by idempotency key)."""
    with closing(_bank()) as db:
        db.execute(
            "INSERT OR IGNORE INTO refunds VALUES (?, ?, ?)",
            (idempotency_key, order_id, amount_cents),
        )
        amount, order = db.execute(
            "SELECT amount_cents, order_id FROM refunds WHERE key=?", (idempotency_key,)
        ).fetchone()
    return f"refund {idempotency_key[:8]} of {amount} cents on {order}"


async def verify(ticket: Ticket) -> Decision:
    """Done only when the payments ledger shows exactly one refund for the order."""
    issued = refunds(ticket.order_id)
    if len(issued) == 1:
        return Decision("done", {"resolution": "refunded"}, reason="one refund on record")
    return Decision("failed", reason=f"{len(issued)} refunds on record for {ticket.order_id}")


chart = Chart(
    "refund_desk",
    context=Ticket,
    budget=Budget(max_steps=40, max_tokens=20_000, max_cost_micros=100_000),
    states=(
        State(
            "classify",
            reads=("order_id",),
            writes=("category",),
            max_iterations=2,
            instructions="Classify the request: billing, technical, account or unknown.",
        ),
        State(
            "gather",
            tools=(lookup_order,),
            reads=("order_id",),
            writes=("facts",),
            max_iterations=4,
            instructions="Collect the facts a refund decision needs.",
        ),
        State(
            "resolve",
            tools=(issue_refund,),
            reads=("order_id", "facts"),
            writes=("resolution",),
            max_visits=2,
            instructions="Refund the order if the facts justify it.",
        ),
        State("verify", kind="code", handler=verify, writes=("resolution",)),
        State("done", kind="terminal"),
        State("failed", kind="terminal", outcome="failure"),
        State("needs_human", kind="terminal", outcome="failure"),
    ),
    edges=(
        Edge("classify", "gather"),
        Edge("classify", "resolve"),
        Edge("classify", "needs_human"),
        Edge("gather", "resolve"),
        Edge("gather", "needs_human"),
        Edge("gather", "failed"),
        Edge("resolve", "verify"),
        Edge("resolve", "failed"),
        Edge("verify", "done"),
        Edge("verify", "resolve", max_traversals=1),
        Edge("verify", "failed"),
    ),
)

USAGE = Usage(input_tokens=150, output_tokens=40, cost_micros=60)


def demo_policy(request: Request) -> Reply:
    """A stand-in for a model: what a sensible one would do in each state."""
    done = {m.tool_call_id for m in request.transcript if m.role == "tool"}
    order = str(request.context.get("order_id", ""))
    if request.state == "classify":
        return reply(call("next_state", target="gather", category="billing"), usage=USAGE)
    if request.state == "gather":
        if "lookup" not in done:
            return reply(call("lookup_order", "lookup", order_id=order), usage=USAGE)
        looked = " ".join(m.content for m in request.transcript if m.role == "tool")
        facts = "already refunded" if "already refunded" in looked else "charged twice; 2000 cents"
        return reply(call("next_state", target="resolve", facts=facts), usage=USAGE)
    if "already refunded" in str(request.context.get("facts")):  # never refund twice
        return reply(call("next_state", target="verify", resolution="already refunded"))
    if "refund" not in done:
        return reply(call("issue_refund", "refund", order_id=order, amount_cents=2000), usage=USAGE)
    return reply(call("next_state", target="verify", resolution="refund issued"), usage=USAGE)


def demo_model(spec: str = "demo:refund_desk") -> FunctionModel:
    """The offline stand-in model; registered so `resume` can rebuild it from a run."""
    return FunctionModel(demo_policy, spec=spec)


register("demo:refund_desk", demo_model)


async def main() -> None:
    store = MemoryStore()
    run = await start(chart, store=store, model=demo_model(), context={"order_id": "A-7"})
    run = await run_to_end(chart, run, store=store, model=demo_model())
    print(f"waiting: {run.reason} -> approving as demo-operator")
    await approve(chart, run.run_id, store=store, by="demo-operator")
    run = await resume(chart, run.run_id, store=store)
    print(f"outcome: {run.state}; refunds on A-7: {refunds('A-7')}")


if __name__ == "__main__":
    anyio.run(main)
