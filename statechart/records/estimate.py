"""Conservative token estimates, for a reply without usage and for strict budgets.

A token of a byte-level tokenizer (GPT, Claude, Llama) covers at least one byte of
UTF-8 and, in English prose or code, three to five. We count two bytes per token,
rounded up, plus a few tokens of framing per message and per tool: high for prose and
code, about right for CJK text. Templates the provider wraps around messages and the
tool schemas are counted, since they are sent.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from statechart.records.messages import Message, Reply, Request, ToolSpec


class Price(NamedTuple):
    """Micro-dollars per million input tokens and per million output tokens."""

    input: int
    output: int

    def cost(self, tokens_in: int, tokens_out: int) -> int:
        """What a call of these sizes costs, in whole micro-dollars (rounded down, an `int`
        even when the prices were written as floats)."""
        return int((tokens_in * self.input + tokens_out * self.output) // 1_000_000)


BYTES_PER_TOKEN = 2
FRAMING = 8
"""Tokens counted for the template around each message and each tool."""


def tokens_of(text: str) -> int:
    """Tokens `text` may take: UTF-8 bytes / 2, rounded up."""
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


def _message(m: Message) -> int:
    calls = sum(tokens_of(c.name) + tokens_of(_json(c.arguments)) for c in m.tool_calls)
    return FRAMING + tokens_of(m.content) + calls


def _tool(t: ToolSpec) -> int:
    return FRAMING + tokens_of(t.name) + tokens_of(t.description) + tokens_of(_json(t.parameters))


def _json(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def input_tokens(request: Request) -> int:
    """What the request may cost in input tokens: instructions, the fields shown, this
    visit's transcript and the offered tools' schemas, each with its framing."""
    return (
        FRAMING
        + tokens_of(request.instructions)
        + tokens_of(_json(request.context))
        + sum(_message(m) for m in request.transcript)
        + sum(_tool(t) for t in request.tools)
    )


def output_tokens(reply: Reply) -> int:
    """What a reply may have cost in output tokens: its text and its calls."""
    return _message(Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls))
