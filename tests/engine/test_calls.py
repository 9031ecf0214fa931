"""Intents and idempotency keys: a key written with the intent, stable across a failed
attempt's retry; every way a call leaves the queue completes its intent."""

from __future__ import annotations

from pathlib import Path

import pytest

from statechart import (
    Budget,
    Chart,
    Edge,
    ScriptedModel,
    SQLiteStore,
    State,
    call,
    cancel,
    reject,
    reply,
    run_to_end,
    start,
    tool,
)
from tests.support.durable import CALLS, DONE, FINISH
from tests.support.helpers import run_script
from tests.support.typed import wire

pytestmark = pytest.mark.anyio
KEYS: list[str | None] = []


@tool(retry="keyed", repeatable=True)
def charge(amount: int, idempotency_key: str | None = None) -> str:
    """Charge a card (the payment API dedupes by key); the first attempt times out."""
    KEYS.append(idempotency_key)
    if len(KEYS) == 1:
        raise TimeoutError("payment API timed out (it may have charged)")
    return f"charged {amount}"


async def test_a_retry_after_a_failure_presents_the_same_key_a_new_charge_a_new_one() -> None:
    KEYS.clear()
    c = Chart(
        "pay",
        budget=Budget(max_steps=20),
        states=(State("bill", tools=(charge,)), State("done", kind="terminal")),
        edges=(Edge("bill", "done"),),
    )
    end, steps, _, store = await run_script(
        c,
        [
            reply(call("charge", "a", amount=5)),  # times out
            reply(call("charge", "b", amount=5)),  # the retry: the same charge
            reply(call("charge", "c", amount=5)),  # a second, deliberate charge
            reply(call("next_state", target="done")),
        ],
    )
    assert end.state == "done"
    first, retry, second = KEYS
    assert first == retry and second != first
    assert [i.key for i in await store.intents(end.run_id)] == [first, retry, second]


# -- every way a call leaves the queue completes its intent ---------------------------------


async def test_intents_complete_when_refused_rejected_or_cancelled() -> None:
    """A call naming no tool records no intent; a cancel completes the open intent of the
    pending call and tells the model it was not executed."""
    c = Chart(
        "w",
        budget=Budget(max_steps=20),
        states=(State("pay", tools=(wire,)), DONE),
        edges=(Edge("pay", "done"),),
    )
    replies = [reply(call("nope", "n1")), reply(call("wire", "w1", to="a", amount=1))]
    end, _, _, store = await run_script(c, replies)
    # `n1` names no tool, so it could never run and records no intent.
    assert {i.call.id: i.completed for i in await store.intents(end.run_id)} == {"w1": False}
    rec = await cancel(c, end.run_id, store=store, reason="customer called")
    assert [m.content for m in rec.messages] == ["not executed: cancelled: customer called"]
    assert all(i.completed for i in await store.intents(end.run_id))


def approval_chart() -> Chart:
    @tool(retry="never", needs_approval=True)
    async def send(text: str) -> str:
        """Send a message."""
        CALLS.append((text, None))
        return "sent"

    @tool(retry="safe")
    async def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    return Chart(
        "desk",
        budget=Budget(max_steps=20),
        states=(State("s", tools=(send, look)), DONE),
        edges=(Edge("s", "done"),),
    )


async def test_a_rejected_call_completes_its_intent(db: Path) -> None:
    """The rejection event completes the intent of the rejected call, with its own seq, and
    the call never runs."""
    c = approval_chart()
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("send", "s1", text="hi"))])
    await start(c, store=store, model=model, run_id="r1")
    waiting = await run_to_end(c, "r1", store=store, model=model)
    assert waiting.state == "s.approve"
    rec = await reject(c, "r1", store=store, by="ops", reason="no")
    end = await run_to_end(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and CALLS == []
    (intent,) = await store.intents("r1")
    assert intent.completed and intent.completed_seq == rec.event.seq, intent


async def test_a_refused_call_completes_its_intent(db: Path) -> None:
    """A repeated call refused at the head of the queue in `act`, after its intent was
    recorded, has that intent completed by the refusal."""
    c = approval_chart()
    store = SQLiteStore(db)
    model = ScriptedModel(
        [reply(call("look", "l1", q="a")), reply(call("look", "l2", q="a")), FINISH]
    )
    await start(c, store=store, model=model, run_id="r1")
    end = await run_to_end(c, "r1", store=store, model=model)
    assert end.state == "done"
    refused = next(e for e in await store.events("r1") if e.refused)
    assert refused.call is not None and refused.call.id == "l2"
    intents = {i.call.id: i for i in await store.intents("r1")}
    assert intents["l2"].completed, (
        f"intent of l2 still open after the refusal at seq "
        f"{refused.seq} and the run ended: {intents['l2']}"
    )
