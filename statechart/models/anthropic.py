"""Anthropic messages through the official `anthropic` SDK (the `anthropic` extra).

The state's tools and `next_state` are offered with `tool_choice={"type": "any"}` and
parallel tool use disabled; tool results go back as `tool_result` blocks. Each call is
one request (`max_retries=0`: the SDK does not retry behind the run's back); retry with
`State(retries=Retry(...))`, so every attempt is an event. `timeout=` is the SDK's HTTP
timeout. A watched run streams (`stream()`: server-sent events).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping
from types import SimpleNamespace
from typing import Any

from statechart.errors import ModelError
from statechart.models.pricing import Price, Priced
from statechart.models.registry import model_name
from statechart.records.messages import Chunk, Message, Reply, Request, ToolCall

DEFAULT_PRICES: dict[str, Price] = {
    "claude-sonnet-4-5": Price(3_000_000, 15_000_000),
    "claude-haiku-4-5": Price(1_000_000, 5_000_000),
    "claude-opus-4-1": Price(15_000_000, 75_000_000),
}
"""Micro-dollars per million input and output tokens; override with `prices=`."""
DEFAULT_MAX_TOKENS = 1024
"""Anthropic requires `max_tokens`; used when no budget or state caps it."""


class AnthropicModel(Priced):
    """A `Model` over the messages API. The spec is `anthropic:MODEL`."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 0,
        prices: Mapping[str, Price] | None = None,
        client: Any = None,
    ) -> None:
        try:
            from anthropic import AsyncAnthropic
        except ImportError:
            raise ModelError(
                "the anthropic adapter needs the anthropic extra: "
                "pip install 'statechart-agents[anthropic]'"
            ) from None
        self.model = model
        self.prices = {**DEFAULT_PRICES, **(prices or {})}
        self.client: Any = client or AsyncAnthropic(
            base_url=base_url,
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or "none",
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def spec(self) -> str:
        return f"anthropic:{self.model}"

    def body(self, request: Request) -> dict[str, Any]:
        """The messages request for `request`."""
        return {
            "model": self.model,
            "system": request.instructions or f"You are in state '{request.state}'.",
            "messages": messages(request),
            "tools": tools(request),
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        }

    async def stream(self, request: Request) -> AsyncIterator[Chunk | Reply]:
        """The reply as the server streams it (SSE): text deltas and each tool call's
        `input_json_delta`s as `Chunk`s, then the `Reply` assembled from them, with the
        input tokens of `message_start` and the output tokens of the last `message_delta`."""
        events = await self.client.messages.create(**self.body(request), stream=True)
        text: list[str] = []
        blocks: dict[int, list[str]] = {}  # index -> [id, name, input JSON so far]
        tokens: dict[str, Any] = {}
        model, finish = "", ""
        async for event in events:
            kind = event.type
            if kind == "message_start":
                model = event.message.model or model
                tokens["input_tokens"] = event.message.usage.input_tokens
                tokens["output_tokens"] = event.message.usage.output_tokens
            elif kind == "content_block_start" and event.content_block.type == "tool_use":
                block = event.content_block
                blocks[event.index] = [block.id, block.name, ""]
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta" and delta.text:
                    text.append(delta.text)
                    yield Chunk(text=delta.text)
                elif delta.type == "input_json_delta" and event.index in blocks:
                    held = blocks[event.index]
                    held[2] += delta.partial_json
                    if delta.partial_json:
                        yield Chunk(text=delta.partial_json, call_id=held[0], tool=held[1])
            elif kind == "message_delta":
                finish = event.delta.stop_reason or finish
                if event.usage is not None and event.usage.output_tokens is not None:
                    tokens["output_tokens"] = event.usage.output_tokens
        reply = Reply(
            content="".join(text),
            tool_calls=tuple(
                ToolCall(id=i, name=n, arguments=_input(raw))
                for i, n, raw in (blocks[k] for k in sorted(blocks))
            ),
            model=model or self.model,
            finish_reason=finish,
        )
        used = SimpleNamespace(**tokens) if len(tokens) == 2 else None
        yield self.charged(request, reply, used, ("input_tokens", "output_tokens"))

    async def complete(self, request: Request) -> Reply:
        response = await self.client.messages.create(**self.body(request))
        text = "".join(b.text for b in response.content if b.type == "text")
        calls = tuple(
            ToolCall(
                id=b.id,
                name=b.name,
                arguments=b.input if isinstance(b.input, dict) else json.dumps(b.input),
            )
            for b in response.content
            if b.type == "tool_use"
        )
        reply = Reply(
            content=text,
            tool_calls=calls,
            model=response.model or self.model,
            finish_reason=getattr(response, "stop_reason", None) or "",
        )
        return self.charged(
            request, reply, getattr(response, "usage", None), ("input_tokens", "output_tokens")
        )


def _input(raw: str) -> dict[str, Any] | str:
    """A streamed tool call's input: the parsed JSON object (an empty input is `{}`), or
    the raw text when it is not one (the runtime then tells the model)."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def messages(request: Request) -> list[dict[str, Any]]:
    """The transcript as alternating user/assistant messages of content blocks."""
    out: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Context: " + json.dumps(request.context, sort_keys=True)}
            ],
        }
    ]
    for m in request.transcript:
        role, blocks = _blocks(m)
        if not blocks:  # an empty reply: the API rejects empty content
            blocks = [{"type": "text", "text": "(no reply)"}]
        if out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == "tool":
        return "user", [
            {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
        ]
    if m.role == "assistant":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        for c in m.tool_calls:
            arguments = c.arguments
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    arguments = {"_raw": arguments}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": c.id,
                    "name": c.name,
                    "input": arguments if isinstance(arguments, dict) else {},
                }
            )
        return "assistant", blocks
    return "user", [{"type": "text", "text": m.content or "(empty)"}]


def tools(request: Request) -> list[dict[str, Any]]:
    """The state's tools and `next_state`, as Anthropic tools."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in request.tools
    ]


def from_spec(spec: str) -> AnthropicModel:
    """`anthropic:MODEL` (key from `ANTHROPIC_API_KEY`, base URL from `ANTHROPIC_BASE_URL`)."""
    return AnthropicModel(model_name(spec, "anthropic"))
