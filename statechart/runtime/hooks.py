"""What the driver tells an observer as it steps: keyword-only hooks, so side concerns
(tracing today) stay out of the driver's loop.

One transition calls them in this order: `before_step` (the run as it is), then
`effect_started` / `effect_ended` around what the step does (with `first_chunk` between
them when a watched model call streams) (a model call, a tool call,
a handler, or a decision with no I/O; `effect_started` may return the id of the span
that traces the transition, which the engine writes into its event), `after_step` with
the record the engine made (the hooks may return it stamped, e.g. with a span id, for a
record made outside a step), and `step_stored` once the store accepted it or refused it.
The transition's one span opens before its effect and closes once its event is stored.
"""

from __future__ import annotations

from typing import Any, Protocol

from statechart.engine import Effect
from statechart.records.run import Run, Step


class StepHooks(Protocol):
    """Called by `step()` and `drive()`; every argument is keyword-only."""

    def before_step(self, *, run: Run) -> None:
        """A step is about to be planned from `run`."""

    def effect_started(self, *, run: Run, effect: Effect) -> str | None:
        """The step's effect (model call, tool call, handler, or a decision with no I/O)
        is about to be performed; return the id of the span that traces the transition
        (written into its event), or None."""

    def first_chunk(self, seconds: float) -> None:
        """A streamed model reply's first chunk came `seconds` after the call began."""

    def effect_ended(self, *, outcome: Any) -> None:
        """The effect returned `outcome` (a reply, a result, or the exception it raised)."""

    def after_step(self, *, before: Run, record: Step, started_ns: int) -> Step:
        """The engine made `record` from `before`; return the record to store."""
        ...

    def step_stored(self, *, record: Step, error: BaseException | None = None) -> None:
        """The store accepted `record`, or refused it with `error`."""
