"""Seed 003's support-triage machine against a model that tries every forbidden move."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from statechart import SQLiteStore, approve, call, reply, run_to_end
from statechart.testing import (
    Cassette,
    assert_called,
    assert_not_called,
    assert_path,
    assert_within_budget,
)
from tests.support.cli import AGENT, FAILED, TICKET, WAITING, run_cli, waiting_id
from tests.support.helpers import run_script, tool_results

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def helpdesk_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's SQLite helpdesk goes to a temporary file, not the working directory."""
    monkeypatch.setenv("SUPPORT_TRIAGE_HELPDESK", str(tmp_path / "helpdesk.db"))


def load_agent(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"agent_{name}", ROOT / "agents" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_every_forbidden_move_is_refused_with_its_reason() -> None:
    agent = load_agent("support_triage")
    script = [
        reply(call("fetch_ticket", ticket_id="T-1001")),
        reply(call("next_state", target="research", ticket="double charge")),
        # research: send_reply is not a research tool
        reply(call("send_reply", "bad-send", text="refund coming")),
        # research: jumping straight to done is not an edge
        reply(call("next_state", "bad-done", target="done")),
        reply(call("search_kb", query="double charge")),
        reply(call("search_kb", query="invoice")),
        reply(call("search_kb", query="refund")),
        # a fourth search is over max_calls
        reply(call("search_kb", "fourth", query="refund policy")),
        reply(call("next_state", target="draft", findings="KB-12")),
        # draft: sending without review is not an edge
        reply(call("next_state", "bad-send-state", target="send")),
        reply(call("next_state", target="review", draft="We will refund $40 soon.")),
        # review (code) sends it back to draft once; the model fixes the draft
        reply(call("next_state", target="review", draft="Per KB-12 a refund follows.")),
        reply(call("send_reply", "send", text="Per KB-12 a refund follows.")),
    ]
    end, steps, model, store = await run_script(agent.chart, script, {"ticket_id": "T-1001"})
    results = tool_results(steps)
    assert "tool 'send_reply' is not available in state 'research'" in results["bad-send"]
    assert "Input should be 'research', 'draft' or 'escalated'" in results["bad-done"]
    assert "already called 3 times in this visit of 'research' (max_calls=3)" in results["fourth"]
    assert "Input should be 'review' or 'escalated'" in results["bad-send-state"]
    events = await store.events(end.run_id)
    refusals = [e for e in events if e.refused]
    assert len(refusals) == 4
    assert all(e.target.endswith(".think") and e.source.endswith(".act") for e in refusals)
    assert [e.call.id for e in refusals if e.call] == [
        "bad-send",
        "bad-done",
        "fourth",
        "bad-send-state",
    ]
    # each refusal reached the model as the result of its move
    replies_seen = [m.content for r in model.requests for m in r.transcript if m.role == "tool"]
    assert sum(1 for text in replies_seen if text.startswith("refused:")) >= 4
    # the review sent the first draft back (the edge may be taken once), the second passed
    reviews = [e for e in events if e.source == "review"]
    assert [e.target for e in reviews] == ["draft.think", "send.think"]
    assert reviews[0].reason == "draft must cite a KB article"
    assert end.status == "waiting" and end.state == "send.approve"
    assert agent.OUTBOX == []
    await approve(agent.chart, end.run_id, store=store, by="lead")
    from statechart import ScriptedModel

    finish = ScriptedModel([reply(call("next_state", target="done"))])
    done = await run_to_end(agent.chart, end.run_id, store=store, model=finish)
    assert done.state == "done" and agent.OUTBOX == ["Per KB-12 a refund follows."]


async def test_send_is_unreachable_without_a_passed_review() -> None:
    agent = load_agent("support_triage")
    edges = {(e.source, e.target) for e in agent.chart.edges}
    assert [src for src, dst in edges if dst == "send"] == ["review"]
    script = [
        reply(call("fetch_ticket", ticket_id="T-1001")),
        reply(call("next_state", target="research", ticket="x")),
        reply(call("next_state", target="draft", findings="none")),
        reply(call("next_state", target="review", draft="no citation")),
        reply(call("next_state", target="review", draft="still none")),
    ]
    end, steps, _, _ = await run_script(agent.chart, script, {"ticket_id": "T-1001"})
    # the second failed review cannot go back to draft (max_traversals=1) nor to send (guard):
    # the code state escalates with the reason
    assert end.state == "escalated"
    assert "edge review->draft was already taken 1 time(s)" in steps[-1].event.reason


async def test_demo_policy_reaches_done_after_approval(tmp_path: Path) -> None:
    agent = load_agent("support_triage")
    await agent.main(str(tmp_path / "demo.db"))
    assert len(agent.OUTBOX) == 1 and "KB-12" in agent.OUTBOX[0]
    helpdesk = sqlite3.connect(tmp_path / "helpdesk.db")  # the fixture, loaded into SQLite
    assert helpdesk.execute("SELECT count(*) FROM tickets").fetchone() == (2,)
    assert helpdesk.execute("SELECT text FROM replies").fetchall() == [(agent.OUTBOX[0],)]
    store = SQLiteStore(tmp_path / "demo.db")
    (run,) = await store.runs()
    assert run.state == "done" and run.model == "demo:support_triage"
    assert [e.by for e in await store.events(run.run_id) if e.actor == "human"] == ["demo-operator"]


async def test_the_tools_query_the_sqlite_helpdesk(tmp_path: Path) -> None:
    agent = load_agent("support_triage")
    assert json.loads(await agent.fetch_ticket.invoke({"ticket_id": "T-1002"})) == {
        "customer": "globex",
        "text": "How do I change the address on my invoices?",
    }
    assert (await agent.search_kb.invoke({"query": "Invoice address"})).startswith("KB-7:")
    assert await agent.search_kb.invoke({"query": "weather"}) == "no articles found"
    assert json.loads(await agent.lookup_account.invoke({"customer": "globex"})) == {
        "plan": "starter",
        "open_invoices": 2,
        "refunds_this_year": 0,
    }
    assert await agent.fetch_ticket.invoke({"ticket_id": "T-9"}) == "no ticket T-9"


def test_the_support_triage_demo_model_handles_an_unknown_ticket(tmp_path: Path) -> None:
    """`statechart run` of the support triage agent with no --input (no ticket the fixture
    knows) never fails inside its demo model: the stand-in escalates or ends on purpose."""
    out = run_cli(tmp_path, "run", AGENT, code=FAILED).stdout  # escalates on purpose
    assert "model call failed" not in out, out


def test_approving_from_another_directory_sends_into_the_same_helpdesk(tmp_path: Path) -> None:
    """Approving a waiting run from another directory (same --db) sends the reply into the
    helpdesk the ticket came from; no second helpdesk appears where approve ran."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    run_id = waiting_id(run_cli(a, "run", AGENT, "--input", TICKET, code=WAITING).stdout)
    out = run_cli(b, "approve", run_id, "--db", str(a / "statechart.db")).stdout
    assert "ended in 'done'" in out
    assert not (b / "helpdesk.db").exists(), "a second helpdesk appeared where approve ran"
    replies = sqlite3.connect(a / "helpdesk.db").execute("SELECT text FROM replies").fetchall()
    assert len(replies) == 1


async def test_the_demo_path_from_its_cassette(statechart_cassette: Cassette) -> None:
    """The testing kit on the reference agent: recorded once, replayed with no model and
    no tool (the cassette lives in tests/agents/cassettes/)."""
    agent = load_agent("support_triage")
    model = agent.demo_model()
    ran = await statechart_cassette.run(agent.chart, model=model, context={"ticket_id": "T-1001"})
    assert ran.status == "waiting"
    assert_not_called(ran, "send_reply")  # it waits for a person first
    ran = await statechart_cassette.approve(agent.chart, ran, by="dana")
    assert_path(ran, ["intake", "research", "draft", "review", "send", "done"])
    assert_called(ran, "send_reply", once=True)
    assert_called(ran, "search_kb", once=True)
    assert_within_budget(ran)
