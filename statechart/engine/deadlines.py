"""How long the call an effect makes may run: its timeout, or what is left of a wall budget.

The driver cuts a call off at this limit and hands the engine a `CallTimeoutError` as the
call's outcome, so a timed-out call is an event like any failed call. The limit is a pure
function of the chart and the run: a tool's `timeout`, a state's `call_timeout`, the
nearest chart's `call_timeout`, and the wall-clock budgets of the levels around the state
(less what they have spent), whichever is shortest.
"""

from __future__ import annotations

from msgspec import Struct

from statechart.engine.effects import CallModel, Effect, RunHandler, RunTool
from statechart.engine.tables import CompiledChart
from statechart.errors import CallTimeoutError
from statechart.records.run import Run


class Limit(Struct, frozen=True, gc=False):
    """The most a call may run, what it is, and what set the limit."""

    seconds: float
    what: str
    """The call: `tool 'search' in state 'research'`, `the model call in state 'draft'`."""
    by: str
    """What set the limit: `its timeout`, `the call_timeout of state 'draft'`, `the wall
    budget of level 'root'`."""

    def error(self) -> CallTimeoutError:
        """The outcome of a call cut off at this limit."""
        return CallTimeoutError(self.what, self.seconds, self.by)


def limit(compiled_chart: CompiledChart, run: Run, effect: Effect) -> Limit | None:
    """The limit of the call `effect` makes; None when it makes none or has no limit."""
    if isinstance(effect, RunTool):
        if effect.doubt == "reconcile":
            return None  # its reconcile hook is asked first: a cut would look like a failure
        key = (run.state, effect.tool.name)
    elif isinstance(effect, (CallModel, RunHandler)):
        key = (run.state, "")
    else:
        return None
    found = compiled_chart.limits.get(key)
    if found is None:
        found = compiled_chart.limits[key] = _static(compiled_chart, run.state, effect)
    seconds, by, walled, what = found
    if not walled:
        return None if seconds is None else Limit(seconds, what, by)
    for level, cap_ms in walled:
        spent = run.ledger.get(level)
        left = max(cap_ms - (spent.wall_ms if spent is not None else 0), 1) / 1000
        if seconds is None or left < seconds:
            seconds, by = left, f"what was left of the wall budget of level '{level}'"
    return None if seconds is None else Limit(seconds, what, by)


def _static(
    compiled_chart: CompiledChart, leaf: str, effect: Effect
) -> tuple[float | None, str, tuple[tuple[str, int], ...], str]:
    """The fixed part of a call's limit (its timeout and what set it), the wall caps of the
    levels around it, and what the call is: worked out once per state and tool."""
    seconds, by = _timeout(compiled_chart, leaf, effect)
    walled = tuple(
        (level.path, level.caps["wall_ms"])
        for level in compiled_chart.levels_of(leaf)
        if "wall_ms" in level.caps
    )
    return seconds, by, walled, _what(compiled_chart, leaf, effect)


def _timeout(compiled_chart: CompiledChart, leaf: str, effect: Effect) -> tuple[float | None, str]:
    owner, state = compiled_chart.owner_state(leaf)
    if isinstance(effect, RunTool) and effect.tool.timeout is not None:
        return effect.tool.timeout, "its timeout"
    if not isinstance(effect, RunTool) and state.call_timeout is not None:
        return state.call_timeout, f"the call_timeout of state '{owner}'"
    path = owner
    while path:
        chart = compiled_chart.nodes[path].chart
        if chart.call_timeout is not None:
            return chart.call_timeout, f"the call_timeout of chart '{chart.name}'"
        path = path.rpartition(".")[0]
    return None, ""


def _what(compiled_chart: CompiledChart, leaf: str, effect: Effect) -> str:
    owner = compiled_chart.owner_state(leaf)[0]
    if isinstance(effect, RunTool):
        return f"tool '{effect.tool.name}' in state '{owner}'"
    if isinstance(effect, RunHandler):
        return f"the handler of state '{owner}'"
    return f"the model call in state '{owner}'"
