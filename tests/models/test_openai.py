"""The OpenAI adapter against a real HTTP server on 127.0.0.1 that speaks chat completions
(the official SDK pointed at it by base URL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from statechart import Budget, Chart, Edge, MemoryStore, Retry, State, run_to_end, start, tool
from statechart.io.loading import load_chart
from statechart.models.openai import OpenAIModel
from statechart.models.pricing import Price
from statechart.records.messages import Request, ToolSpec
from tests.support.cli import AGENT
from tests.support.provider_server import Provider, serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the openai SDK's async client needs asyncio


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as found:
        yield found


class Ctx(BaseModel):
    question: str = ""
    answer: str | None = None


@tool(retry="safe")
def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return f"KB-12 answers {query}"


def chart() -> Chart:
    return Chart(
        "qa",
        context=Ctx,
        budget=Budget(max_steps=20),
        states=(
            State(
                "research",
                tools=(search_kb,),
                reads=("question",),
                writes=("answer",),
                instructions="Answer from the knowledge base.",
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("research", "done"),),
    )


def leaving() -> Request:
    """A request offering only `next_state`, for an adapter's `complete` alone."""
    return Request(
        state="s",
        instructions="",
        context={},
        transcript=(),
        tools=(ToolSpec(name="next_state", description="leave", parameters={"type": "object"}),),
    )


def completion(
    *calls: tuple[str, str, str], content: str | None = None, tokens: tuple[int, int] = (100, 20)
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "tiny-1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": args},
                        }
                        for cid, name, args in calls
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "total_tokens": sum(tokens),
        },
    }


def model(provider: Provider, retries: int = 0) -> OpenAIModel:
    return OpenAIModel(
        "tiny-1",
        base_url=f"{provider.url}/v1",
        api_key="test",
        max_retries=retries,
        timeout=10,
        prices={"tiny-1": Price(1_000_000, 2_000_000)},
    )


async def drive(provider: Provider, retries: int = 0) -> Any:
    c, store = chart(), MemoryStore()
    m = model(provider, retries)
    run = await start(c, store=store, model=m, context={"question": "refunds?"})
    end = await run_to_end(c, run, store=store, model=m)
    return end, await store.events(end.run_id)


async def test_a_full_run_sends_the_states_tools_and_records_usage(provider: Provider) -> None:
    provider.answer(completion(("c1", "search_kb", '{"query": "refunds"}')))
    provider.answer(completion(("c2", "next_state", '{"target": "done", "answer": "5 days"}')))
    end, events = await drive(provider)
    assert end.state == "done" and end.context["answer"] == "5 days"
    first, second = provider.bodies()
    assert [p for p, _ in provider.requests] == ["/v1/chat/completions"] * 2
    assert first["model"] == "tiny-1" and first["tool_choice"] == "required"
    assert first["parallel_tool_calls"] is False
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(offered) == {"search_kb", "next_state"}
    assert offered["search_kb"]["parameters"]["required"] == ["query"]
    assert offered["next_state"]["parameters"]["properties"]["target"]["enum"] == [
        "done",
        "escalated",
    ]
    assert first["messages"][0] == {"role": "system", "content": "Answer from the knowledge base."}
    assert json.loads(first["messages"][1]["content"].removeprefix("Context: ")) == {
        "question": "refunds?"
    }
    # the second request carries the first call and its result, in the provider's format
    assert second["messages"][2]["tool_calls"][0]["function"] == {
        "name": "search_kb",
        "arguments": '{"query": "refunds"}',
    }
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "KB-12 answers refunds",
    }
    assert end.ledger["root"].input_tokens == 200 and end.ledger["root"].output_tokens == 40
    assert end.ledger["root"].cost_micros == 2 * (100 + 2 * 20)  # 1 and 2 $ per M tokens
    assert events[0].usage.model_calls == 1


async def test_a_429_is_retried_by_the_sdk_then_succeeds(provider: Provider) -> None:
    provider.answer({"error": {"message": "slow down", "type": "rate_limit"}}, status=429)
    provider.answer(completion(("c1", "next_state", '{"target": "done"}')))
    end, _ = await drive(provider, retries=2)
    assert end.state == "done" and len(provider.requests) == 2


