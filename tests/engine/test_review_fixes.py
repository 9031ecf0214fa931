"""Regressions found in review: typed contexts, constraints, typed tool arguments, edits."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    Facts,
    MemoryStore,
    RunError,
    ScriptedModel,
    Session,
    State,
    ToolCall,
    UndeclaredFieldError,
    approve,
    call,
    cancel,
    reply,
    start,
    step,
    tool,
)
from statechart.engine import compiled
from tests.support.helpers import run_script, tool_results

pytestmark = pytest.mark.anyio
DONE = State("done", kind="terminal")


class Address(BaseModel):
    city: str


class Ctx(BaseModel):
    ticket_id: str
    addr: Address | None = None
    priority: int = Field(default=3, ge=1, le=5)
    ok: bool = False


def in_paris(f: Facts) -> str | None:
    ctx = f.context
    assert isinstance(ctx, Ctx)
    return None if ctx.addr is not None and ctx.addr.city == "Paris" else "not in Paris"


async def test_guards_see_a_typed_context_and_writes_keep_constraints() -> None:
    c = Chart(
        "g",
        context=Ctx,
        budget=Budget(max_steps=20),
        states=(State("s", writes=("addr", "priority")), DONE),
        edges=(Edge("s", "done", guard=in_paris),),
    )
    replies = [
        reply(call("next_state", "p", target="done", priority=99)),
        reply(call("next_state", "l", target="done", addr={"city": "Lyon"})),
        reply(call("next_state", target="done", addr={"city": "Paris"}, priority=5)),
    ]
    end, steps, _, _ = await run_script(c, replies, {"ticket_id": "T-1"})
    results = tool_results(steps)
    assert "priority: Input should be less than or equal to 5" in results["p"]
    assert "edge s->done refused: not in Paris" in results["l"]
    assert end.state == "done"
    assert end.context == {
        "ticket_id": "T-1",
        "addr": {"city": "Paris"},
        "priority": 5,
        "ok": False,
    }


async def test_handlers_get_typed_context_and_may_patch_with_required_fields_set() -> None:
    async def check(ctx: Ctx) -> Decision:
        return Decision("done", {"ok": ctx.ticket_id.startswith("T-")})

    c = Chart(
        "h",
        context=Ctx,
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=check, writes=("ok",)), DONE),
        edges=(Edge("check", "done"),),
    )
    end, _, _, _ = await run_script(c, [], {"ticket_id": "T-9"})
    assert end.state == "done" and end.context["ok"] is True


async def test_a_handler_returning_junk_escalates_instead_of_raising() -> None:
    async def broken(ctx: Ctx) -> Decision:
        return None  # type: ignore[return-value]

    c = Chart(
        "h",
        context=Ctx,
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=broken), DONE),
        edges=(Edge("check", "done"),),
    )
    end, steps, _, _ = await run_script(c, [], {"ticket_id": "T-9"})
    assert end.state == "escalated"
    assert "returned None; return a Decision" in steps[-1].event.reason


class Order(BaseModel):
    sku: str
    qty: int


PLACED: list[Order] = []
FLAKY = {"left": 1}


@tool(retry="safe")
def place(order: Order) -> str:
    """Place an order."""
    PLACED.append(order)
    return f"placed {order.qty} x {order.sku}"


@tool(retry="safe")
def flaky(q: str) -> str:
    """Fails once."""
    if FLAKY["left"]:
        FLAKY["left"] -= 1
        raise TimeoutError("upstream slow")
    return "ok"


def tools_chart() -> Chart:
    return Chart(
        "t",
        budget=Budget(max_steps=20),
        states=(State("s", tools=(place, flaky)), DONE),
        edges=(Edge("s", "done"),),
    )


async def test_tools_get_typed_arguments_and_a_failed_call_may_be_retried() -> None:
    PLACED.clear()
    FLAKY["left"] = 1
    replies = [
        reply(call("place", "o", order={"sku": "A1", "qty": "2"})),
        reply(call("flaky", "f1", q="x")),
        reply(call("flaky", "f2", q="x")),
        reply(call("next_state", target="done")),
    ]
    end, steps, _, store = await run_script(tools_chart(), replies)
    results = tool_results(steps)
    assert results["o"] == "placed 2 x A1"
    assert [Order(sku="A1", qty=2)] == PLACED
    assert results["f1"].startswith("error: tool 'flaky' failed: TimeoutError")
    assert results["f2"] == "ok"
    assert len(await store.fingerprints(end.run_id)) == 2  # the failed call left none


@tool(retry="never", needs_approval=True)
def wire(to: str, amount: int) -> str:
    """Wire money."""
    return f"wired {amount} to {to}"


async def test_edits_keep_raw_json_arguments_and_need_a_pending_call() -> None:
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


async def test_intents_complete_when_refused_rejected_or_cancelled() -> None:
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
    assert [m.content for m in rec.delta] == ["not executed: cancelled: customer called"]
    assert all(i.completed for i in await store.intents(end.run_id))


def spent_then_capped() -> Chart:
    return Chart(
        "x",
        budget=Budget(max_steps=30),
        states=(
            State("a", budget=Budget(max_model_calls=1), on_exhausted="b"),
            State("b", max_visits=1),
            DONE,
        ),
        edges=(Edge("a", "b"), Edge("b", "a", max_traversals=1), Edge("b", "done")),
    )


async def test_exhaustion_routing_respects_max_visits() -> None:
    replies = [
        reply(call("next_state", target="b")),
        reply(call("next_state", target="a")),
        reply(content="thinking"),
    ]
    end, steps, _, _ = await run_script(spent_then_capped(), replies)
    last = steps[-1].event
    assert last.exhausted == "a:model_calls" and "'b' is at its max_visits" in last.reason
    assert end.state == "escalated" and end.visits["b"] == 1


async def test_a_store_round_trip_after_evolve_keeps_every_field() -> None:
    end, steps, _, _ = await run_script(tools_chart(), [reply(call("next_state", target="done"))])
    for s in steps:
        dumped = s.run.model_dump(exclude_unset=True)
        assert type(s.run).model_validate(dumped) == s.run


async def test_bad_edits_are_refused_and_change_nothing() -> None:
    c = Chart(
        "w",
        budget=Budget(max_steps=20),
        states=(State("pay", tools=(wire,)), DONE),
        edges=(Edge("pay", "done"),),
    )
    end, _, _, store = await run_script(c, [reply(call("wire", "w1", to="a", amount=1))])
    with pytest.raises(RunError, match="amount: Input should be a valid integer"):
        await approve(c, end.run_id, store=store, by="cfo", edits={"amount": "lots"})
    assert await store.load(end.run_id) == end
    rec = await approve(c, end.run_id, store=store, by="cfo", edits={"amount": "7"})
    assert rec.event.call is not None and rec.event.call.arguments == {"to": "a", "amount": 7}
    proposed, intent = await store.intents(end.run_id)  # the edit is recorded again
    assert intent.call.arguments == {"to": "a", "amount": 7} and not intent.completed
    assert proposed.completed_seq == rec.event.seq and proposed.key != intent.key


async def test_a_cancel_while_a_call_may_run_leaves_its_intent_open() -> None:
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
    assert rec.delta[0].content == "cancelled: stop; this call may have started"
    [intent] = await store.intents(run.run_id)
    assert intent.call.id == "f1" and not intent.completed


async def test_decisions_with_bad_fields_escalate() -> None:
    async def odd(ctx: Ctx) -> Decision:
        return Decision("done", reason=42)  # type: ignore[arg-type]

    c = Chart(
        "h",
        context=Ctx,
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=odd), DONE),
        edges=(Edge("check", "done"),),
    )
    end, steps, _, _ = await run_script(c, [], {"ticket_id": "T-9"})
    assert end.state == "escalated" and "return a Decision" in steps[-1].event.reason
    for s in steps:
        assert (
            s.event.model_dump_json()
            == type(s.event).model_validate_json(s.event.model_dump_json()).model_dump_json()
        )


def test_sub_chart_fields_must_be_typed_like_the_root() -> None:
    class Loose(BaseModel):
        ticket_id: int = 0

    def child() -> Chart:
        return Chart(
            "inner",
            context=Loose,
            states=(State("x", writes=("ticket_id",)), DONE),
            edges=(Edge("x", "done"),),
        )

    c = Chart(
        "c",
        context=Ctx,
        budget=Budget(max_steps=5),
        states=(State("sub", kind="chart", chart=child, exits={"done": "done"}), DONE),
    )
    with pytest.raises(UndeclaredFieldError, match="types context field 'ticket_id'"):
        _ = compiled(c)


def test_context_fields_may_not_have_aliases() -> None:
    class Aliased(BaseModel):
        n: int = Field(default=0, alias="N")

    with pytest.raises(UndeclaredFieldError, match="has alias 'N'"):
        Chart(
            "c",
            context=Aliased,
            states=(State("s", writes=("n",)), DONE),
            edges=(Edge("s", "done"),),
        )
