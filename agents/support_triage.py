"""Support triage (seed 003): intake, a capped research loop, draft, a code review, send.

Run it offline with its deterministic demo model (a stand-in for a real
model, so the command works anywhere with no API key):

    python agents/support_triage.py

The send step needs a human's approval; the demo approves as `demo-operator`.
Its tools work on a local SQLite helpdesk (`helpdesk.db`, or
$SUPPORT_TRIAGE_HELPDESK) created from the fixture `agents/helpdesk.json`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    Facts,
    FunctionModel,
    Reply,
    Request,
    SQLiteStore,
    State,
    Usage,
    approve,
    call,
    reply,
    resume,
    run_to_end,
    start,
    tool,
    tracing,
)
from statechart.models import register


def beside_store(name: str) -> Path:
    """A data file next to the SQLite store the `statechart` command uses (`STATECHART_DB`),
    or in the working directory when the store is a PostgreSQL database."""
    store = os.environ.get("STATECHART_DB", "statechart.db")
    return Path(name) if "://" in store else Path(store).with_name(name)


FIXTURE = Path(__file__).with_name("helpdesk.json")
HELPDESK = os.environ.get("SUPPORT_TRIAGE_HELPDESK") or str(beside_store("helpdesk.db"))
"""The helpdesk: a SQLite file of tickets, knowledge-base articles, accounts and sent
replies, created from `helpdesk.json` the first time it is opened."""
OUTBOX: list[str] = []
"""Replies sent by this process (they are also stored in the helpdesk's `replies`)."""


def helpdesk() -> sqlite3.Connection:
    """The helpdesk database, created and filled from the fixture when missing."""
    db = sqlite3.connect(HELPDESK, isolation_level=None)
    db.executescript("""
        CREATE TABLE IF NOT EXISTS tickets (id TEXT PRIMARY KEY, customer TEXT, text TEXT);
        CREATE TABLE IF NOT EXISTS articles (id TEXT PRIMARY KEY, keyword TEXT, body TEXT);
        CREATE TABLE IF NOT EXISTS accounts (customer TEXT PRIMARY KEY, plan TEXT,
            open_invoices INTEGER, refunds_this_year INTEGER);
        CREATE TABLE IF NOT EXISTS replies (text TEXT);
    """)
    if db.execute("SELECT count(*) FROM tickets").fetchone()[0] == 0:
        data = json.loads(FIXTURE.read_text())
        db.execute("BEGIN")
        db.executemany("INSERT INTO tickets VALUES (:id, :customer, :text)", data["tickets"])
        db.executemany("INSERT INTO articles VALUES (:id, :keyword, :body)", data["articles"])
        db.executemany(
            "INSERT INTO accounts VALUES (:customer, :plan, :open_invoices, :refunds_this_year)",
            data["accounts"],
        )
        db.execute("COMMIT")
    return db


class Ticket(BaseModel):
    """The triage context: what the states read and write."""

    ticket_id: str = ""
    ticket: str | None = None
    findings: str | None = None
    draft: str | None = None
    review_passed: bool = False


@tool(retry="safe")
def fetch_ticket(ticket_id: str) -> str:
    """Load a ticket by id."""
    with closing(helpdesk()) as db:
        found = db.execute("SELECT customer, text FROM tickets WHERE id=?", (ticket_id,)).fetchone()
    return (
        json.dumps({"customer": found[0], "text": found[1]}) if found else f"no ticket {ticket_id}"
    )


@tool(retry="safe")
def search_kb(query: str) -> str:
    """Search the knowledge base."""
    with closing(helpdesk()) as db:
        hits = db.execute(
            "SELECT body FROM articles WHERE instr(lower(?), keyword) > 0 ORDER BY id", (query,)
        ).fetchall()
    return "\n".join(body for (body,) in hits) or "no articles found"


@tool(retry="safe")
def lookup_account(customer: str) -> str:
    """Look up a customer's account."""
    with closing(helpdesk()) as db:
        db.row_factory = sqlite3.Row
        found = db.execute(
            "SELECT plan, open_invoices, refunds_this_year FROM accounts WHERE customer=?",
            (customer,),
        ).fetchone()
    return json.dumps(dict(found) if found else {})


@tool(retry="safe")
def draft_reply(text: str) -> str:
    """Write the reply draft."""
    return f"draft saved ({len(text)} characters)"


@tool(retry="never", needs_approval=True)
def send_reply(text: str) -> str:
    """Send the reply to the customer."""
    with closing(helpdesk()) as db:
        db.execute("INSERT INTO replies VALUES (?)", (text,))
    OUTBOX.append(text)
    return "sent"


async def policy_check(ctx: Ticket) -> Decision:
    """Code, not a model: a draft must cite an article and promise no amounts."""
    draft = ctx.draft or ""
    ok = "KB-" in draft and "$" not in draft
    if ok:
        return Decision("send", {"review_passed": True}, reason="policy check passed")
    return Decision("draft", {"review_passed": False}, reason="draft must cite a KB article")


def review_passed(facts: Facts) -> str | None:
    """Send only after a passed review."""
    return None if getattr(facts.context, "review_passed", False) else "review has not passed"


chart = Chart(
    "support_triage",
    context=Ticket,
    budget=Budget(max_steps=60, max_tokens=50_000, max_cost_micros=200_000),
    states=(
        State(
            "intake",
            tools=(fetch_ticket,),
            reads=("ticket_id",),
            writes=("ticket",),
            instructions="Load the ticket, then summarise it into `ticket`.",
        ),
        State(
            "research",
            tools=(search_kb, lookup_account),
            reads=("ticket",),
            writes=("findings",),
            max_visits=3,
            max_calls={"search_kb": 3},
            instructions="Find what policy applies; record it in `findings`.",
        ),
        State(
            "draft",
            tools=(draft_reply,),
            reads=("ticket", "findings"),
            writes=("draft",),
            instructions="Draft a reply citing the article you relied on.",
        ),
        State("review", kind="code", handler=policy_check, writes=("review_passed",)),
        State(
            "send", tools=(send_reply,), reads=("draft",), instructions="Send the approved draft."
        ),
        State("done", kind="terminal"),
    ),
    edges=(
        Edge("intake", "research"),
        Edge("research", "research"),
        Edge("research", "draft"),
        Edge("draft", "review"),
        Edge("review", "send", guard=review_passed),
        Edge("review", "draft", max_traversals=1),
        Edge("send", "done"),
    ),
)


def demo_policy(request: Request) -> Reply:
    """The offline stand-in: a fixed, sensible path through the chart."""
    done = {m.tool_call_id for m in request.transcript if m.role == "tool"}
    used = [c.name for m in request.transcript for c in m.tool_calls if c.id in done]
    usage = Usage(input_tokens=120 + 40 * len(request.transcript), output_tokens=30, cost_micros=90)

    def say(name: str, **args: Any) -> Reply:
        return reply(call(name, **args), usage=usage)

    state = request.state
    if state == "intake":
        if "fetch_ticket" not in used:
            return say("fetch_ticket", ticket_id=request.context["ticket_id"])
        found = request.transcript[-1].content
        if not found.startswith("{"):  # no such ticket: a person should look at it
            return say("next_state", target="escalated")
        return say("next_state", target="research", ticket=json.loads(found)["text"])
    if state == "research":
        if "search_kb" not in used:
            return say("search_kb", query="double charge")
        if "lookup_account" not in used:
            return say("lookup_account", customer="acme")
        return say("next_state", target="draft", findings=request.transcript[1].content)
    if state == "draft":
        text = (
            "Sorry for the double charge. Per KB-12 we refund duplicate charges within "
            "5 days after verification; we have started that for you."
        )
        if "draft_reply" not in used:
            return say("draft_reply", text=text)
        return say("next_state", target="review", draft=text)
    if state == "send":
        if "send_reply" not in used:
            return say("send_reply", text=str(request.context["draft"]))
        return say("next_state", target="done")
    return say("next_state", target="escalated")


def demo_model(spec: str = "demo:support_triage") -> FunctionModel:
    """The offline stand-in model; registered so `resume` can rebuild it from a run."""
    return FunctionModel(demo_policy, spec=spec)


register("demo:support_triage", demo_model)


async def main(db: str = "statechart.db") -> None:
    provider = tracing.configure_from_environment("support-triage")  # docs/tracing-jaeger.md
    store = SQLiteStore(db)
    run = await start(chart, store=store, model=demo_model(), context={"ticket_id": "T-1001"})
    run = await run_to_end(chart, run, store=store, model=demo_model())
    if run.status == "waiting":
        print(f"waiting: {run.reason} -> approving as demo-operator")
        await approve(chart, run.run_id, store=store, by="demo-operator")
        run = await resume(chart, run.run_id, store=store)  # the model the run recorded
    print(f"{'seq':>3}  {'actor':<6} {'transition':<44} note")
    for e in await store.events(run.run_id):
        move = f"{e.source} -> {e.target}"
        called = e.call.name if e.call else ", ".join(c.name for c in e.calls)
        note = e.refused or e.reason or called
        print(f"{e.seq:>3}  {e.actor:<6} {move:<44} {note}")
    spent = run.ledger["root"]
    print(
        f"outcome: {run.state} ({run.status}); steps {spent.steps}, model calls "
        f"{spent.model_calls}, tokens {spent.tokens}, cost ${spent.cost_micros / 1e6:.6f}"
    )
    print(f"sent: {OUTBOX}")
    print(
        f"stored in {db}; its audit timeline: .venv/bin/statechart show {run.run_id}"
        + (f" --db {db}" if db != "statechart.db" else "")
    )
    if provider is not None:
        provider.shutdown()
        trace_id = run.trace.get("traceparent", "").split("-")[1:2]
        print(
            f"trace: {''.join(trace_id)} (Jaeger: http://localhost:16686/trace/{''.join(trace_id)})"
        )
    store.close()


if __name__ == "__main__":
    anyio.run(main)