async def test_by_default_each_attempt_is_one_request_and_one_event(provider: Provider) -> None:
    """The SDK retries nothing by default: a 429 is a failed attempt the run records, and
    the state's `Retry` makes the next request."""
    provider.answer({"error": {"message": "slow down", "type": "rate_limit"}}, status=429)
    provider.answer(completion(("c1", "next_state", '{"target": "done"}')))
    c = chart()
    research = replace(c.states[0], retries=Retry(attempts=2, initial=0.01, jitter=0))
    c = c.replace_state("research", research)
    store = MemoryStore()
    m = OpenAIModel("tiny-1", base_url=f"{provider.url}/v1", api_key="test", timeout=10)
    end = await run_to_end(c, await start(c, store=store, model=m), store=store, model=m)
    events = await store.events(end.run_id)
    assert end.state == "done" and len(provider.requests) == 2
    assert [e.trigger for e in events] == ["retry", "wake", "propose", "go:done"]
    assert (events[0].error or "").startswith("RateLimitError")


async def test_a_500_escalates_with_the_reason(provider: Provider) -> None:
    provider.answer({"error": {"message": "upstream broke", "type": "server"}}, status=500)
    end, events = await drive(provider, retries=0)
    assert end.state == "escalated"
    assert "model call failed in state 'research'" in events[-1].reason
    assert "InternalServerError" in (events[-1].error or "")


async def test_malformed_arguments_go_back_to_the_model(provider: Provider) -> None:
    provider.answer(completion(("c1", "search_kb", '{"query": "refu')))
    provider.answer(completion(("c2", "next_state", '{"target": "done"}')))
    end, events = await drive(provider)
    assert end.state == "done"
    refused = [e for e in events if e.refused]
    assert "not valid JSON" in (refused[0].refused or "")
    told = provider.bodies()[1]["messages"][-1]
    assert told["role"] == "tool" and "not valid JSON" in told["content"]


async def test_a_reply_with_no_choices_escalates(provider: Provider) -> None:
    provider.answer(
        {"id": "x", "object": "chat.completion", "created": 0, "model": "tiny-1", "choices": []}
    )
    end, events = await drive(provider)
    assert end.state == "escalated" and "no choices" in events[-1].reason


def test_the_spec_builds_the_adapter_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from statechart.models import from_spec

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    found = from_spec("openai:tiny-1")
    assert isinstance(found, OpenAIModel) and found.spec == "openai:tiny-1"
    assert str(found.client.base_url) == "http://127.0.0.1:9/v1/"


