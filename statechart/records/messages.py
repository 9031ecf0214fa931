"""The provider-independent transcript format: tool calls, messages, requests, replies,
and the chunks a streamed reply arrives in.

Adapters translate these records to and from a provider's wire format, so a
run (or a fork of it) can switch models between steps.
"""

from __future__ import annotations

from typing import Any, Literal

from statechart.records.record import Record


class ToolCall(Record, frozen=True):
    """One call the model asked for: a tool (or `next_state`) and its arguments.

    In scripts, `call(name, **arguments)` builds one.

    Example:
        ```python
        from statechart import ToolCall

        asked = ToolCall(id="c1", name="search_kb", arguments={"query": "refund"})
        garbled = ToolCall(id="c2", name="search_kb", arguments='{"query": ')  # kept as sent
        ```
    """

    id: str
    """The provider's call id; every call id gets exactly one result."""
    name: str
    """The tool (or `next_state`) called."""
    arguments: dict[str, Any] | str = {}
    """Parsed arguments, or the raw text when the provider sent malformed JSON."""


class Usage(Record, frozen=True):
    """What one model call cost, as its `Reply` reports it.

    The driver charges it to the run's ledger at every budget level the state is in.

    Example:
        ```python
        from statechart import Usage, call, reply

        used = Usage(input_tokens=1200, output_tokens=80, cost_micros=340)  # $0.00034
        answer = reply(call("next_state", target="done"), usage=used)
        ```
    """

    input_tokens: int = 0
    """Tokens the model read (the prompt)."""
    output_tokens: int = 0
    """Tokens the model wrote."""
    cost_micros: int = 0
    """Cost in integer micro-dollars."""
    missing: bool = False
    """The provider reported no usage: these counts are the adapter's conservative
    estimate (`statechart.records.estimate`)."""


class Message(Record, frozen=True):
    """One transcript entry, independent of any provider.

    A visit's transcript alternates a model's reply (`assistant`, with its calls) and
    one `tool` message per call, answering it by id.

    Example:
        ```python
        from statechart import Message, call

        asked = call("search_kb", "c1", query="refund")
        transcript = (
            Message(role="assistant", content="Looking it up.", tool_calls=(asked,)),
            Message(role="tool", content="KB-12: refunds take 5 days.", tool_call_id="c1"),
        )
        ```
    """

    role: Literal["user", "assistant", "tool"]
    """`assistant` (a reply), `tool` (a call's result) or `user` (a note from the runtime)."""
    content: str = ""
    """The text: the reply's words, or the call's result (or refusal)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """For assistant messages: the calls it made."""
    tool_call_id: str | None = None
    """For tool messages: the call this is the result of."""


class ToolSpec(Record, frozen=True):
    """A tool as offered to the model: what `Request.tools` holds, built from each `Tool`.

    Example:
        ```python
        from statechart import ToolSpec, tool


        @tool(retry="safe")
        def search_kb(query: str) -> str:
            "Search the knowledge base."
            return "KB-12"


        spec = ToolSpec(
            name=search_kb.name, description=search_kb.description, parameters=search_kb.schema
        )
        assert spec.parameters["required"] == ["query"]
        ```
    """

    name: str
    """The name the model calls it by."""
    description: str
    """What it does, in one line."""
    parameters: dict[str, Any]
    """JSON schema of the arguments."""


class Request(Record, frozen=True):
    """Everything a model sees for one call: bounded by construction.

    The runtime builds it from the state; build one by hand to test a model alone.

    Example:
        ```python
        import anyio

        from statechart import Request, ScriptedModel, ToolSpec, call, reply

        leave = ToolSpec(name="next_state", description="Leave 'ask' for: done",
                         parameters={"type": "object", "properties": {}})
        request = Request(state="ask", instructions="Answer.", context={"question": "Why?"},
                          transcript=(), tools=(leave,))
        model = ScriptedModel([reply(call("next_state", target="done"))])
        assert anyio.run(model.complete, request).tool_calls[0].name == "next_state"
        ```
    """

    state: str
    """Path of the state asking (e.g. `triage.research`)."""
    instructions: str
    """The state's instructions."""
    context: dict[str, Any]
    """Only the context fields the state declares it reads."""
    transcript: tuple[Message, ...]
    """The current visit's transcript, oldest first."""
    tools: tuple[ToolSpec, ...]
    """The tools offered, `next_state` included; the model must call one."""
    tool_choice: Literal["required"] = "required"
    """Always `required`: a reply must call one of the tools."""
    max_tokens: int | None = None
    """Output-token cap, already lowered to what every budget level has left."""


class Reply(Record, frozen=True):
    """What a model answered: what `Model.complete` returns.

    In scripts and policies, `reply(*calls, content=, usage=)` builds one.

    Example:
        ```python
        from statechart import Reply, ToolCall, Usage

        answer = Reply(
            content="Done.",
            tool_calls=(ToolCall(id="c1", name="next_state", arguments={"target": "done"}),),
            usage=Usage(input_tokens=900, output_tokens=20),
        )
        ```
    """

    content: str = ""
    """Text beside the calls (shown in the transcript, never acted on)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls asked for, in order; a reply with none is refused."""
    usage: Usage = Usage()
    """Tokens and cost of this call, charged to the run's budgets."""
    model: str = ""
    """The model that answered, as the provider names it."""
    finish_reason: str = ""
    """Why the model stopped, as the provider says it (`stop`, `tool_calls`, ...); "" when
    it did not say."""


class Chunk(Record, frozen=True):
    """A piece of a reply as it streams: text, or part of a tool call's JSON arguments.

    A streaming model (`Model.stream`) yields these, then the whole `Reply`. They are
    shown to observers as they arrive and never stored: the reply is the truth.

    Example:
        ```python
        from statechart import Chunk

        said = Chunk(text="Looking ")
        asking = Chunk(text='{"query": "ref', call_id="c1", tool="search_kb")
        ```
    """

    text: str
    """The new text: words of the reply, or characters of a call's JSON arguments."""
    call_id: str = ""
    """The tool call whose arguments this is part of; "" for the reply's text."""
    tool: str = ""
    """The tool that call names (`next_state` included), when `call_id` is set."""
