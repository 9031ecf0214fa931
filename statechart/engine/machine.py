"""The chart's one `transitions` hierarchical machine: the only place `transitions` is used.

Built once per chart with a `.` separator and one reusable holder object, so
one machine serves every run. Callbacks never await; a trigger that the
machine does not know, or that is illegal where the run is, raises
`IllegalTransitionError` (never `transitions.MachineError`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from transitions import MachineError
from transitions.extensions.nesting import HierarchicalMachine, NestedState

from statechart.errors import IllegalTransitionError

if TYPE_CHECKING:
    from statechart.engine.tables import Transition

EXIT = "exit"


class _DotState(NestedState):
    separator = "."


class _Machine(HierarchicalMachine):
    state_cls = _DotState


class _Holder:
    """The one reusable model object whose `state` attribute the machine drives."""

    state: str = ""
    trigger: Callable[..., bool]
    """Bound by the machine; only annotated, since `transitions` never rebinds a name."""


class MachinePair:
    """The machine the tables are read from, and a twin with enter/exit recorders that
    only the differential test uses."""

    def __init__(
        self,
        tree: list[Any],
        transitions: list[Transition],
        initial: str,
        paths: list[str],
    ) -> None:
        self._tree = tree
        self._transitions = transitions
        self._initial = initial
        self._paths = paths
        self._trace: list[tuple[str, str]] | None = None
        self._lock = threading.Lock()
        self._holder = _Holder()
        self._traced_holder = _Holder()

    @cached_property
    def machine(self) -> _Machine:
        """The `transitions` machine the chart compiles to (one per chart, shared)."""
        return self._build(self._holder, traced=False)

    @cached_property
    def _traced(self) -> _Machine:
        return self._build(self._traced_holder, traced=True)

    def transitions(self) -> Iterator[tuple[str, str, str]]:
        """Every (trigger, source, dest) the machine holds; one per trigger and source."""
        for trigger, event in self.machine.events.items():
            for source, found in event.transitions.items():
                if len(found) != 1:
                    raise RuntimeError(f"machine has {len(found)} '{trigger}' from '{source}'")
                yield trigger, source, str(found[0].dest)

    def _build(self, holder: _Holder, *, traced: bool) -> _Machine:
        m = _Machine(
            model=holder,
            states=self._tree,
            initial=self._initial,
            auto_transitions=False,
            send_event=True,
            model_attribute="state",
        )
        for t in self._transitions:
            conds: list[Callable[..., bool | None] | str] = []
            if t.edge is not None and t.edge.guard is not None:
                conds.append(lambda ev, t=t: bool(ev.kwargs["allow"](t)))
            m.add_transition(t.trigger, t.source, t.dest, conditions=conds)
        for path in self._paths if traced else ():
            state = m.get_state(path)
            state.add_callback("enter", lambda ev, p=path: self._record("entered", p))
            state.add_callback("exit", lambda ev, p=path: self._record("exited", p))
        return m

    def _record(self, what: str, path: str) -> None:
        if self._trace is not None:
            self._trace.append((what, path))

    def fire(
        self,
        leaf: str,
        trigger: str,
        allow: Callable[[Transition], bool],
        trace: list[tuple[str, str]] | None = None,
    ) -> str | None:
        """Trigger from `leaf` and follow sub-chart exits; the new leaf, or None if a guard
        refused. With `trace`, the states exited and entered are appended to it in order."""
        m, h = self.machine, self._holder
        if trace is not None:
            m, h = self._traced, self._traced_holder
        if trigger not in m.events:
            raise IllegalTransitionError(leaf, trigger, "the chart has no such trigger")
        with self._lock:
            m.set_state(leaf, model=h)
            self._trace = trace
            try:
                if not h.trigger(trigger, allow=allow):
                    return None
                while EXIT in m.get_triggers(h.state):
                    h.trigger(EXIT, allow=allow)
                return str(h.state)
            except MachineError as exc:
                raise IllegalTransitionError(leaf, trigger, str(exc.value)) from exc
            finally:
                self._trace = None