async def test_each_state_offers_exactly_its_own_tools(
    provider: Provider, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refund desk through the adapter: classify offers only next_state, gather its
    lookup, resolve its refund; the approval wait and verify happen in between."""
    from pathlib import Path

    from statechart import approve
    from statechart.io.loading import load_chart

    monkeypatch.setenv("REFUND_DESK_BANK", str(tmp_path / "bank.db"))
    path = Path(__file__).resolve().parents[2] / "agents" / "refund_desk.py"
    desk_chart, desk = load_chart(f"{path}:chart")
    desk.BANK = str(tmp_path / "bank.db")
    for answer in [
        completion(("c1", "next_state", '{"target": "gather", "category": "billing"}')),
        completion(("c2", "lookup_order", '{"order_id": "A-7"}')),
        completion(("c3", "next_state", '{"target": "resolve", "facts": "charged twice"}')),
        completion(("c4", "issue_refund", '{"order_id": "A-7", "amount_cents": 2000}')),
        completion(("c5", "next_state", '{"target": "verify", "resolution": "refunded"}')),
    ]:
        provider.answer(answer)
    store, m = MemoryStore(), model(provider)
    run = await start(desk_chart, store=store, model=m, context={"order_id": "A-7"})
    waiting = await run_to_end(desk_chart, run, store=store, model=m)
    assert waiting.state == "resolve.approve"
    await approve(desk_chart, run.run_id, store=store, by="cfo")
    end = await run_to_end(desk_chart, run.run_id, store=store, model=m)
    assert end.state == "done"
    offered = [sorted(t["function"]["name"] for t in body["tools"]) for body in provider.bodies()]
    assert offered == [
        ["next_state"],
        ["lookup_order", "next_state"],
        ["lookup_order", "next_state"],
        ["issue_refund", "next_state"],
        ["issue_refund", "next_state"],
    ]
    targets = [
        next(
            t["function"]["parameters"]["properties"]["target"]["enum"]
            for t in body["tools"]
            if t["function"]["name"] == "next_state"
        )
        for body in provider.bodies()
    ]
    assert targets[0] == ["gather", "resolve", "needs_human", "escalated"]
    assert targets[-1] == ["verify", "failed", "escalated"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_max_tokens_sent_to_gpt_4o_mini_is_within_its_output_limit(
    provider: Provider, anyio_backend: str
) -> None:
    """The per-call output cap sent to gpt-4o-mini (what the budget has left, 50,000 for
    support_triage) is within the model's 16,384 completion-token limit, or not sent."""
    chart, _ = load_chart(AGENT)
    provider.answer({"error": {"message": "stop here", "type": "test"}}, status=500)
    model = OpenAIModel(
        "gpt-4o-mini", base_url=f"{provider.url}/v1", api_key="test", max_retries=0, timeout=10
    )
    store = MemoryStore()
    run = await start(chart, store=store, model=model, context={"ticket_id": "T-1001"})
    await run_to_end(chart, run, store=store, model=model)
    first = provider.bodies()[0]
    assert first.get("max_tokens") is None or first["max_tokens"] <= 16_384, first["max_tokens"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_dated_snapshot_of_a_priced_model_is_not_free(
    provider: Provider, anyio_backend: str
) -> None:
    """A dated snapshot of a priced model (`gpt-4o-mini-2024-07-18`) is charged at its base
    model's price, so `max_cost_micros` still applies."""
    provider.answer(completion(("c1", "next_state", '{"target": "done"}'), tokens=(1_000_000, 0)))
    model = OpenAIModel(
        "gpt-4o-mini-2024-07-18",
        base_url=f"{provider.url}/v1",
        api_key="test",
        max_retries=0,
        timeout=10,
    )
    got = await model.complete(leaving())
    assert got.usage.cost_micros == 150_000  # gpt-4o-mini's input price, $0.15 per M
    assert got.finish_reason == "tool_calls"  # the provider's own word, for the chat span


async def test_a_reply_without_usage_is_estimated_marked_and_still_binds_a_budget(
    provider: Provider,
) -> None:
    """No `usage` in the reply: the event says so, the call is charged a conservative
    estimate from what was sent and received (never 0), and a token budget stops the run."""
    for i in range(5):
        body = completion((f"c{i}", "search_kb", json.dumps({"query": f"q{i}"})))
        del body["usage"]
        provider.answer(body)
    c = chart()
    c = Chart(
        c.name,
        states=c.states,
        edges=c.edges,
        context=c.context,
        budget=Budget(max_steps=20, max_tokens=700),
    )
    store, m = MemoryStore(), model(provider)
    end = await run_to_end(
        c, await start(c, store=store, model=m, context={"question": "q"}), store=store, model=m
    )
    events = await store.events(end.run_id)
    calls = [e for e in events if e.usage.model_calls]
    assert calls and all(e.usage_missing for e in calls)
    first = calls[0].usage
    sent = len(json.dumps(provider.bodies()[0]["messages"]))
    assert first.input_tokens >= sent // 4 and first.output_tokens > 0
    assert first.cost_micros == first.input_tokens + 2 * first.output_tokens
    assert end.state == "escalated" and events[-1].exhausted == "root:tokens"
    assert len(provider.requests) < 5


def test_a_strict_cost_cap_takes_only_a_models_own_price_or_a_dated_snapshots() -> None:
    """Charging may price a variant like its base model; a strict cost cap may not: an
    `-audio-preview` is not priced as `gpt-4o`, a dated snapshot is."""
    from statechart.errors import UnpricedModelError
    from statechart.models.anthropic import AnthropicModel

    assert (
        OpenAIModel("gpt-4o-2024-08-06", api_key="x").price
        == OpenAIModel("gpt-4o", api_key="x").price
    )
    assert OpenAIModel("gpt-4o-audio-preview", api_key="x").price is None
    assert AnthropicModel("claude-sonnet-4-5-20250929", api_key="x").price is not None
    assert AnthropicModel("claude-sonnet-4-5-latest", api_key="x").price is None
    c = chart()
    strict = Chart(
        c.name,
        states=c.states,
        edges=c.edges,
        context=c.context,
        budget=Budget(max_steps=20, max_cost_micros=1_000, strict=True),
    )
    with pytest.raises(UnpricedModelError, match="gpt-4o-audio-preview"):
        anyio_run_start(strict, OpenAIModel("gpt-4o-audio-preview", api_key="x"))


def anyio_run_start(c: Chart, m: OpenAIModel) -> None:
    import anyio

    anyio.run(lambda: start(c, store=MemoryStore(), model=m))
