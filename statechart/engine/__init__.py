"""The engine's facade: the pure, synchronous semantics of a chart, over run records.

`plan()` says what the run's state needs next, `advance()` folds the outcome of
that effect into the next run and its event, `fold()`/`replay()` rebuild a run
from its events. No clock, no I/O, no awaiting. `io/`, `mining/` and
`tracing` use only these names; `runtime/` may also reach into the modules.
"""

from statechart.engine.advance import advance
from statechart.engine.effects import (
    CallModel,
    Decide,
    Effect,
    Ended,
    Reconciled,
    RunHandler,
    RunTool,
    Wait,
    calls_cap_refusal,
    first_exhausted,
    last_call,
    plan,
    repeat_refusal,
)
from statechart.engine.machine import EXIT
from statechart.engine.moves import checked_patch, commit, try_move, typed_context
from statechart.engine.replay import edges, fold, replay, status_of
from statechart.engine.session import Session
from statechart.engine.tables import (
    CANCEL,
    CompiledChart,
    Level,
    Move,
    Transition,
    compiled,
    exhaust,
    go,
)

__all__ = [
    "CANCEL",
    "EXIT",
    "CallModel",
    "CompiledChart",
    "Decide",
    "Effect",
    "Ended",
    "Level",
    "Move",
    "Reconciled",
    "RunHandler",
    "RunTool",
    "Session",
    "Transition",
    "Wait",
    "advance",
    "calls_cap_refusal",
    "checked_patch",
    "commit",
    "compiled",
    "edges",
    "exhaust",
    "first_exhausted",
    "fold",
    "go",
    "last_call",
    "plan",
    "repeat_refusal",
    "replay",
    "status_of",
    "try_move",
    "typed_context",
]
