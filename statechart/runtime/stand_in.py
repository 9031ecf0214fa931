"""Stand-ins: a drive whose tool calls (and code states' handlers) are answered by a
function instead of running them.

`statechart.rerun` answers them from a recorded run, the testing kit from a cassette; the
driver asks `STAND_IN` before it runs a tool or a handler, so no tool runs while one is
set. For a handler the stand-in may answer `RUN`: run the handler itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from statechart.engine.effects import RunHandler, RunTool

StandIn = Callable[[RunTool | RunHandler], Any]
"""Answers a call: the value the tool or handler would return, the exception it would
raise, or (for a handler) `RUN`."""

RUN: Any = object()
"""What a stand-in answers for a handler that should run after all."""

STAND_IN: ContextVar[StandIn | None] = ContextVar("statechart_stand_in", default=None)


@contextmanager
def standing_in(answer: StandIn) -> Iterator[None]:
    """Within the block, every tool call a drive makes (in this task and the tasks it
    starts) is answered by `answer`, and every handler it would run is asked of it first;
    the tool itself is not called."""
    token = STAND_IN.set(answer)
    try:
        yield
    finally:
        STAND_IN.reset(token)
