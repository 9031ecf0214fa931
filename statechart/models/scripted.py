"""Models for tests and offline demos: a fixed script, or a Python function."""

from __future__ import annotations

import inspect
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any

import anyio
import anyio.lowlevel

from statechart.errors import ModelError
from statechart.records.estimate import Price
from statechart.records.messages import Chunk, Reply, Request, ToolCall, Usage

_ids = itertools.count(1)


def call(name: str, _id: str | None = None, /, **arguments: Any) -> ToolCall:
    """Shorthand for a `ToolCall` in scripts: `call("search_kb", query="x")`.

    Args:
        name: The tool to call (or `next_state`).
        _id: The call id (numbered `call_N` by default).
        **arguments: The call's arguments.

    Returns:
        The tool call.

    Example:
        ```python
        from statechart import ToolCall, call

        assert call("search_kb", "c1", query="refund") == ToolCall(
            id="c1", name="search_kb", arguments={"query": "refund"}
        )
        assert call("next_state", target="done").id.startswith("call_")  # numbered
        ```
    """
    return ToolCall(id=_id or f"call_{next(_ids)}", name=name, arguments=arguments)


def reply(*calls: ToolCall, content: str = "", usage: Usage | None = None) -> Reply:
    """Shorthand for a `Reply` carrying `calls`, for scripts and policies.

    Args:
        *calls: The tool calls of the reply.
        content: Text beside the calls.
        usage: Tokens and cost the reply reports (zero by default).

    Returns:
        The reply.

    Example:
        ```python
        from statechart import Usage, call, reply

        answer = reply(
            call("search_kb", query="refund"),
            content="Looking it up.",
            usage=Usage(input_tokens=120, output_tokens=30),
        )
        assert answer.tool_calls[0].arguments == {"query": "refund"}
        ```
    """
    return Reply(content=content, tool_calls=calls, usage=usage or Usage())


class ScriptedModel:
    """A stand-in model that replays a list of replies in order, for tests and demos.

    It records every request, so a test can assert on what the model was shown; asked
    once more than the script has, it raises `ModelError` (the run escalates).

    Example:
        ```python
        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Greet, then finish."),
                    State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])
        assert run_sync(chart, store=MemoryStore(), model=model).state == "done"
        (request,) = model.requests
        assert request.instructions == "Greet, then finish." and model.remaining == 0
        ```
    """

    def __init__(
        self,
        replies: Iterable[Reply],
        spec: str = "scripted",
        price: Price | None = None,
        *,
        chunk_delay: float = 0.0,
    ) -> None:
        self._replies = list(replies)
        self._next = 0
        self._spec = spec
        self.price = price
        """What a call costs, for strict cost caps (the replies carry their own usage)."""
        self.chunk_delay = chunk_delay
        """Seconds between the chunks of a streamed reply (a demo that looks live)."""
        self.requests: list[Request] = []
        """Every request received, in order: what the model was shown."""

    @property
    def spec(self) -> str:
        """The name the run records for this model (`scripted` by default)."""
        return self._spec

    @property
    def remaining(self) -> int:
        """Replies not yet used."""
        return len(self._replies) - self._next

    async def complete(self, request: Request) -> Reply:
        """Record `request` and return the next reply of the script."""
        self.requests.append(request)
        if self._next >= len(self._replies):
            raise ModelError(
                f"scripted model has no reply left for state '{request.state}' "
                f"(used all {len(self._replies)}); add replies to the script"
            )
        out = self._replies[self._next]
        self._next += 1
        return out

    async def stream(self, request: Request) -> AsyncIterator[Chunk | Reply]:
        """The next reply of the script in chunks (text by word, arguments by a few
        characters), then whole; the event loop runs between chunks."""
        async for piece in streamed(await self.complete(request), self.chunk_delay):
            yield piece


_WORDS = re.compile(r"\s*\S+\s*|\s+")
ARGUMENT_PIECE = 16
"""Characters of a call's JSON arguments per streamed chunk."""


def pieces(answer: Reply) -> Iterator[Chunk]:
    """`answer` as a provider would stream it: its text word by word, then each call's
    JSON arguments a few characters at a time."""
    for word in _WORDS.findall(answer.content):
        yield Chunk(text=word)
    for c in answer.tool_calls:
        raw = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
        for at in range(0, len(raw), ARGUMENT_PIECE):
            yield Chunk(text=raw[at : at + ARGUMENT_PIECE], call_id=c.id, tool=c.name)


async def streamed(answer: Reply, delay: float) -> AsyncIterator[Chunk | Reply]:
    """Yield `answer`'s pieces, letting the event loop run between them (sleeping
    `delay` seconds when it is set), then `answer`."""
    for chunk in pieces(answer):
        yield chunk
        if delay:
            await anyio.sleep(delay)
        else:
            await anyio.lowlevel.checkpoint()
    yield answer


Policy = Callable[[Request], Reply | Awaitable[Reply]]


class FunctionModel:
    """A stand-in model whose replies come from a Python function: a deterministic policy.

    `policy(request)` returns a `Reply` (or is async and returns one). The request holds
    all it needs: its iteration in the visit is 1 + the number of `assistant` messages in
    `request.transcript`, and `request.tools` is what it may call (only `next_state` on
    the visit's last call). Anything but a `Reply` raises `ModelError`.

    Example:
        ```python
        from statechart import Budget, Chart, Edge, FunctionModel, MemoryStore
        from statechart import Reply, Request, State, call, reply, run_sync, tool


        @tool(retry="safe")
        def search_kb(query: str) -> str:
            "Search the knowledge base."
            return "KB-12: refunds take 5 days."


        def policy(request: Request) -> Reply:
            iteration = 1 + sum(m.role == "assistant" for m in request.transcript)
            offered = {t.name for t in request.tools}
            if iteration == 1 and "search_kb" in offered:
                return reply(call("search_kb", query="refund"))
            return reply(call("next_state", target="done"))


        chart = Chart(
            "qa",
            states=(State("ask", tools=(search_kb,), instructions="Look it up."),
                    State("done", kind="terminal")),
            edges=(Edge("ask", "done"),),
            budget=Budget(max_steps=10),
        )
        model = FunctionModel(policy)
        assert run_sync(chart, store=MemoryStore(), model=model).state == "done"
        assert [len(r.transcript) for r in model.requests] == [0, 2]  # the call, its result
        ```
    """

    def __init__(
        self,
        policy: Policy,
        spec: str = "function",
        price: Price | None = None,
        *,
        chunk_delay: float = 0.0,
    ) -> None:
        self._policy = policy
        self._spec = spec
        self.price = price
        """What a call costs, for strict cost caps (the policy's replies carry usage)."""
        self.chunk_delay = chunk_delay
        """Seconds between the chunks of a streamed reply."""
        self.requests: list[Request] = []
        """Every request received, in order: what the policy was shown."""

    @property
    def spec(self) -> str:
        """The name the run records for this model (`function` by default)."""
        return self._spec

    async def complete(self, request: Request) -> Reply:
        """Record `request` and return what the policy replies to it."""
        self.requests.append(request)
        out = self._policy(request)
        if type(out) is Reply:
            return out
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, Reply):
            raise ModelError(
                f"function model for state '{request.state}' returned {type(out).__name__}, "
                "not a Reply"
            )
        return out

    async def stream(self, request: Request) -> AsyncIterator[Chunk | Reply]:
        """The policy's reply in chunks, then whole (as `ScriptedModel.stream`)."""
        async for piece in streamed(await self.complete(request), self.chunk_delay):
            yield piece
