"""The reason texts the engine writes into events, one home each: the model, the audit
timeline and replay all read the same words."""

from __future__ import annotations


def waiting_for_approval(state: str) -> str:
    """Why a run waits at an approval state."""
    return f"waiting for approval in '{state}'"


def not_executed(why: str) -> str:
    """The result a queued call gets when it does not run."""
    return f"not executed: {why}"


NOT_EXECUTED = not_executed("an earlier call in the same reply was refused or is waiting")
"""The result of the calls queued behind a refused or waiting one."""

NEXT_STATE_TOO_SOON = (
    "not taken: next_state came with other calls in one reply; call next_state again once "
    "you have read the results of those calls"
)
"""The result of a `next_state` sent beside other calls: the model must see their results
before it leaves the state."""
