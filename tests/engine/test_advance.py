"""Model states as capped ReAct loops: what the model is offered and what is refused."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    Facts,
    ModelError,
    State,
    ToolCall,
    Usage,
    call,
    reply,
    tool,
)
from statechart.records.codec import decode, encode
from statechart.records.run import Event
from tests.support.helpers import run_script, tool_results
from tests.support.typed import DONE, FLAKY, PLACED, Order, TicketCtx, tools_chart

pytestmark = pytest.mark.anyio


class Ctx(BaseModel):
    ticket: str = ""
    summary: str | None = None
    secret: str = "hidden"


@tool(retry="safe")
async def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return f"kb:{query}"


@tool(retry="safe")
async def explode(x: int) -> str:
    """Always fails."""
    raise RuntimeError("backend down")


@tool(retry="never")
async def send_reply(text: str) -> str:
    """Send the reply."""
    return "sent"


def summary_set(f: Facts) -> str | None:
    return None if getattr(f.context, "summary", None) else "write a summary before drafting"


def chart(**research: object) -> Chart:
    opts: dict[str, object] = {
        "tools": (search_kb, explode),
        "reads": ("ticket",),
        "writes": ("summary",),
        "instructions": "Research the ticket.",
    }
    opts.update(research)
    return Chart(
        "t",
        states=(
            State("research", **opts),  # type: ignore[arg-type]
            State("draft", tools=(send_reply,)),
            State("done", kind="terminal"),
        ),
        edges=(Edge("research", "draft", guard=summary_set), Edge("draft", "done")),
        context=Ctx,
        budget=Budget(max_steps=60),
    )


def finish() -> list:  # type: ignore[type-arg]
    return [
        reply(call("next_state", target="draft", summary="s")),
        reply(call("next_state", target="done")),
    ]


async def test_model_sees_only_its_tools_reads_and_this_visit() -> None:
    end, steps, model, _ = await run_script(
        chart(), [reply(call("search_kb", query="q")), *finish()], {"ticket": "T-1"}
    )
    first = model.requests[0]
    assert first.state == "research" and first.instructions == "Research the ticket."
    assert first.context == {"ticket": "T-1"}
    assert [t.name for t in first.tools] == ["search_kb", "explode", "next_state"]
    nxt = first.tools[-1].parameters
    assert nxt["properties"]["target"]["enum"] == ["draft", "escalated"]
    assert "summary" in nxt["properties"]
    assert first.tool_choice == "required"
    # the draft state's first request starts a fresh transcript with draft's tools
    draft = model.requests[2]
    assert draft.state == "draft" and draft.transcript == ()
    assert [t.name for t in draft.tools] == ["send_reply", "next_state"]
    assert end.state == "done"


async def test_disallowed_tool_is_refused_back_to_the_model() -> None:
    end, steps, model, store = await run_script(
        chart(), [reply(call("send_reply", "c1", text="hi")), *finish()]
    )
    refused = [s for s in steps if s.refused]
    assert len(refused) == 1
    ev = refused[0].event
    assert ev.source == "research.act" and ev.target == "research.think"
    assert "tool 'send_reply' is not available in state 'research'" in str(ev.refused)
    assert tool_results(steps)["c1"].startswith("refused: tool 'send_reply'")
    assert model.requests[1].transcript[-1].content.startswith("refused:")
    assert end.state == "done"


async def test_bad_and_malformed_arguments_are_error_results() -> None:
    bad = reply(call("search_kb", "c1", query=None))
    raw = reply(ToolCall(id="c2", name="search_kb", arguments='{"query": '))
    _, steps, _, _ = await run_script(chart(), [bad, raw, *finish()])
    results = tool_results(steps)
    expected = "bad arguments for tool 'search_kb': query: Input should be a valid string"
    assert expected in results["c1"]
    assert "not valid JSON" in results["c2"]


async def test_raw_json_arguments_are_parsed() -> None:
    raw = reply(ToolCall(id="c1", name="search_kb", arguments=json.dumps({"query": "z"})))
    _, steps, _, _ = await run_script(chart(), [raw, *finish()])
    assert tool_results(steps)["c1"] == "kb:z"


async def test_calls_queue_one_act_step_each_and_next_state_beside_them_is_not_taken() -> None:
    r = reply(
        call("next_state", "n1", target="draft", summary="s"),
        call("search_kb", "a", query="1"),
        call("search_kb", "b", query="2"),
    )
    leave = reply(call("next_state", "n2", target="draft", summary="s"))
    end, steps, model, _ = await run_script(
        chart(), [r, leave, reply(call("next_state", target="done"))]
    )
    moves = [(s.event.trigger, s.event.source, s.event.target) for s in steps]
    assert moves[:5] == [
        ("propose", "research.think", "research.act"),
        ("next_call", "research.act", "research.act"),
        ("results", "research.act", "research.think"),
        ("propose", "research.think", "research.act"),
        ("go:draft", "research.act", "draft.think"),
    ]
    assert [s.event.call.id for s in steps[1:3] if s.event.call] == ["a", "b"]
    results = tool_results(steps)
    assert results["n1"].startswith("not taken: next_state came with other calls")
    assert (results["a"], results["b"]) == ("kb:1", "kb:2")
    seen = {m.tool_call_id: m.content for m in model.requests[1].transcript if m.role == "tool"}
    assert seen == {"n1": results["n1"], "a": "kb:1", "b": "kb:2"}
    assert steps[3].run.visit is not None and steps[3].run.visit.iterations == 2
    assert end.state == "done"


async def test_on_the_last_iteration_next_state_beside_other_calls_is_taken() -> None:
    r = reply(
        call("search_kb", "a", query="1"), call("next_state", "n", target="draft", summary="s")
    )
    end, steps, model, _ = await run_script(
        chart(max_iterations=1), [r, reply(call("next_state", target="done"))]
    )
    results = tool_results(steps)
    assert (
        results["a"]
        == "not executed: only next_state is offered on the last call of state 'research'"
    )
    assert [t.name for t in model.requests[0].tools] == ["next_state"]
    assert [s.event.trigger for s in steps[:2]] == ["propose", "go:draft"]
    assert end.state == "done"


async def test_a_refusal_stops_the_queue_and_the_rest_get_not_executed() -> None:
    r = reply(
        call("send_reply", "x", text="no"),
        call("search_kb", "y", query="1"),
        call("next_state", "z", target="draft", summary="s"),
    )
    _, steps, _, _ = await run_script(chart(), [r, *finish()])
    results = tool_results(steps)
    assert results["x"].startswith("refused:")
    assert results["y"].startswith("not executed") and results["z"].startswith("not taken")
    assert steps[1].run.state == "research.think" and steps[1].run.pending == ()


async def test_text_only_reply_is_refused_and_counts_as_an_iteration() -> None:
    _, steps, model, _ = await run_script(chart(), [reply(content="thinking..."), *finish()])
    first = steps[0]
    assert first.event.trigger == "reply" and first.event.target == "research.think"
    assert "called no tool" in str(first.refused)
    assert first.run.visit is not None and first.run.visit.iterations == 1
    assert [m.role for m in model.requests[1].transcript] == ["assistant", "user"]


async def test_last_iteration_offers_only_next_state_then_exhaustion() -> None:
    replies = [reply(call("search_kb", query=str(i))) for i in range(3)]
    end, steps, model, _ = await run_script(chart(max_iterations=3), replies)
    assert [t.name for t in model.requests[1].tools] == ["search_kb", "explode", "next_state"]
    assert [t.name for t in model.requests[2].tools] == ["next_state"]
    assert "only next_state is offered" in str(steps[-2].refused)
    assert steps[-1].event.exhausted == "research:iterations"
    assert end.state == "escalated" and end.status == "ended"
    assert len(model.requests) == 3


async def test_last_iteration_can_still_leave() -> None:
    replies = [
        reply(call("search_kb", query="1")),
        reply(call("next_state", target="draft", summary="s")),
        reply(call("next_state", target="done")),
    ]
    end, _, model, _ = await run_script(chart(max_iterations=2), replies)
    assert [t.name for t in model.requests[1].tools] == ["next_state"]
    assert end.state == "done"


async def test_per_tool_call_cap_per_visit() -> None:
    replies = [reply(call("search_kb", f"c{i}", query=str(i))) for i in range(4)]
    _, steps, _, _ = await run_script(chart(max_calls={"search_kb": 3}), [*replies, *finish()])
    results = tool_results(steps)
    assert [results[f"c{i}"] for i in range(3)] == ["kb:0", "kb:1", "kb:2"]
    assert "already called 3 times in this visit of 'research' (max_calls=3)" in results["c3"]


async def test_repeated_call_is_refused_unless_repeatable() -> None:
    again = [
        reply(call("search_kb", "a", query="same")),
        reply(call("search_kb", "b", query="same")),
    ]
    _, steps, _, _ = await run_script(chart(), [*again, *finish()])
    assert "already ran with these arguments" in tool_results(steps)["b"]

    @tool(retry="safe", repeatable=True)
    async def poll(job: str) -> str:
        """Poll a job."""
        return "pending"

    twice = [reply(call("poll", "a", job="j")), reply(call("poll", "b", job="j"))]
    _, steps, _, _ = await run_script(chart(tools=(poll,)), [*twice, *finish()])
    assert tool_results(steps) == {"a": "pending", "b": "pending", **_moved(steps)}


def _moved(steps: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {k: v for k, v in tool_results(steps).items() if v.startswith("moved")}


async def test_guard_refusal_goes_back_to_the_model_and_sees_the_patch() -> None:
    replies = [
        reply(call("next_state", "n1", target="draft")),
        reply(call("next_state", "n2", target="draft", summary="ok")),
        reply(call("next_state", target="done")),
    ]
    end, steps, _, store = await run_script(chart(), replies)
    results = tool_results(steps)
    assert "edge research->draft refused: write a summary before drafting" in results["n1"]
    assert results["n2"] == "moved to 'draft'"
    events = await store.events(end.run_id)
    assert events[1].refused is not None and events[1].target == "research.think"
    assert end.context["summary"] == "ok"


async def test_illegal_target_lists_the_legal_ones() -> None:
    replies = [reply(call("next_state", "n1", target="done")), *finish()]
    _, steps, _, _ = await run_script(chart(), replies)
    assert "Input should be 'draft' or 'escalated'" in tool_results(steps)["n1"]


async def test_tool_failure_is_an_error_result_not_a_crash() -> None:
    _, steps, _, _ = await run_script(chart(), [reply(call("explode", "e", x=1)), *finish()])
    assert tool_results(steps)["e"] == "error: tool 'explode' failed: RuntimeError: backend down"
    assert steps[1].event.error == "RuntimeError: backend down"


async def test_model_failure_escalates_with_the_reason() -> None:
    end, steps, _, _ = await run_script(chart(), [])
    assert end.state == "escalated" and end.status == "ended"
    assert "model call failed in state 'research'" in steps[-1].event.reason
    assert ModelError.__name__ in str(steps[-1].event.error)


async def test_visits_cap_and_self_loop_starts_a_fresh_visit() -> None:
    c = Chart(
        "loop",
        states=(State("work", tools=(search_kb,), max_visits=2), State("done", kind="terminal")),
        edges=(Edge("work", "work"), Edge("work", "done")),
        budget=Budget(max_steps=30),
    )
    replies = [
        reply(call("search_kb", query="a")),
        reply(call("next_state", target="work")),
        reply(call("next_state", "n", target="work")),
        reply(call("next_state", target="done")),
    ]
    end, steps, model, _ = await run_script(c, replies)
    assert model.requests[2].transcript == ()  # a new visit starts with an empty transcript
    assert "state 'work' was already visited 2 time(s) (max_visits=2)" in tool_results(steps)["n"]
    assert end.visits["work"] == 2 and end.state == "done"


async def test_usage_is_charged_per_call() -> None:
    u = Usage(input_tokens=10, output_tokens=5, cost_micros=7)
    replies = [
        reply(call("search_kb", query="a"), usage=u),
        reply(call("next_state", target="draft", summary="s"), usage=u),
        reply(call("next_state", target="done"), usage=u),
    ]
    end, steps, _, _ = await run_script(chart(), replies)
    root = end.ledger["root"]
    assert (root.input_tokens, root.output_tokens, root.cost_micros) == (30, 15, 21)
    assert root.model_calls == 3 and root.tool_calls == 1 and root.steps == len(steps)


async def test_next_state_cannot_write_null_into_a_typed_field() -> None:
    class Strict(BaseModel):
        count: int = 0

    c = Chart(
        "strict",
        states=(State("s", writes=("count",)), State("done", kind="terminal")),
        edges=(Edge("s", "done"),),
        context=Strict,
        budget=Budget(max_steps=9),
    )
    replies = [
        reply(call("next_state", "n1", target="done", count=None)),
        reply(call("next_state", target="done", count=3)),
    ]
    end, steps, _, _ = await run_script(c, replies)
    assert "count: Input should be a valid integer" in tool_results(steps)["n1"]
    assert end.context == {"count": 3}


# -- typed contexts, code-state handlers and typed tool arguments ---------------------------


def in_paris(f: Facts) -> str | None:
    ctx = f.context
    assert isinstance(ctx, TicketCtx)
    return None if ctx.addr is not None and ctx.addr.city == "Paris" else "not in Paris"


async def test_guards_see_a_typed_context_and_writes_keep_constraints() -> None:
    """Guards get the context as its pydantic type (nested models included), and a
    `next_state` write that breaks a field constraint is refused back to the model."""
    c = Chart(
        "g",
        context=TicketCtx,
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
    """A code state's handler gets the typed context, and its Decision may patch a context
    whose type has required fields."""

    async def check(ctx: TicketCtx) -> Decision:
        return Decision("done", {"ok": ctx.ticket_id.startswith("T-")})

    c = Chart(
        "h",
        context=TicketCtx,
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=check, writes=("ok",)), DONE),
        edges=(Edge("check", "done"),),
    )
    end, _, _, _ = await run_script(c, [], {"ticket_id": "T-9"})
    assert end.state == "done" and end.context["ok"] is True


async def test_a_handler_returning_junk_escalates_instead_of_raising() -> None:
    """A handler that returns something other than a Decision escalates the run with a
    reason saying so; the drive does not raise."""

    async def broken(ctx: TicketCtx) -> Decision:
        return None  # type: ignore[return-value]

    c = Chart(
        "h",
        context=TicketCtx,
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=broken), DONE),
        edges=(Edge("check", "done"),),
    )
    end, steps, _, _ = await run_script(c, [], {"ticket_id": "T-9"})
    assert end.state == "escalated"
    assert "returned None; return a Decision" in steps[-1].event.reason


async def test_decisions_with_bad_fields_escalate() -> None:
    """A Decision with a field of the wrong type escalates, and every event of the run still
    round-trips through JSON."""

    async def odd(ctx: TicketCtx) -> Decision:
        return Decision("done", reason=42)  # type: ignore[arg-type]

    c = Chart(
        "h",
        context=TicketCtx,
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=odd), DONE),
        edges=(Edge("check", "done"),),
    )
    end, steps, _, _ = await run_script(c, [], {"ticket_id": "T-9"})
    assert end.state == "escalated" and "return a Decision" in steps[-1].event.reason
    for s in steps:
        assert encode(decode(Event, encode(s.event))) == encode(s.event)


async def test_tools_get_typed_arguments_and_a_failed_call_may_be_retried() -> None:
    """A tool whose parameter is a pydantic model gets it parsed (and coerced); a call that
    raised leaves no fingerprint, so the same call may be retried."""
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
