"""Deriving a chart from another without editing it: the `Chart` methods of the same names.

Each returns a new `Chart`, built (so validated) like any other and with its own `version`;
the chart it came from is unchanged. Kept edges keep their guards and `max_traversals`.

- `replace_state(name, state, exits=)`: `state` takes the place of state `name` (same name).
  Incoming edges stay. A state that becomes `kind="chart"` leaves only through `exits`
  (sub-chart terminal -> parent target): each outgoing edge's target must be one of the
  mapping's targets (or `escalated`, always open), its self-edge is dropped. A chart state
  that becomes another kind gets an edge to each target its exits mapped. A state that
  becomes terminal loses its outgoing edges.
- `with_states(*states, edges=)`: adds states and the edges that reach them.
- `with_edges(*edges)`: adds edges; one with the `source->target` of an existing edge
  replaces it (to change a guard or a cap).
- `without_edges(*labels)`: removes edges named `source->target`.
- `with_tools(name, *tools)`: the tools state `name` offers, exactly these; `max_calls` caps
  of tools no longer offered go with them.
- `with_budget(budget)`, `with_name(name)`: the whole chart's budget, its name.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from statechart.chart.names import ESCALATED, IMPLICIT
from statechart.errors import ChartWarning, DerivationError

if TYPE_CHECKING:  # chart.py calls this module, so it imports only its types
    from statechart.chart.budget import Budget
    from statechart.chart.chart import Chart, Edge, State
    from statechart.chart.tools import Tool


def replace_state(
    chart: Chart,
    name: str,
    state: State,
    *,
    exits: Mapping[str, str] | None = None,
    edge: type[Edge],
) -> Chart:
    """`chart` with `state` in place of its state `name` (`edge`: the Edge class)."""
    old = _state(chart, name, "replace_state")
    where = f"chart '{chart.name}', replace_state('{name}', ...)"
    if state.name != name:
        raise DerivationError(
            f"{where}: the new state is named '{state.name}'; give it the name '{name}' "
            "(edges and exits into it keep pointing at that name)"
        )
    if exits and state.kind != "chart":
        raise DerivationError(
            f"{where}: exits= maps a sub-chart's terminals, but the new state is a "
            f"'{state.kind}' state; drop exits=, or give State('{name}', kind='chart', chart=...)"
        )
    leaving = [e for e in chart.edges if e.source == name]
    edges = tuple(e for e in chart.edges if e.source != name)
    if state.kind == "chart":
        state = _exits_for(chart, state, dict(exits or {}), leaving)
    elif state.kind != "terminal":
        edges = chart.edges + _edges_for(old, chart.edges, edge)
    states = tuple(state if s.name == name else s for s in chart.states)
    return dataclasses.replace(chart, states=states, edges=edges)


def with_states(chart: Chart, states: Iterable[State], edges: Iterable[Edge] = ()) -> Chart:
    """`chart` with `states` added, and `edges` (added or replacing, as `with_edges`)."""
    added = tuple(states)
    for s in added:
        if s.name in chart.state_map:
            raise DerivationError(
                f"chart '{chart.name}' already has a state '{s.name}'; change it with "
                f"replace_state('{s.name}', ...), or give the new state another name"
            )
    return dataclasses.replace(
        chart, states=_own(chart) + added, edges=_merged(chart, tuple(edges))
    )


def with_edges(chart: Chart, edges: Iterable[Edge]) -> Chart:
    """`chart` with `edges` added; one with an existing edge's `source->target` replaces it."""
    return dataclasses.replace(chart, edges=_merged(chart, tuple(edges)))


def without_edges(chart: Chart, labels: Iterable[str]) -> Chart:
    """`chart` without the edges named `source->target`."""
    dropped = set(labels)
    unknown = sorted(dropped - {e.label for e in chart.edges})
    if unknown:
        raise DerivationError(
            f"chart '{chart.name}' has no edge {', '.join(unknown)}; name edges as "
            f"'source->target', one of: {', '.join(e.label for e in chart.edges)}"
        )
    return dataclasses.replace(chart, edges=tuple(e for e in chart.edges if e.label not in dropped))


def with_tools(chart: Chart, name: str, tools: Iterable[Tool]) -> Chart:
    """`chart` whose state `name` offers exactly `tools`."""
    old = _state(chart, name, "with_tools")
    offered = tuple(tools)
    kept = {t.name for t in offered}
    caps = {tool: cap for tool, cap in old.max_calls.items() if tool in kept}
    new = dataclasses.replace(old, tools=offered, max_calls=caps)
    states = tuple(new if s.name == name else s for s in chart.states)
    return dataclasses.replace(chart, states=states)


