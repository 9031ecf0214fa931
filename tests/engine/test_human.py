"""Approvals, rejections and cancellation: human events that make a run runnable again."""

from __future__ import annotations

import pytest

from statechart import (
    Budget,
    Chart,
    Edge,
    MemoryStore,
    NotWaitingError,
    RunEndedError,
    RunError,
    RunNotFoundError,
    ScriptedModel,
    Session,
    State,
    ToolCall,
    approve,
    call,
    cancel,
    reject,
    reply,
    run_to_end,
    start,
    step,
    tool,
)
from statechart.engine import compiled
from tests.support.helpers import run_script, tool_results
from tests.support.typed import DONE, flaky, wire

pytestmark = pytest.mark.anyio

SENT: list[str] = []


@tool(retry="never", needs_approval=True)
async def send_reply(text: str) -> str:
    """Send the reply to the customer."""
    SENT.append(text)
    return f"sent: {text}"


@tool(retry="safe")
async def note(text: str) -> str:
    """Take a note."""
    return "noted"


def chart() -> Chart:
    return Chart(
        "a",
        states=(State("send", tools=(send_reply, note)), State("done", kind="terminal")),
        edges=(Edge("send", "done"),),
        budget=Budget(max_steps=20),
    )


async def test_needs_approval_stops_drive_waiting_then_approve_with_edits() -> None:
    SENT.clear()
    c = chart()
    first = reply(call("send_reply", "s1", text="draft"), call("note", "n1", text="x"))
    end, steps, _, store = await run_script(c, [first])
    assert end.status == "waiting" and end.state == "send.approve"
    assert "tool 'send_reply' needs approval in state 'send'" in end.reason
    assert tool_results(steps)["n1"].startswith("not executed")
    assert SENT == []

    rec = await approve(c, end.run_id, store=store, by="ana", note="fine", edits={"text": "final"})
    assert rec.event.actor == "human" and rec.event.reason == "approved by ana: fine"
    assert rec.event.call is not None and rec.event.call.arguments == {"text": "final"}
    assert rec.run.status == "running" and rec.run.state == "send.act"

    model = ScriptedModel([reply(call("next_state", target="done"))])
    done = await run_to_end(c, end.run_id, store=store, model=model)
    assert SENT == ["final"] and done.state == "done"
    assert model.requests[0].transcript[-1].content == "sent: final"


async def test_reject_tells_the_model_and_nothing_runs() -> None:
    SENT.clear()
    c = chart()
    end, _, _, store = await run_script(c, [reply(call("send_reply", "s1", text="rude"))])
    rec = await reject(c, end.run_id, store=store, by="ana", reason="too rude")
    assert rec.run.state == "send.think" and rec.event.trigger == "rejected"
    model = ScriptedModel([reply(call("next_state", target="done"))])
    await run_to_end(c, end.run_id, store=store, model=model)
    assert SENT == []
    assert model.requests[0].transcript[-1].content == "not executed: rejected by ana: too rude"


async def test_approval_state_routes_to_its_outcomes() -> None:
    c = Chart(
        "gate",
        states=(
            State("check", kind="approval", on_approve="yes", on_reject="no"),
            State("yes", kind="terminal"),
            State("no", kind="terminal"),
        ),
        budget=Budget(max_steps=5),
    )
    store = MemoryStore()
    model = ScriptedModel([])
    run = await start(c, store=store, model=model)
    assert run.status == "waiting" and run.reason == "waiting for approval in 'check'"
    await cancel(c, run.run_id, store=store, reason="not needed")
    with pytest.raises(NotWaitingError, match="is ended in 'cancelled'"):
        await approve(c, run.run_id, store=store, by="x")
    with pytest.raises(RunNotFoundError, match="no run nope"):
        await approve(c, "nope", store=store, by="x")
    run2 = await start(c, store=store, model=model)
    rec = await approve(c, run2.run_id, store=store, by="bo")
    assert rec.run.state == "yes" and rec.run.status == "ended"
    run3 = await start(c, store=store, model=model)
    rec = await reject(c, run3.run_id, store=store, by="bo", reason="no budget")
    assert rec.run.state == "no" and rec.event.reason == "rejected by bo: no budget"


async def test_approve_needs_a_waiting_run_and_cancel_a_live_one() -> None:
    c = chart()
    end, _, _, store = await run_script(c, [reply(call("next_state", target="done"))])
    with pytest.raises(NotWaitingError, match="not waiting for approval"):
        await approve(c, end.run_id, store=store, by="x")
    with pytest.raises(RunEndedError, match="already ended in 'done'"):
        await cancel(c, end.run_id, store=store, reason="late")


