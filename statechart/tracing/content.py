"""Message content on spans, only with capture switched on: what a chat sent and received
in the GenAI conventions' message format, tool arguments and results, each text clipped."""

from __future__ import annotations

import json
from typing import Any

from statechart.records.messages import Message, Reply, Request
from statechart.tracing.attributes import (
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_SYSTEM_INSTRUCTIONS,
)

LIMIT = 4096
"""The most characters of one text a span carries (a message part, tool arguments, a
result); a longer one is cut there and ends with `…[N more]`."""


def clipped(text: str) -> str:
    """`text`, cut to `LIMIT` characters with a marker saying how many were left out."""
    if len(text) <= LIMIT:
        return text
    return f"{text[:LIMIT]}…[{len(text) - LIMIT} more]"


def finish_reason(reply: Reply) -> str:
    """Why the model stopped: the provider's reason, else `tool_call` or `stop`."""
    return reply.finish_reason or ("tool_call" if reply.tool_calls else "stop")


def _parts(message: Message | Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": clipped(message.content)})
    for call in message.tool_calls:
        arguments = call.arguments
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(arguments),
            }
        )
    return parts


def _arguments(arguments: dict[str, Any] | str) -> Any:
    """A call's arguments as sent: an object unless its JSON is longer than `LIMIT`, then
    that JSON clipped (a string)."""
    if isinstance(arguments, str):
        return clipped(arguments)
    text = _json(arguments)
    return arguments if len(text) <= LIMIT else clipped(text)


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        part = {
            "type": "tool_call_response",
            "id": message.tool_call_id or "",
            "response": clipped(message.content),
        }
        return {"role": "tool", "parts": [part]}
    return {"role": message.role, "parts": _parts(message)}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def request_attributes(request: Request) -> dict[str, str]:
    """`gen_ai.system_instructions` and `gen_ai.input.messages` of a model call: the
    state's instructions, the context it reads, and the visit's transcript."""
    context = "Context: " + json.dumps(request.context, sort_keys=True, default=str)
    messages = [{"role": "user", "parts": [{"type": "text", "content": clipped(context)}]}]
    messages.extend(_message(m) for m in request.transcript)
    instructions = request.instructions or f"You are in state '{request.state}'."
    return {
        GEN_AI_SYSTEM_INSTRUCTIONS: _json([{"type": "text", "content": clipped(instructions)}]),
        GEN_AI_INPUT_MESSAGES: _json(messages),
    }


def reply_attributes(reply: Reply) -> dict[str, str]:
    """`gen_ai.output.messages` of a model call: the reply, with its finish reason."""
    message = {"role": "assistant", "parts": _parts(reply), "finish_reason": finish_reason(reply)}
    return {GEN_AI_OUTPUT_MESSAGES: _json([message])}
