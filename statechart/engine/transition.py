"""`plan()` and `advance()`: a model state's common steps compiled (`react`), every other
step general (`effects.plan_general`, `advance.advance_general`).

Both are pure: they never await, read a clock or write anywhere.
"""

from __future__ import annotations

import os
from typing import Any

from statechart.engine.advance import advance_general
from statechart.engine.effects import Effect, plan_general
from statechart.engine.react import advance_step, loop_at, plan_step
from statechart.engine.session import Session
from statechart.engine.tables import CompiledChart
from statechart.errors import CompiledStepMismatchError
from statechart.records.run import Run, Step

CHECKED = os.environ.get("STATECHART_CHECK_STEPS") == "1"
"""When True (`STATECHART_CHECK_STEPS=1`, which the test suite sets for itself and its
subprocesses), every compiled step is also made the general way and the two must be equal:
the whole suite is then a differential test of `react`."""


def plan(compiled_chart: CompiledChart, run: Run, session: Session) -> Effect:
    """The effect the run's current state needs next."""
    loop = loop_at(compiled_chart, run.state)
    if loop is not None:
        effect = plan_step(compiled_chart, loop, run, session)
        if effect is not None:
            if CHECKED:
                _same("plan", run, effect, plan_general(compiled_chart, run, session))
            return effect
    return plan_general(compiled_chart, run, session)


def advance(
    compiled_chart: CompiledChart,
    run: Run,
    effect: Effect,
    outcome: Any = None,
    *,
    now: float,
    wall_ms: int = 0,
    span: str | None = None,
) -> Step:
    """Fold the outcome of `effect` into the next run and its event; `span` is the id of
    the span that traces this transition (written into the event), if one does."""
    loop = loop_at(compiled_chart, run.state)
    if loop is not None:
        step = advance_step(compiled_chart, loop, run, effect, outcome, now, wall_ms, span)
        if step is not None:
            if CHECKED:
                general = advance_general(
                    compiled_chart, run, effect, outcome, now=now, wall_ms=wall_ms
                )
                _same("advance", run, step, general if span is None else general.with_span(span))
            return step
    made = advance_general(compiled_chart, run, effect, outcome, now=now, wall_ms=wall_ms)
    return made if span is None else made.with_span(span)


def _same(what: str, run: Run, compiled: Any, general: Any) -> None:
    """Raise unless the compiled result equals the general one."""
    if compiled != general:
        raise CompiledStepMismatchError(
            f"compiled {what} of run {run.run_id} at seq {run.seq} in '{run.state}' differs "
            f"from the general one:\n compiled: {compiled!r}\n general:  {general!r}"
        )
