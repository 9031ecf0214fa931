"""What the driver tells an observer as it steps: keyword-only hooks, so side concerns
(tracing today) stay out of the driver's loop.

One transition calls them in this order: `before_step` (the run as it is), then
`effect_started` / `effect_ended` around the model call, tool call or handler (when
the step has one), `after_step` with the record the engine made (the hooks may
return it stamped, e.g. with a span id, before it is stored), and `step_stored` once
the store accepted it or refused it. A transition span that must open before its
effect and close once its event is stored fits these hooks as they are.
"""

from __future__ import annotations

from typing import Any, Protocol

from statechart.engine import Effect
from statechart.records.run import Run, Step


class StepHooks(Protocol):
    """Called by `step()` and `drive()`; every argument is keyword-only."""

    def before_step(self, *, run: Run) -> None:
        """A step is about to be planned from `run`."""

    def effect_started(self, *, run: Run, effect: Effect) -> None:
        """The step's effect (model call, tool call, handler) is about to be awaited."""

    def effect_ended(self, *, outcome: Any) -> None:
        """The effect returned `outcome` (a reply, a result, or the exception it raised)."""

    def after_step(self, *, before: Run, record: Step, started_ns: int) -> Step:
        """The engine made `record` from `before`; return the record to store."""
        ...

    def step_stored(self, *, record: Step, error: BaseException | None = None) -> None:
        """The store accepted `record`, or refused it with `error`."""