def with_budget(chart: Chart, budget: Budget | None) -> Chart:
    """`chart` with `budget` as the whole chart's budget."""
    return dataclasses.replace(chart, budget=budget)


def with_name(chart: Chart, name: str) -> Chart:
    """`chart` under another name (runs, traces and `statechart runs` show it)."""
    return dataclasses.replace(chart, name=name)


def _state(chart: Chart, name: str, method: str) -> State:
    found = chart.state_map.get(name)
    if found is None:
        raise DerivationError(
            f"chart '{chart.name}' has no state '{name}' (its states: "
            f"{', '.join(s.name for s in chart.states)}); {method}() names a state of this "
            "chart, not a path into a sub-chart (derive the sub-chart and replace its state)"
        )
    return found


def _own(chart: Chart) -> tuple[State, ...]:
    """The chart's states without the implicit terminals it added after them, so states
    added later come before those, as if the chart had been written with them."""
    states = list(chart.states)
    while states and states[-1].name in IMPLICIT and states[-1] == _implicit(states[-1]):
        states.pop()
    return tuple(states)


def _implicit(state: State) -> State:
    """The terminal `complete_states` adds under this state's name."""
    return type(state)(state.name, kind="terminal", outcome="failure")


def _merged(chart: Chart, edges: tuple[Edge, ...]) -> tuple[Edge, ...]:
    labels = [e.label for e in edges]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise DerivationError(f"chart '{chart.name}': edge {twice[0]} is given twice; give it once")
    new = {e.label: e for e in edges}
    kept = tuple(new.pop(e.label, e) for e in chart.edges)
    return kept + tuple(new.values())


def _exits_for(chart: Chart, state: State, exits: dict[str, str], leaving: list[Edge]) -> State:
    """`state` (a chart state) with `exits` added, once every edge `leaving` the state it
    replaces is covered by one of their targets."""
    where = f"chart '{chart.name}', replace_state('{state.name}', ...)"
    mapping = dict(state.exits)
    for term, target in exits.items():
        if mapping.setdefault(term, target) != target:
            raise DerivationError(
                f"{where}: exits= maps '{term}' to '{target}', the new state's own exits to "
                f"'{mapping[term]}'; map it once"
            )
    covered = {*mapping.values(), ESCALATED, state.name}  # the self-edge is dropped
    uncovered = [e for e in leaving if e.target not in covered]
    if uncovered:
        edges = ", ".join(e.label for e in uncovered)
        many = len(uncovered) > 1
        first, example = uncovered[0].target, _free_terminal(state, mapping)
        raise DerivationError(
            f"{where}: edge{'s' if many else ''} {edges} leave{'' if many else 's'} "
            f"'{state.name}', which becomes a chart state; a chart state leaves only through "
            f"exits=, and no exit maps to '{first}'. Map a terminal of its sub-chart there "
            f"(exits={{'{example}': '{first}'}})"
        )
    for e in leaving:
        if e.target != state.name and (e.guard is not None or e.max_traversals is not None):
            what = "a guard" if e.guard is not None else f"max_traversals={e.max_traversals}"
            warnings.warn(
                f"{where}: edge {e.label} had {what}, which an exit cannot carry, so it is "
                "dropped with the edge; enforce it inside the sub-chart, before its terminal",
                ChartWarning,
                stacklevel=4,  # the caller of Chart.replace_state
            )
    return dataclasses.replace(state, exits=mapping)


def _free_terminal(state: State, mapping: Mapping[str, str]) -> str:
    """A terminal of the sub-chart no exit maps yet, to show in an example ('done' if the
    sub-chart does not build: the chart's validation will say why)."""
    if not callable(state.chart):
        return "done"
    try:
        child = state.chart()
    except Exception:
        return "done"
    free = [
        s.name
        for s in getattr(child, "states", ())
        if s.kind == "terminal" and s.name not in IMPLICIT and s.name not in mapping
    ]
    return free[0] if free else "done"


def _edges_for(old: State, edges: tuple[Edge, ...], edge: type[Edge]) -> tuple[Edge, ...]:
    """When a chart state becomes another kind: an edge to each target its exits mapped
    (its sub-chart's own terminals, not `escalated` or `exhausted`)."""
    if old.kind != "chart":
        return ()
    have = {e.label for e in edges}
    out: dict[str, Edge] = {}
    for term, target in old.exits.items():
        new = edge(old.name, target)
        if term not in IMPLICIT and target != ESCALATED and new.label not in have:
            out.setdefault(new.label, new)
    return tuple(out.values())
