"""Model protocol, transcript records, and the scripted/function models."""

from .base import Message, Model, Reply, Request, ToolCall, ToolSpec, Usage
from .registry import from_spec, register
from .scripted import FunctionModel, ScriptedModel, call, reply

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
