"""The parts of a compiled chart: its nodes, transitions, budget levels and moves, and the
trigger names the engine fires. Plain frozen data; `tables.CompiledChart` builds them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from statechart.chart.chart import Chart, Edge, State
from statechart.records.spent import HARD_KINDS

INTERNAL = (
    ("propose", "think", "act"),
    ("next_call", "act", "act"),
    ("results", "act", "think"),
    ("ask", "act", "approve"),
    ("approved", "approve", "act"),
    ("rejected", "approve", "think"),
)
CANCEL = "cancel"
JOIN = "join"
"""The trigger that leaves a parallel state once its regions joined."""
REGION_FAILED = "region_failed"
"""The trigger that leaves a parallel state once one of its regions failed."""


def go(path: str) -> str:
    """The trigger that moves to the state at `path`."""
    return f"go:{path}"


def exhaust(level: str) -> str:
    """The trigger that routes a run whose `level` ran out of budget or iterations."""
    return f"exhaust:{level}"


@dataclass(frozen=True)
class Node:
    """One state of the flattened chart tree."""

    path: str
    state: State | None
    """None for the `think`/`act`/`approve` sub-states of a model state."""
    chart: Chart
    """The chart (level) the state belongs to."""
    prefix: str
    """Path prefix of that level: `""` at the root, `"explore."` inside `explore`."""
    scope: str = ""
    """Whose context the state reads and writes: `""` for the root's, else the path of the
    nearest ported chart state around it (a sub-chart with `input=`/`output=`)."""


@dataclass(frozen=True)
class Transition:
    """A compiled transition: where a trigger leads from one source."""

    trigger: str
    source: str
    dest: str
    edge: Edge | None = None
    """The user's edge (with its guard and cap), if this transition is one."""
    counter: str = ""
    """`source->dest` in full paths: the traversal counter key of a capped edge."""
    named: bool = False
    """Taken by naming its target (`next_state`, a handler's decision): a user edge or the
    implicit escalation; `trigger` is then `go(dest)`."""


@dataclass(frozen=True, eq=False)
class Level:
    """A budget level: its caps and the trigger that routes it when spent."""

    path: str
    caps: dict[str, int]
    on_exhausted: str
    """Trigger fired (from anywhere below the level) when a cap is reached."""
    strict: bool = False
    """Its token and cost caps are never passed (`Budget.strict`)."""

    @cached_property
    def hard(self) -> tuple[tuple[str, int], ...]:
        """The caps that stop every step once reached: steps and wall time."""
        return tuple((k, v) for k, v in self.caps.items() if k in HARD_KINDS)

    @cached_property
    def all(self) -> tuple[tuple[str, int], ...]:
        """Every cap of the level, as (kind, cap) pairs."""
        return tuple(self.caps.items())


@dataclass(frozen=True)
class Timer:
    """An `after=` edge: armed when its source is entered, taken `seconds` later."""

    label: str
    """`source->target`, full paths: its key in `Run.timers`."""
    target: str
    seconds: float


@dataclass(frozen=True)
class Move:
    """The outcome of resolving a trigger: the new leaf and what was exited and entered."""

    transition: Transition
    leaf: str
    exited: tuple[str, ...]
    entered: tuple[str, ...]
    counted: tuple[str, ...] = ()
    """The entered paths that are user states (their visit counters go up)."""
    visit: str | None = None
    """The model state whose new visit this move starts, if any."""
    status: str = "running"
    """The run's status once here: `running`, `waiting` (approval) or `ended`."""
    through: tuple[str, ...] = ()
    """The sub-chart terminals the move passed through on its way out, innermost first."""
    crosses: bool = False
    """It leaves or enters a ported sub-chart (one on a context of its own)."""
    ports: tuple[dict[str, Any], dict[str, Any]] | None = None
    """What `try_move` computed crossing those borders (outputs, inputs), so the step that
    takes the move does not call a mapping again."""
    reason: str = ""
    """Why a run that lands here waits or ended (`status` says which), worded once."""
    clears_visit: bool = False
    """The leaf is not in a model state: the run's current visit ends."""
    remembered: dict[str, str] | None = None
    """`history=` chart states this move leaves: an interrupted one -> where it will
    resume, one whose sub-chart ended -> "" (forgotten); None when there are none."""
    regions: tuple[tuple[str, str], ...] = ()
    """For a move into a parallel state (`leaf`): each region (path) and the leaf it
    starts at; `entered` lists them too, level by level."""