async def test_cancel_ends_the_run_in_cancelled() -> None:
    c = chart()
    end, _, _, store = await run_script(c, [reply(call("send_reply", text="x"))])
    rec = await cancel(c, end.run_id, store=store, reason="customer withdrew")
    assert rec.run.state == "cancelled" and rec.run.status == "ended"
    assert rec.run.reason == "cancelled: customer withdrew" and rec.run.pending == ()
    assert (await store.load(end.run_id)).snapshot.state == "cancelled"


async def test_an_approval_state_may_reject_to_escalated() -> None:
    c = Chart(
        "gate",
        budget=Budget(max_steps=5),
        states=(
            State("check", kind="approval", on_approve="yes", on_reject="escalated"),
            State("yes", kind="terminal"),
        ),
    )
    assert [
        t.dest
        for t in compiled(c).transitions
        if t.source == "check" and t.trigger == "go:escalated"
    ] == ["escalated"]
    store = MemoryStore()
    run = await start(c, store=store, model=ScriptedModel([]))
    rec = await reject(c, run.run_id, store=store, by="bo", reason="risky")
    assert rec.run.state == "escalated" and rec.run.status == "ended"


# -- approving with edits; cancelling while a call may run ---------------------------------


async def test_edits_keep_raw_json_arguments_and_need_a_pending_call() -> None:
    """An approver's edits merge into a pending call whose arguments arrived as raw JSON;
    edits on a run with no pending call are refused."""
    c = Chart(
        "w",
        budget=Budget(max_steps=20),
        states=(State("pay", tools=(wire,)), DONE),
        edges=(Edge("pay", "done"),),
    )
    raw = ToolCall(id="w1", name="wire", arguments='{"to": "acme", "amount": 500}')
    end, _, _, store = await run_script(c, [reply(raw)])
    rec = await approve(c, end.run_id, store=store, by="cfo", edits={"amount": 400})
    assert rec.event.call is not None
    assert rec.event.call.arguments == {"to": "acme", "amount": 400}

    gate = Chart(
        "g",
        budget=Budget(max_steps=5),
        states=(State("ok", kind="approval", on_approve="done", on_reject="done"), DONE),
    )
    run = await start(gate, store=store, model=ScriptedModel([]))
    with pytest.raises(RunError, match="no pending call to edit"):
        await approve(gate, run.run_id, store=store, by="x", edits={"a": 1})


async def test_bad_edits_are_refused_and_change_nothing() -> None:
    """Edits that fail the tool's schema are refused and leave the run as it was; valid
    edits are coerced, and the edited call is recorded as a new intent with a new key."""
    c = Chart(
        "w",
        budget=Budget(max_steps=20),
        states=(State("pay", tools=(wire,)), DONE),
        edges=(Edge("pay", "done"),),
    )
    end, _, _, store = await run_script(c, [reply(call("wire", "w1", to="a", amount=1))])
    with pytest.raises(RunError, match="amount: Input should be a valid integer"):
        await approve(c, end.run_id, store=store, by="cfo", edits={"amount": "lots"})
    assert (await store.load(end.run_id)).snapshot == end
    rec = await approve(c, end.run_id, store=store, by="cfo", edits={"amount": "7"})
    assert rec.event.call is not None and rec.event.call.arguments == {"to": "a", "amount": 7}
    proposed, intent = await store.intents(end.run_id)  # the edit is recorded again
    assert intent.call.arguments == {"to": "a", "amount": 7} and not intent.completed
    assert proposed.completed_seq == rec.event.seq and proposed.key != intent.key


async def test_a_cancel_while_a_call_may_run_leaves_its_intent_open() -> None:
    """Cancelling a run whose call is at the head of `act` tells the model the call may
    have started, and leaves its intent open for a resume to settle."""
    c = Chart(
        "w",
        budget=Budget(max_steps=20),
        states=(State("pay", tools=(flaky,)), DONE),
        edges=(Edge("pay", "done"),),
    )
    store = MemoryStore()
    model = ScriptedModel([reply(call("flaky", "f1", q="x"))])
    run = await start(c, store=store, model=model)
    first = await step(c, run, model=model, session=Session())
    assert first is not None and first.run.state == "pay.act"
    await store.append(first)
    rec = await cancel(c, run.run_id, store=store, reason="stop")
    assert rec.messages[0].content == "cancelled: stop; this call may have started"
    [intent] = await store.intents(run.run_id)
    assert intent.call.id == "f1" and not intent.completed
