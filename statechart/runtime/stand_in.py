"""Stand-in tools: a drive whose tool calls are answered by a function instead of the tools.

`statechart.rerun` answers them from a recorded run, the testing kit from a cassette; the
driver asks `STAND_IN` before it runs a tool, so no tool runs while one is set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from statechart.engine.effects import RunTool

StandIn = Callable[[RunTool], Any]
"""Answers a tool call: the value the tool would return, or the exception it would raise."""

STAND_IN: ContextVar[StandIn | None] = ContextVar("statechart_tool_stand_in", default=None)


@contextmanager
def standing_in(answer: StandIn) -> Iterator[None]:
    """Within the block, every tool call a drive makes (in this task and the tasks it
    starts) is answered by `answer`; the tool itself is not called."""
    token = STAND_IN.set(answer)
    try:
        yield
    finally:
        STAND_IN.reset(token)
