"""The Anthropic adapter against a real HTTP server on 127.0.0.1 that speaks the messages
API (the official SDK pointed at it by base URL)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from statechart import MemoryStore, run_to_end, start
from statechart.models.anthropic import AnthropicModel
from statechart.models.pricing import Price
from tests.models.test_openai import chart, leaving
from tests.support.provider_server import Provider, serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the anthropic SDK's async client needs asyncio


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as found:
        yield found


def message(
    *calls: tuple[str, str, Any], text: str = "", tokens: tuple[int, int] = (100, 20)
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls
    ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "tiny-2",
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    }


async def drive(provider: Provider, retries: int = 0) -> Any:
    c, store = chart(), MemoryStore()
    m = AnthropicModel(
        "tiny-2",
        base_url=provider.url,
        api_key="test",
        max_retries=retries,
        timeout=10,
        prices={"tiny-2": Price(1_000_000, 2_000_000)},
    )
    run = await start(c, store=store, model=m, context={"question": "refunds?"})
    end = await run_to_end(c, run, store=store, model=m)
    return end, await store.events(end.run_id)


async def test_a_full_run_sends_the_states_tools_and_records_usage(provider: Provider) -> None:
    provider.answer(message(("t1", "search_kb", {"query": "refunds"}), text="Looking."))
    provider.answer(message(("t2", "next_state", {"target": "done", "answer": "5 days"})))
    end, _ = await drive(provider)
    assert end.state == "done" and end.context["answer"] == "5 days"
    first, second = provider.bodies()
    assert [p for p, _ in provider.requests] == ["/v1/messages"] * 2
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert first["system"] == "Answer from the knowledge base."
    assert first["max_tokens"] == 1024
    offered = {t["name"]: t for t in first["tools"]}
    assert set(offered) == {"search_kb", "next_state"}
    assert offered["search_kb"]["input_schema"]["required"] == ["query"]
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "search_kb", "input": {"query": "refunds"}},
        ],
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "KB-12 answers refunds"}
        ],
    }
    assert end.ledger["root"].input_tokens == 200 and end.ledger["root"].cost_micros == 280


async def test_a_429_is_retried_by_the_sdk_then_succeeds(provider: Provider) -> None:
    provider.answer(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, status=429
    )
    provider.answer(message(("t1", "next_state", {"target": "done"})))
    end, _ = await drive(provider, retries=2)
    assert end.state == "done" and len(provider.requests) == 2


async def test_a_500_escalates_with_the_reason(provider: Provider) -> None:
    provider.answer(
        {"type": "error", "error": {"type": "api_error", "message": "down"}}, status=500
    )
    end, events = await drive(provider)
    assert end.state == "escalated" and "InternalServerError" in (events[-1].error or "")


async def test_arguments_that_are_not_an_object_go_back_to_the_model(provider: Provider) -> None:
    provider.answer(message(("t1", "search_kb", "refunds")))
    provider.answer(message(("t2", "next_state", {"target": "done"})))
    end, events = await drive(provider)
    assert end.state == "done"
    assert "must be a JSON object" in (next(e.refused for e in events if e.refused) or "")


async def test_a_reply_with_no_content_is_refused_back_to_the_model(provider: Provider) -> None:
    provider.answer(message())
    provider.answer(message(("t1", "next_state", {"target": "done"})))
    end, events = await drive(provider)
    assert end.state == "done"
    assert "called no tool" in (events[0].refused or "")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_anthropic_never_sends_a_message_with_empty_content(
    provider: Provider, anyio_backend: str
) -> None:
    """After a reply with no content (refused back to the model), the next request carries no
    message with empty content and no empty text block, which the messages API rejects."""
    provider.answer(message())
    provider.answer(message(("t1", "next_state", {"target": "done"})))
    c, store = chart(), MemoryStore()
    m = AnthropicModel("tiny-2", base_url=provider.url, api_key="test", max_retries=0, timeout=10)
    run = await start(c, store=store, model=m, context={"question": "refunds?"})
    await run_to_end(c, run, store=store, model=m)
    second = provider.bodies()[1]
    for msg in second["messages"]:
        assert msg["content"], f"empty content: {msg}"
        for block in msg["content"]:
            if block["type"] == "text":
                assert block["text"].strip(), f"empty text block: {msg}"


async def test_a_reply_without_usage_keeps_its_tool_call_and_is_estimated(
    provider: Provider,
) -> None:
    """No `usage` in the reply: no AttributeError and no escalation; the tool call runs,
    the event says usage was missing, and an estimate is charged."""
    first = message(("t1", "search_kb", {"query": "refunds"}))
    del first["usage"]
    provider.answer(first)
    provider.answer(message(("t2", "next_state", {"target": "done", "answer": "5 days"})))
    end, events = await drive(provider)
    assert end.state == "done" and end.context["answer"] == "5 days"
    calls = [e for e in events if e.usage.model_calls]
    assert [e.usage_missing for e in calls] == [True, False]
    assert calls[0].usage.input_tokens > 0 and calls[0].usage.output_tokens > 0
    assert [e.result for e in events if e.trigger == "results"] == ["KB-12 answers refunds"]


async def test_the_reply_keeps_the_providers_stop_reason(provider: Provider) -> None:
    """`Reply.finish_reason` is what the provider said (the chat span's
    `gen_ai.response.finish_reasons`)."""
    provider.answer(message(("t1", "next_state", {"target": "done"})))
    m = AnthropicModel("tiny-2", base_url=provider.url, api_key="test", max_retries=0, timeout=10)
    got = await m.complete(leaving())
    assert (got.finish_reason, got.tool_calls[0].name) == ("tool_use", "next_state")
