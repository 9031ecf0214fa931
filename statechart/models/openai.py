"""OpenAI-compatible chat completions through the official `openai` SDK (the `openai` extra).

Works with OpenAI and any server that speaks its wire format (vLLM, Ollama,
llama.cpp, LM Studio): give `base_url`, or set `OPENAI_BASE_URL`. The state's tools
and `next_state` are offered with a required tool choice and no parallel calls;
each call is one request (`max_retries=0`: the SDK does not retry
behind the run's back); retry with `State(retries=Retry(...))`, so every attempt is
an event. `timeout=` is the SDK's HTTP timeout. A watched run streams (`stream()`:
server-sent events, usage from the last chunk).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from statechart.errors import ModelError
from statechart.models.pricing import Price, Priced
from statechart.models.registry import model_name
from statechart.records.messages import Chunk, Message, Reply, Request, ToolCall

MAX_OUTPUT: dict[str, int] = {
    "gpt-4o": 16_384,
    "gpt-4o-mini": 16_384,
    "gpt-4.1": 32_768,
    "gpt-4.1-mini": 32_768,
}
"""Output-token limits the API enforces; the budget's cap is lowered to these."""
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2_500_000, 10_000_000),
    "gpt-4o-mini": Price(150_000, 600_000),
    "gpt-4.1": Price(2_000_000, 8_000_000),
    "gpt-4.1-mini": Price(400_000, 1_600_000),
}
"""Micro-dollars per million input and output tokens; override with `prices=`."""


class OpenAIModel(Priced):
    """A `Model` over chat completions. The spec is `openai:MODEL`."""

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
            from openai import AsyncOpenAI
        except ImportError:
            raise ModelError(
                "the openai adapter needs the openai extra: pip install 'statechart-agents[openai]'"
            ) from None
        self.model = model
        self.prices = {**DEFAULT_PRICES, **(prices or {})}
        self.client = client or AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def spec(self) -> str:
        return f"openai:{self.model}"

    def body(self, request: Request) -> dict[str, Any]:
        """The chat completions request for `request`."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages(request),
            "tools": tools(request),
            "tool_choice": "required",
            "parallel_tool_calls": False,
        }
        limit = MAX_OUTPUT.get(self.model) or next(
            (v for k, v in MAX_OUTPUT.items() if self.model.startswith(k + "-")), None
        )
        if request.max_tokens is not None:
            body["max_tokens"] = min(request.max_tokens, limit or request.max_tokens)
        return body

    async def stream(self, request: Request) -> AsyncIterator[Chunk | Reply]:
        """The reply as the server streams it (SSE): text and each call's argument pieces
        as `Chunk`s, then the `Reply` assembled from them, with the usage of the stream's
        last chunk (`stream_options.include_usage`)."""
        response = await self.client.chat.completions.create(
            **self.body(request), stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]
        usage: Any = None
        model, finish, chosen = "", "", False
        async for chunk in response:
            model = chunk.model or model
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                chosen = True
                finish = choice.finish_reason or finish
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    yield Chunk(text=delta.content)
                for piece in delta.tool_calls or ():
                    held = calls.setdefault(piece.index, ["", "", ""])
                    if piece.id:
                        held[0] = piece.id
                    if piece.function is not None and piece.function.name:
                        held[1] += piece.function.name
                    if piece.function is not None and piece.function.arguments:
                        held[2] += piece.function.arguments
                        yield Chunk(text=piece.function.arguments, call_id=held[0], tool=held[1])
        if not chosen:
            raise ModelError(f"{self.spec} streamed no choices in state '{request.state}'")
        reply = Reply(
            content="".join(text),
            tool_calls=tuple(
                ToolCall(id=i, name=n, arguments=_arguments(a))
                for i, n, a in (calls[k] for k in sorted(calls))
            ),
            model=model or self.model,
            finish_reason=finish,
        )
        yield self.charged(request, reply, usage, ("prompt_tokens", "completion_tokens"))

    async def complete(self, request: Request) -> Reply:
        response = await self.client.chat.completions.create(**self.body(request))
        if not response.choices:
            raise ModelError(f"{self.spec} answered with no choices in state '{request.state}'")
        message = response.choices[0].message
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=_arguments(c.function.arguments))
            for c in message.tool_calls or ()
        )
        reply = Reply(
            content=message.content or "",
            tool_calls=calls,
            model=response.model or self.model,
            finish_reason=response.choices[0].finish_reason or "",
        )
        return self.charged(
            request, reply, getattr(response, "usage", None), ("prompt_tokens", "completion_tokens")
        )


def messages(request: Request) -> list[dict[str, Any]]:
    """The provider-independent request as chat messages."""
    out: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": request.instructions or f"You are in state '{request.state}'.",
        },
        {"role": "user", "content": "Context: " + json.dumps(request.context, sort_keys=True)},
    ]
    out.extend(_message(m) for m in request.transcript)
    return out


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments
                        if isinstance(c.arguments, str)
                        else json.dumps(c.arguments),
                    },
                }
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}


def tools(request: Request) -> list[dict[str, Any]]:
    """The state's tools and `next_state`, as function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]


def _arguments(raw: str | None) -> dict[str, Any] | str:
    """Parsed arguments, or the raw text when they are not a JSON object (the runtime then
    tells the model, instead of crashing)."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw or ""
    return value if isinstance(value, dict) else raw or ""


def from_spec(spec: str) -> OpenAIModel:
    """`openai:MODEL` (base URL from `OPENAI_BASE_URL`, key from `OPENAI_API_KEY`)."""
    return OpenAIModel(model_name(spec, "openai"))


__all__: Sequence[str] = ("OpenAIModel", "from_spec")
