"""Model protocol, transcript records, and the scripted/function models."""

from statechart.models.base import Model, StreamingModel
from statechart.models.registry import from_spec, register
from statechart.models.scripted import FunctionModel, ScriptedModel, call, reply
from statechart.records.messages import (
    Chunk,
    Message,
    Reply,
    Request,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "Chunk",
    "FunctionModel",
    "Message",
    "Model",
    "Reply",
    "Request",
    "ScriptedModel",
    "StreamingModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call",
    "from_spec",
    "register",
    "reply",
]
