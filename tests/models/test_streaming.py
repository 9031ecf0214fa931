"""The provider adapters' `stream()` against real HTTP servers on 127.0.0.1 sending
server-sent events (the official SDKs pointed at them by base URL), under `watch`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from statechart import MemoryStore, Run, Step, Token, run_to_end, start, watch
from statechart.models.anthropic import AnthropicModel
from statechart.models.openai import OpenAIModel
from statechart.models.pricing import Price
from statechart.records.live import CallStarted, LiveEvent, RunEnded
from tests.models.test_openai import chart
from tests.support.provider_server import SSE, Provider, serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDKs' async clients need asyncio


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as found:
        yield found


Call = tuple[str, str, Sequence[str]]  # id, tool, argument pieces


def openai_stream(
    text: Sequence[str] = (), calls: Sequence[Call] = (), usage: tuple[int, int] | None = (90, 12)
) -> SSE:
    """A chat completions stream: text deltas, then each call's id and name and its
    argument pieces, the finish reason, the usage chunk and `[DONE]`."""

    def chunk(choices: list[dict[str, Any]], **more: Any) -> tuple[None, dict[str, Any]]:
        return None, {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "tiny-1",
            "choices": choices,
            **more,
        }

    def delta(**d: Any) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": d, "finish_reason": None}]

    events = [chunk(delta(role="assistant", content=""))]
    events += [chunk(delta(content=piece)) for piece in text]
    for n, (cid, name, pieces) in enumerate(calls):
        head = {"index": n, "id": cid, "type": "function"}
        events.append(
            chunk(delta(tool_calls=[{**head, "function": {"name": name, "arguments": ""}}]))
        )
        events += [
            chunk(delta(tool_calls=[{"index": n, "function": {"arguments": p}}])) for p in pieces
        ]
    events.append(chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
    if usage is not None:
        tokens = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
        events.append(chunk([], usage={**tokens, "total_tokens": sum(usage)}))
    events.append((None, "[DONE]"))
    return SSE(events)


def anthropic_stream(text: Sequence[str] = (), calls: Sequence[Call] = ()) -> SSE:
    """A messages stream: message_start (input tokens), a text block of deltas, a
    tool_use block per call with its input_json_deltas, message_delta (output tokens)."""
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "tiny-2",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 80, "output_tokens": 1},
                },
            },
        )
    ]
    index = 0
    if text:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        events += [
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
            for piece in text
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for cid, name, pieces in calls:
        block = {"type": "tool_use", "id": cid, "name": name, "input": {}}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        events += [
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                },
            )
            for p in pieces
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 15},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return SSE(events)


def openai(provider: Provider) -> OpenAIModel:
    return OpenAIModel(
        "tiny-1",
        base_url=f"{provider.url}/v1",
        api_key="test",
        timeout=10,
        prices={"tiny-1": Price(1_000_000, 2_000_000)},
    )


def anthropic(provider: Provider) -> AnthropicModel:
    return AnthropicModel(
        "tiny-2",
        base_url=provider.url,
        api_key="test",
        timeout=10,
        prices={"tiny-2": Price(1_000_000, 2_000_000)},
    )


async def watched(model: Any) -> tuple[Run, list[LiveEvent]]:
    """Drive a run with `on=`: every event as it is made (no buffer joins tokens)."""
    c, store = chart(), MemoryStore()
    run = await start(c, store=store, model=model, context={"question": "refunds?"})
    seen: list[LiveEvent] = []
    end = await run_to_end(c, run, store=store, model=model, on=seen.append)
    return end, seen


def tokens(seen: list[LiveEvent], tool: str = "") -> list[str]:
    return [e.text for e in seen if isinstance(e, Token) and e.tool == tool]


async def test_openai_streams_text_and_argument_pieces_and_records_the_streams_usage(
    provider: Provider,
) -> None:
    provider.answer(
        openai_stream(["Let me ", "look."], [("c1", "search_kb", ['{"que', 'ry": "re', 'funds"}'])])
    )
    provider.answer(
        openai_stream(calls=[("c2", "next_state", ['{"target": "done", ', '"answer": "5 days"}'])])
    )
    end, seen = await watched(openai(provider))
    assert end.state == "done" and end.context["answer"] == "5 days"
    first, second = provider.bodies()
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["tool_choice"] == "required" and first["parallel_tool_calls"] is False
    assert tokens(seen) == ["Let me ", "look."]
    assert tokens(seen, "search_kb") == ['{"que', 'ry": "re', 'funds"}']
    assert tokens(seen, "next_state") == ['{"target": "done", ', '"answer": "5 days"}']
    steps = [e for e in seen if isinstance(e, Step)]
    proposed = [s for s in steps if s.event.trigger == "propose"]
    assert proposed[0].event.calls[0].arguments == {"query": "refunds"}
    assert proposed[0].messages[0].content == "Let me look."  # the reply, whole
    # the usage of the stream's last chunk is what the budget is charged
    assert end.ledger["root"].input_tokens == 180 and end.ledger["root"].output_tokens == 24
    assert not proposed[0].event.usage_missing
    assert isinstance(seen[-1], RunEnded)
    # the second request carries the streamed call back in the provider's format
    assert json.loads(second["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {
        "query": "refunds"
    }


async def test_a_token_arrives_before_the_stream_ends(provider: Provider) -> None:
    """Tokens are passed on as the server sends them, not once the reply is whole; a
    watching consumer that keeps up gets the pieces one by one, one that falls behind
    gets them joined."""
    slow = openai_stream(["one ", "two ", "three"], [("c1", "next_state", ['{"target": "done"}'])])
    provider.answer(SSE(slow.events, delay=0.15))
    c, store, model = chart(), MemoryStore(), openai(provider)
    run = await start(c, store=store, model=model, context={"question": "q"})
    async with watch(c, run, store=store, model=model) as events:
        async for event in events:
            if isinstance(event, Token):
                # the call's step is not stored yet when its first token arrives
                assert (await store.load(run.run_id)).snapshot.seq == 0
                assert not (await store.events(run.run_id))
                break


async def test_an_openai_stream_without_usage_is_estimated_and_marked(provider: Provider) -> None:
    provider.answer(openai_stream(calls=[("c1", "next_state", ['{"target": "done"}'])], usage=None))
    end, seen = await watched(openai(provider))
    (proposed, *_) = [e for e in seen if isinstance(e, Step)]
    assert end.state == "done" and proposed.event.usage_missing
    assert end.ledger["root"].input_tokens > 0  # a conservative estimate still binds


async def test_malformed_streamed_arguments_go_back_to_the_model(provider: Provider) -> None:
    provider.answer(openai_stream(calls=[("c1", "search_kb", ['{"query": ', "oops"])]))
    provider.answer(openai_stream(calls=[("c2", "next_state", ['{"target": "done"}'])]))
    end, seen = await watched(openai(provider))
    assert end.state == "done"
    refused = [e for e in seen if isinstance(e, Step) and e.event.refused]
    assert refused and "'search_kb' are not valid JSON" in (refused[0].event.refused or "")
    assert refused[0].event.call is not None
    assert refused[0].event.call.arguments == '{"query": oops'  # kept as sent


async def test_a_failing_stream_is_a_failed_call_and_the_run_escalates(provider: Provider) -> None:
    provider.answer({"error": {"message": "overloaded", "type": "server"}}, status=500)
    end, seen = await watched(openai(provider))
    assert end.state == "escalated"
    assert [e.kind for e in seen][:1] == ["call_started"]
    assert not [e for e in seen if isinstance(e, Token)]


async def test_anthropic_streams_text_and_input_json_and_records_usage(
    provider: Provider,
) -> None:
    provider.answer(
        anthropic_stream(["Checking ", "the KB."], [("t1", "search_kb", ['{"query"', ': "x"}'])])
    )
    provider.answer(anthropic_stream(calls=[("t2", "next_state", ['{"target": "done"}'])]))
    end, seen = await watched(anthropic(provider))
    assert end.state == "done"
    first, _ = provider.bodies()
    assert first["stream"] is True
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert tokens(seen) == ["Checking ", "the KB."]
    assert tokens(seen, "search_kb") == ['{"query"', ': "x"}']
    (started, *_) = [e for e in seen if isinstance(e, CallStarted)]
    assert started.call == "model" and started.name == "anthropic:tiny-2"
    proposed = [e for e in seen if isinstance(e, Step) and e.event.trigger == "propose"]
    assert proposed[0].event.calls[0].arguments == {"query": "x"}
    assert proposed[0].messages[0].content == "Checking the KB."
    # input tokens from message_start, output tokens from the last message_delta
    assert end.ledger["root"].input_tokens == 160 and end.ledger["root"].output_tokens == 30
    assert not proposed[0].event.usage_missing


async def test_an_anthropic_tool_call_with_no_input_deltas_has_empty_arguments(
    provider: Provider,
) -> None:
    provider.answer(anthropic_stream(calls=[("t1", "next_state", [])]))
    provider.answer(anthropic_stream(calls=[("t2", "next_state", ['{"target": "done"}'])]))
    end, seen = await watched(anthropic(provider))
    assert end.state == "done"
    proposed = [e for e in seen if isinstance(e, Step) and e.event.trigger == "propose"]
    assert proposed[0].event.calls[0].arguments == {}  # refused: no target given
