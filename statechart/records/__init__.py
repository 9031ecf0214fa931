"""Data that moves between the layers: transcript messages, what was spent, runs and events.

Frozen `msgspec` structs (`Record`); no behaviour beyond building, adding and encoding.
"""

from statechart.records.codec import to_dict
from statechart.records.messages import Message, Reply, Request, ToolCall, ToolSpec, Usage
from statechart.records.record import Record
from statechart.records.run import Event, Intent, QueuedCall, Run, Status, Step, Visit
from statechart.records.spent import ONE_STEP, ZERO, Spent, spent_of
from statechart.records.summary import RunPage, RunSummary

__all__ = [
    "ONE_STEP",
    "ZERO",
    "Event",
    "Intent",
    "Message",
    "QueuedCall",
    "Record",
    "Reply",
    "Request",
    "Run",
    "RunPage",
    "RunSummary",
    "Spent",
    "Status",
    "Step",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "Visit",
    "spent_of",
    "to_dict",
]
