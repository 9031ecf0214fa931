"""The public surface: `statechart/__init__.py`'s sorted `__all__` is locked here."""

from __future__ import annotations

import statechart

PUBLIC = [
    "Budget",
    "Chart",
    "ChartError",
    "ConflictError",
    "Decision",
    "DuplicateStateError",
    "ESCALATED",
    "EXHAUSTED",
    "Edge",
    "Event",
    "Facts",
    "FunctionModel",
    "Intent",
    "MalformedStateNameError",
    "MemoryStore",
    "Message",
    "MissingBudgetError",
    "Model",
    "ModelError",
    "NoExitError",
    "NoTerminalStateError",
    "NotWaitingError",
    "QueuedCall",
    "Reply",
    "Request",
    "Run",
    "RunEndedError",
    "RunError",
    "RunNotFoundError",
    "ScriptedModel",
    "Session",
    "Spent",
    "State",
    "StatechartError",
    "Step",
    "Store",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolSpec",
    "UncappedCycleError",
    "UndeclaredFieldError",
    "UnknownTargetError",
    "UnreachableStateError",
    "Usage",
    "Visit",
    "approve",
    "call",
    "cancel",
    "drive",
    "fingerprint",
    "load_session",
    "reject",
    "reply",
    "run_sync",
    "run_to_end",
    "start",
    "step",
    "tool",
    # durable runs (issue 3)
    "ChartChangedError",
    "CorruptRowError",
    "LeaseHeldError",
    "LeaseLostError",
    "Lease",
    "SQLiteStore",
    "SchemaVersionError",
    "StoreError",
    "fork",
    "resume",
    # what a new user trips on (issue 14)
    "ChartWarning",
    "EventLoopRunningError",
    # sub-charts as reusable parts (issue 15)
    "DerivationError",
    # one page per durable transition (issue 16): snapshots written behind the events
    "Loaded",
    "RunPage",
    "RunSummary",
    "load_run",
    # records as msgspec structs (issue 27)
    "Record",
    "to_dict",
    # time in the chart (issue 28)
    "CallTimeoutError",
    "FieldTypeError",
    "Retry",
    "set_thread_limit",
]


def test_public_api_is_locked() -> None:
    """Adding or removing a public name is a decision: change PUBLIC with it."""
    assert sorted(statechart.__all__) == sorted(PUBLIC)
    assert len(set(statechart.__all__)) == len(statechart.__all__)
    for name in PUBLIC:
        assert getattr(statechart, name) is not None
