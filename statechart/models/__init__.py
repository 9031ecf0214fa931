"""Model protocol, transcript records, and the scripted/function models."""

from statechart.models.base import Model
from statechart.models.registry import from_spec, register
from statechart.models.scripted import FunctionModel, ScriptedModel, call, reply
from statechart.records.messages import Message, Reply, Request, ToolCall, ToolSpec, Usage

__all__ = [
    "FunctionModel",
    "Message",
    "Model",
    "Reply",
    "Request",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call",
    "from_spec",
    "register",
    "reply",
]
