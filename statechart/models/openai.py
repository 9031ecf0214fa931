"""OpenAI-compatible chat completions through the official `openai` SDK (the `openai` extra).

Works with OpenAI and any server that speaks its wire format (vLLM, Ollama,
llama.cpp, LM Studio): give `base_url`, or set `OPENAI_BASE_URL`. The state's tools
and `next_state` are offered with a required tool choice and no parallel calls;
each call is one request (`max_retries=0`: the SDK does not retry
behind the run's back); retry with `State(retries=Retry(...))`, so every attempt is
an event. `timeout=` is the SDK's HTTP timeout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from statechart.errors import ModelError
from statechart.models.pricing import Price, Priced
from statechart.models.registry import model_name
from statechart.records.messages import Message, Reply, Request, ToolCall

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

    async def complete(self, request: Request) -> Reply:
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
        response = await self.client.chat.completions.create(**body)
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
