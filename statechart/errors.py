"""Exception classes: each names the state, edge, tool or budget involved and says what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


def validation_problems(exc: ValidationError, whole: str = "") -> str:
    """`field.sub: message; ...` for every value pydantic refused (`whole` names an empty
    location: the value as a whole)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors())


class StatechartError(Exception):
    """Base class of every error this package raises."""


class ChartError(StatechartError):
    """A chart definition is invalid; raised when the chart is built, never at run time."""


class MalformedStateNameError(ChartError):
    """A state name is empty or holds a character reserved for paths."""


class DuplicateStateError(ChartError):
    """Two states of one chart share a name."""


class UnknownTargetError(ChartError):
    """An edge, exit map or exhaustion target names a state the chart does not have."""


class UnreachableStateError(ChartError):
    """No path of edges leads from the initial state to this state."""


class NoExitError(ChartError):
    """A non-terminal state has no outgoing edge."""


class UncappedCycleError(ChartError):
    """A cycle of edges has no state with `max_visits` and no edge with `max_traversals`."""


class UndeclaredFieldError(ChartError):
    """A state reads or writes a field the chart's context type does not declare."""


class FieldTypeError(ChartError):
    """A field is typed one way on one side of a sub-chart's border and another way on the
    other (a port's two fields, or a context field the sub-chart shares)."""


class NoTerminalStateError(ChartError):
    """A chart has no terminal state, so no run of it could end."""


class MissingBudgetError(ChartError):
    """The root chart has no `max_steps`, so a run of it would have no bound."""


class DerivationError(ChartError):
    """A chart cannot be derived as asked (`Chart.replace_state`, `with_tools`, ...): an
    unknown state or edge, or an edge of a state becoming a sub-chart that no exit covers."""


class ChartWarning(UserWarning):
    """A chart or tool that builds but is likely a mistake (a tool with no description, a
    model state shown nothing). Turn it into an error with `warnings.simplefilter`."""


class ToolDefinitionError(StatechartError):
    """A tool is defined without what it needs (a retry policy, a valid signature)."""


class ToolArgumentsError(StatechartError, ValueError):
    """Arguments that do not fit a tool's schema; the message goes back to the model."""

    def __init__(self, tool: str, exc: ValidationError) -> None:
        problems = validation_problems(exc, whole="(arguments)")
        super().__init__(f"bad arguments for tool '{tool}': {problems}. Fix them and call again.")
        self.tool = tool


class LoadError(StatechartError):
    """A chart named on the command line cannot be loaded (no file, no attribute, not a Chart)."""


class SourceRefusedError(LoadError):
    """A chart source stored in the database names code outside what a worker was given
    (its `--agents` folder and installed packages' registered charts): never imported."""


class TraceFormatError(StatechartError):
    """A line of a trace file is not a run of tool steps; the message names file:line."""


class EventLoopRunningError(StatechartError, RuntimeError):
    """A synchronous entry point (`run_sync`) was called where an event loop already runs."""


class RunError(StatechartError):
    """A run cannot do what was asked in its present state."""


class PortError(RunError):
    """A sub-chart's input or output (`State(input=..., output=...)`) does not fit its
    type, or its mapping function raised; the message names the state and the fields."""


class UnpricedModelError(RunError):
    """A strict cost cap cannot be kept: the model has no price to bound a call's cost."""


class RunNotFoundError(RunError):
    """The store holds no run with this id."""


class NotWaitingError(RunError):
    """approve/reject was called on a run that is not waiting for a human."""


class RunEndedError(RunError):
    """The run already reached a terminal state."""


class IllegalTransitionError(RunError):
    """A trigger that no transition of the chart allows from the run's state."""

    def __init__(self, state: str, trigger: str, why: str) -> None:
        super().__init__(
            f"trigger '{trigger}' is not legal from state '{state}': {why}; only the chart's "
            "edges (and the implicit escalation) can be taken, see `statechart diagram`"
        )
        self.state = state
        self.trigger = trigger


class CompiledStepMismatchError(RunError, AssertionError):
    """A model state's compiled step differs from the general one (raised only when
    `engine.transition.CHECKED` is on, as in the test suite): a bug in `engine.react`."""


class ConflictError(RunError):
    """Another writer appended this run's next event first (`UNIQUE(run_id, seq)`)."""


class CallTimeoutError(StatechartError, TimeoutError):
    """A model, tool or handler call ran past its limit (a timeout, or what was left of a
    wall-clock budget) and was cut off; the event records it as a failed call."""

    def __init__(self, what: str, seconds: float, by: str = "its timeout") -> None:
        super().__init__(f"{what} ran past {by} ({seconds:g} s) and was cut off")
        self.what = what
        self.seconds = seconds
        self.by = by

    def __reduce__(self) -> tuple[type[CallTimeoutError], tuple[str, float, str]]:
        return type(self), (self.what, self.seconds, self.by)


class ModelError(StatechartError):
    """A model adapter could not produce a reply (no scripted reply left, a failed call)."""


class LeaseHeldError(RunError):
    """Another driver holds the run's lease and it has not expired."""


class LeaseLostError(RunError):
    """This driver's lease expired and another driver took the run over."""


class ChartChangedError(RunError):
    """The stored run was started on a different version of its chart."""


class StoreError(StatechartError):
    """The store's contents cannot be used as they are."""


class CorruptRowError(StoreError):
    """A stored row is truncated or does not parse; nothing was changed."""


class SchemaVersionError(StoreError):
    """The database was written by a newer schema than this package knows."""


class CassetteError(StatechartError):
    """A test's cassette cannot answer what the run asks (the chart or the test changed
    since it was recorded), or its file is not a cassette: record it again."""


class TracingConfigError(StatechartError):
    """The `OTEL_*` variables ask for an exporter or protocol that cannot be set up here."""
