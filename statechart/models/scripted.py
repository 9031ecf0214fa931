"""Models for tests and offline demos: a fixed script, or a Python function."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from statechart.errors import ModelError
from statechart.records.messages import Reply, Request, ToolCall, Usage

_ids = itertools.count(1)


def call(name: str, _id: str | None = None, /, **arguments: Any) -> ToolCall:
    """Shorthand for a `ToolCall` in scripts: `call("search_kb", query="x")`.

    Args:
        name: The tool to call (or `next_state`).
        _id: The call id (numbered `call_N` by default).
        **arguments: The call's arguments.

    Returns:
        The tool call.
    """
    return ToolCall(id=_id or f"call_{next(_ids)}", name=name, arguments=arguments)


def reply(*calls: ToolCall, content: str = "", usage: Usage | None = None) -> Reply:
    """Shorthand for a `Reply` carrying `calls`.

    Args:
        *calls: The tool calls of the reply.
        content: Text beside the calls.
        usage: Tokens and cost the reply reports (zero by default).

    Returns:
        The reply.
    """
    return Reply(content=content, tool_calls=calls, usage=usage or Usage())


class ScriptedModel:
    """Replays a list of replies in order and records every request it got."""

    def __init__(self, replies: Iterable[Reply], spec: str = "scripted") -> None:
        self._replies = list(replies)
        self._next = 0
        self._spec = spec
        self.requests: list[Request] = []
        """Every request received, in order."""

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def remaining(self) -> int:
        """Replies not yet used."""
        return len(self._replies) - self._next

    async def complete(self, request: Request) -> Reply:
        self.requests.append(request)
        if self._next >= len(self._replies):
            raise ModelError(
                f"scripted model has no reply left for state '{request.state}' "
                f"(used all {len(self._replies)}); add replies to the script"
            )
        out = self._replies[self._next]
        self._next += 1
        return out


Policy = Callable[[Request], Reply | Awaitable[Reply]]


class FunctionModel:
    """A Python function decides each reply: deterministic stand-ins for real models."""

    def __init__(self, policy: Policy, spec: str = "function") -> None:
        self._policy = policy
        self._spec = spec
        self.requests: list[Request] = []

    @property
    def spec(self) -> str:
        return self._spec

    async def complete(self, request: Request) -> Reply:
        self.requests.append(request)
        out = self._policy(request)
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, Reply):
            raise ModelError(
                f"function model for state '{request.state}' returned {type(out).__name__}, "
                "not a Reply"
            )
        return out
