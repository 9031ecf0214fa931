"""The provider-independent transcript format: tool calls, messages, requests, replies.

Adapters translate these records to and from a provider's wire format, so a
run (or a fork of it) can switch models between steps.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation


class ToolCall(BaseModel):
    """One call the model asked for."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The provider's call id; every call id gets exactly one result."""
    name: str
    """The tool (or `next_state`) called."""
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """Parsed arguments, or the raw text when the provider sent malformed JSON."""


class Usage(BaseModel):
    """What one model call cost."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    """Cost in integer micro-dollars."""


class Message(BaseModel):
    """One transcript entry, independent of any provider."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """For assistant messages: the calls it made."""
    tool_call_id: str | None = None
    """For tool messages: the call this is the result of."""


class ToolSpec(BaseModel):
    """A tool as offered to the model."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments."""


class Request(BaseModel):
    """Everything a model sees for one call: bounded by construction."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    state: str
    """Path of the state asking (e.g. `triage.research`)."""
    instructions: str
    """The state's instructions."""
    context: dict[str, Any]
    """Only the context fields the state declares it reads."""
    transcript: Annotated[tuple[Message, ...], SkipValidation]
    """The current visit's transcript, oldest first (not re-validated: built by the runtime)."""
    tools: Annotated[tuple[ToolSpec, ...], SkipValidation]
    """The tools offered, `next_state` included; the model must call one."""
    tool_choice: Literal["required"] = "required"
    max_tokens: int | None = None
    """Output-token cap, already lowered to what every budget level has left."""


class Reply(BaseModel):
    """What a model answered."""

    model_config = ConfigDict(frozen=True)

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    model: str = ""
    """The model that answered, as the provider names it."""
