"""The engine's facade: the pure, synchronous semantics of a chart, over run records.

`plan()` says what the run's state needs next, `advance()` folds the outcome of
that effect into the next run and its event, `fold()`/`replay()` rebuild a run
from its events. No clock, no I/O, no awaiting. `io/`, `mining/` and
`tracing` use only these names; `runtime/` may also reach into the modules.
"""

from statechart.engine.effects import (
    Ask,
    CallModel,
    Decide,
    Effect,
    Ended,
    Escalate,
    Exhaust,
    Join,
    Reconciled,
    Refuse,
    Regions,
    RunHandler,
    RunTool,
    Sleep,
    TakeNextState,
    Wait,
    calls_cap_refusal,
    first_exhausted,
    last_call,
    repeat_refusal,
)
from statechart.engine.machine import EXIT
from statechart.engine.moves import checked_patch, commit, try_move, typed_context
from statechart.engine.outcome import RunOutcome, outcome_of
from statechart.engine.replay import fold, replay
from statechart.engine.scopes import entered_at_start
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
    status_of,
)
from statechart.engine.timers import clock_time, due_timer, retry_later, woken
from statechart.engine.transition import advance, plan

__all__ = [
    "CANCEL",
    "EXIT",
    "Ask",
    "CallModel",
    "CompiledChart",
    "Decide",
    "Effect",
    "Ended",
    "Escalate",
    "Exhaust",
    "Join",
    "Level",
    "Move",
    "Reconciled",
    "Refuse",
    "Regions",
    "RunHandler",
    "RunOutcome",
    "RunTool",
    "Session",
    "Sleep",
    "TakeNextState",
    "Transition",
    "Wait",
    "advance",
    "calls_cap_refusal",
    "checked_patch",
    "clock_time",
    "commit",
    "compiled",
    "due_timer",
    "entered_at_start",
    "exhaust",
    "first_exhausted",
    "fold",
    "go",
    "last_call",
    "outcome_of",
    "plan",
    "repeat_refusal",
    "replay",
    "retry_later",
    "status_of",
    "try_move",
    "typed_context",
    "woken",
]
