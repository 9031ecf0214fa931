"""Build-time validation of a chart: every failure names what is wrong and how to fix it."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from statechart.chart.contexts import check_contexts, check_ports
from statechart.chart.names import ESCALATED, EXHAUSTED, IMPLICIT, RESERVED
from statechart.errors import (
    ChartError,
    ChartWarning,
    DuplicateStateError,
    MalformedStateNameError,
    MissingBudgetError,
    NoExitError,
    NoTerminalStateError,
    ToolDefinitionError,
    UncappedCycleError,
    UndeclaredFieldError,
    UnknownTargetError,
    UnreachableStateError,
)

if TYPE_CHECKING:
    from statechart.chart.chart import Chart, State

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def validate(chart: Chart) -> None:
    """Raise the first problem found in `chart` (and its sub-charts, built here)."""
    _check_names(chart)
    if all(s.name in IMPLICIT for s in chart.states):
        raise ChartError(
            f"chart '{chart.name}' has no states; give it states=(State(...), ...), at least "
            "one to start in and a terminal to end in"
        )
    states = {s.name: s for s in chart.states}
    if chart.initial not in states:
        raise UnknownTargetError(
            f"chart '{chart.name}': initial state '{chart.initial}' is not one of its states"
        )
    if states[str(chart.initial)].kind == "terminal":
        raise ChartError(
            f"chart '{chart.name}': initial state '{chart.initial}' is terminal, so a run (or a "
            "sub-chart) would end before it starts; start in a non-terminal state"
        )
    if not any(s.kind == "terminal" and s.name not in IMPLICIT for s in chart.states):
        raise NoTerminalStateError(
            f"chart '{chart.name}' has no terminal state of its own; "
            "add one, e.g. State('done', kind='terminal')"
        )
    _check_kinds(chart)
    _check_fields(chart)
    graph = exit_graph(chart)
    _check_exits(chart)
    _check_reachable(chart, graph)
    _check_cycles(chart)
    _check_exhaustion_targets(chart)


def _check_names(chart: Chart) -> None:
    seen: set[str] = set()
    for s in chart.states:
        if not NAME.match(s.name):
            raise MalformedStateNameError(
                f"chart '{chart.name}': state name {s.name!r} is malformed; use letters, "
                "digits, '_' or '-', starting with a letter ('.' separates nested paths)"
            )
        if s.name in RESERVED:
            raise MalformedStateNameError(
                f"chart '{chart.name}': state name '{s.name}' is reserved (for the sub-states "
                "of model states, the root's cancel target, and 'root' for the chart's own "
                "budget in traces); choose another name"
            )
        if s.name in seen:
            raise DuplicateStateError(
                f"chart '{chart.name}': state '{s.name}' is defined twice; rename one"
            )
        seen.add(s.name)


def _check_kinds(chart: Chart) -> None:
    names = {s.name for s in chart.states}
    for s in chart.states:
        where = f"chart '{chart.name}', state '{s.name}'"
        if s.name in IMPLICIT and s.kind != "terminal":
            raise MalformedStateNameError(f"{where}: '{s.name}' is reserved for a terminal state")
        if (s.input is not None or s.output is not None) and s.kind not in ("chart", "map"):
            raise ChartError(
                f"{where}: input=/output= are for chart and map states (kind is '{s.kind}')"
            )
        if s.outcome != "success" and s.kind != "terminal":
            raise ChartError(
                f"{where}: outcome='{s.outcome}' is for terminal states (kind is '{s.kind}')"
            )
        if s.outcome not in ("success", "failure"):
            raise ChartError(f"{where}: outcome={s.outcome!r}; use 'success' or 'failure'")
        if s.kind == "code" and s.handler is None:
            raise ChartError(f"{where}: a code state needs handler=")
        if s.history is not None and s.kind != "chart":
            raise ChartError(
                f"{where}: history= is for chart states (kind is '{s.kind}'): it says where "
                "a sub-chart resumes when the state is entered again"
            )
        if s.history not in (None, "shallow", "deep"):
            raise ChartError(f"{where}: history={s.history!r}; use 'shallow' or 'deep'")
        if s.kind == "chart":
            _check_chart_state(chart, s, where, names)
        if s.kind in ("parallel", "map"):
            _check_parallel_state(chart, s, where, names)
        elif s.regions:
            raise ChartError(f"{where}: regions= is for parallel states (kind is '{s.kind}')")
        if s.kind == "approval":
            for attr in ("on_approve", "on_reject"):
                target = getattr(s, attr)
                if target is None:
                    raise ChartError(f"{where}: an approval state needs {attr}=")
                if target not in names:
                    raise UnknownTargetError(f"{where}: {attr}='{target}' is not a state")
        if s.on_exhausted not in names:
            raise UnknownTargetError(
                f"{where}: on_exhausted='{s.on_exhausted}' is not a state of the chart"
            )
        _check_caps(s, where)
        if s.kind == "model" and not s.reads and not s.instructions:
            warnings.warn(
                f"{where}: a model state with neither reads= nor instructions= shows the "
                "model only its tools and exits; say what it should do",
                ChartWarning,
                stacklevel=5,
            )
    if chart.on_exhausted not in names:
        raise UnknownTargetError(
            f"chart '{chart.name}': on_exhausted='{chart.on_exhausted}' is not a state of the chart"
        )
    _check_edges(chart, names)


def _check_caps(s: State, where: str) -> None:
    for attr in ("max_iterations", "max_visits"):
        value = getattr(s, attr)
        if value is not None and value < 1:
            raise ChartError(f"{where}: {attr}={value}; a cap must be at least 1")
    for t, cap in s.max_calls.items():
        if t not in s.tool_map:
            raise ChartError(f"{where}: max_calls names tool '{t}', which the state lacks")
        if cap < 0:
            raise ChartError(f"{where}: max_calls['{t}']={cap}; a cap cannot be negative")
    if s.tools and s.kind != "model":
        raise ChartError(f"{where}: only model states offer tools (kind is '{s.kind}')")
    names = [t.name for t in s.tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ToolDefinitionError(
            f"{where}: two tools are named '{twice[0]}', so the model would be offered both "
            "under one name; rename one (tool(name=...)) or drop it"
        )
    if "next_state" in s.tool_map:
        raise ToolDefinitionError(f"{where}: a tool may not be named 'next_state'; rename it")


def _check_chart_state(chart: Chart, s: State, where: str, names: set[str]) -> None:
    if s.chart is None or not callable(s.chart) or isinstance(s.chart, type(chart)):
        raise ChartError(
            f"{where}: a chart state needs chart= a factory (a function returning a Chart), "
            "so no two parents share one sub-chart"
        )
    child = chart.children[s.name]
    kids = {c.name for c in child.states if c.kind == "terminal"}
    for term, target in s.exits.items():
        if term not in kids:
            raise UnknownTargetError(
                f"{where}: exits maps '{term}', which is not a terminal state of "
                f"sub-chart '{child.name}' ({', '.join(sorted(kids))})"
            )
        if target not in names:
            raise UnknownTargetError(
                f"{where}: exits maps '{term}' to '{target}', which is not a state of "
                f"chart '{chart.name}'"
            )
    if s.ported:
        check_ports(chart, s, child, where)
    unmapped = sorted(k for k in kids if k not in s.exits and k not in IMPLICIT)
    if unmapped:
        raise NoExitError(
            f"{where}: sub-chart terminal(s) {', '.join(unmapped)} have no exit; "
            f"add them to exits= (e.g. exits={{'{unmapped[0]}': '...'}})"
        )


def _check_parallel_state(chart: Chart, s: State, where: str, names: set[str]) -> None:
    if s.kind == "map":
        _check_map_state(chart, s, where)
    elif not s.regions:
        raise ChartError(
            f"{where}: a parallel state needs regions=, e.g. "
            "(State('a', kind='chart', chart=make_a), State('b', kind='chart', chart=make_b))"
        )
    if s.join not in ("all", "first"):
        raise ChartError(f"{where}: join={s.join!r}; use 'all' or 'first'")
    if set(s.exits) != {"done"}:
        raise NoExitError(
            f"{where}: a parallel state leaves by exits={{'done': ...}} once its regions "
            f"joined (it has {sorted(s.exits) or 'none'}); name the state to go to"
        )
    for what, target in (
        ("exits['done']", s.exits["done"]),
        ("on_region_failure", s.on_region_failure),
    ):
        if target not in names:
            raise UnknownTargetError(
                f"{where}: {what}='{target}' is not a state of chart '{chart.name}'"
            )
    seen: set[str] = set()
    for r in s.regions if s.kind == "parallel" else s.regions[:1]:
        here = f"{where}, region '{r.name}'"
        named = NAME.match(r.name) and r.name not in RESERVED and r.name not in IMPLICIT
        if s.kind == "parallel" and not named:
            raise MalformedStateNameError(
                f"{here}: a region name is a state name (letters, digits, '_' or '-', "
                "starting with a letter, not reserved); rename it"
            )
        if r.name in seen:
            raise DuplicateStateError(f"{here}: two regions are named '{r.name}'; rename one")
        seen.add(r.name)
        if r.kind != "chart" or r.chart is None or not callable(r.chart):
            raise ChartError(
                f"{here}: a region is a chart state: State('{r.name}', kind='chart', "
                "chart=a factory returning its Chart)"
            )
        if r.exits or r.history is not None or r.regions:
            raise ChartError(
                f"{here}: a region ends in its sub-chart's terminals (no exits=, history= "
                "or regions=); the parallel state's exits say where the run goes next"
            )
        child = chart.children[f"{s.name}.{r.name}"]
        if _holds_parallel(child):
            raise ChartError(
                f"{here}: its sub-chart '{child.name}' holds a parallel or map state, and "
                "regions do not nest yet; make the inner regions regions of this state"
            )
        if r.ported and s.kind == "parallel":
            check_ports(chart, r, child, here)


def _check_map_state(chart: Chart, s: State, where: str) -> None:
    """A map state names its list, the sub-chart's field for each item, and how its
    outputs gather; the rest is a parallel state's."""
    if s.chart is None or not callable(s.chart):
        raise ChartError(f"{where}: a map state needs chart=, a factory of the sub-chart")
    if s.max_items < 1 or (s.max_concurrency is not None and s.max_concurrency < 1):
        raise ChartError(f"{where}: max_items and max_concurrency must be >= 1")
    names = [r.name for r in s.regions]
    if names != [str(i) for i in range(s.max_items)]:
        raise ChartError(f"{where}: a map state makes its regions (one per item); drop regions=")
    parent_t = chart.context
    child = chart.children[f"{s.name}.0"]
    child_t = child.context
    if s.over is None or s.over not in parent_t.model_fields:
        raise UndeclaredFieldError(
            f"{where}: over={s.over!r} must name a list field of {parent_t.__name__} "
            f"(it has {', '.join(parent_t.model_fields) or 'none'})"
        )
    if s.item is None or s.item not in child_t.model_fields:
        raise UndeclaredFieldError(
            f"{where}: item={s.item!r} must name the field of {child_t.__name__} (the "
            f"sub-chart's context) each item fills; it has "
            f"{', '.join(child_t.model_fields) or 'none'}"
        )
    if s.output is not None and not isinstance(s.output, Mapping):
        raise ChartError(
            f"{where}: a map state's output= maps a list field of {parent_t.__name__} to a "
            "field of each instance's context, e.g. output={'reviews': 'verdict'}"
        )
    sides = (
        ("input", s.input if isinstance(s.input, Mapping) else {}, child_t, parent_t),
        ("output", s.output or {}, parent_t, child_t),
    )
    for port, mapping, to_t, from_t in sides:
        for to_field, from_field in mapping.items():
            for name, owner in ((to_field, to_t), (from_field, from_t)):
                if name not in owner.model_fields:
                    raise UndeclaredFieldError(
                        f"{where}: {port} maps '{to_field}' <- '{from_field}', but "
                        f"{owner.__name__} has no field '{name}'"
                    )
    if not callable(s.input):
        filled = {s.item, *(s.input or {})}
        missing = [
            n for n, f in child_t.model_fields.items() if f.is_required() and n not in filled
        ]
        if missing:
            raise UndeclaredFieldError(
                f"{where}: sub-chart '{child.name}' requires {child_t.__name__}.{missing[0]}, "
                "which neither item= nor input= fills; map it or give it a default"
            )


def _holds_parallel(chart: Chart) -> bool:
    """A parallel or map state is somewhere in `chart` or its sub-charts."""
    return any(s.kind in ("parallel", "map") for s in chart.states) or any(
        _holds_parallel(c) for c in chart.children.values()
    )


def _check_edges(chart: Chart, names: set[str]) -> None:
    for e in chart.edges:
        for end in (e.source, e.target):
            if end not in names:
                raise UnknownTargetError(
                    f"chart '{chart.name}', edge {e.label}: '{end}' is not a state of the chart; "
                    "fix the name or add the state"
                )
        if e.max_traversals is not None and e.max_traversals < 1:
            raise ChartError(f"chart '{chart.name}', edge {e.label}: max_traversals must be >= 1")
        if e.after is not None and e.guard is not None:
            raise ChartError(
                f"chart '{chart.name}', edge {e.label}: an edge with after= is taken when its "
                "timer fires, so it takes no guard; guard the state's other edges instead"
            )
        src = chart.state_map[e.source]
        if src.kind == "terminal":
            raise ChartError(f"chart '{chart.name}', edge {e.label}: terminal states have no exits")
        if src.kind == "chart" and e.after is None:
            raise ChartError(
                f"chart '{chart.name}', edge {e.label}: a chart state leaves through its "
                f"sub-chart's terminals; map them with exits= instead of an edge (only an "
                f"after= edge may interrupt it)"
            )
        if src.kind in ("parallel", "map") and e.after is None:
            raise ChartError(
                f"chart '{chart.name}', edge {e.label}: a parallel state leaves once its "
                "regions joined, by exits={'done': ...} (or on_region_failure=); only an "
                "after= edge may interrupt it"
            )
    keys = [e.label for e in chart.edges]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ChartError(f"chart '{chart.name}': edge {dupes[0]} is defined twice; keep one")


def _check_fields(chart: Chart) -> None:
    declared = set(chart.context.model_fields)
    for name, info in chart.context.model_fields.items():
        if info.alias is not None and info.alias != name:
            raise UndeclaredFieldError(
                f"chart '{chart.name}': context field '{name}' has alias '{info.alias}'; the "
                "context is stored by field name, so drop the alias"
            )
    for s in chart.states:
        for kind, fields in (("reads", s.reads), ("writes", s.writes)):
            for f in fields:
                if f not in declared:
                    raise UndeclaredFieldError(
                        f"chart '{chart.name}', state '{s.name}' {kind} '{f}', which context "
                        f"type {chart.context.__name__} does not declare; add the field there"
                    )


def exit_graph(chart: Chart) -> dict[str, set[str]]:
    """Every way out of each state: edges, approval outcomes, sub-chart exits, exhaustion.

    The chart's own `on_exhausted` counts from every live state: its budget (the root's
    `max_steps` at least) can run out anywhere.
    """
    graph: dict[str, set[str]] = {s.name: set() for s in chart.states}
    for e in chart.edges:
        graph[e.source].add(e.target)
    for s in chart.states:
        if s.kind == "approval":
            graph[s.name].update(t for t in (s.on_approve, s.on_reject) if t)
        if s.kind == "chart":
            graph[s.name].update(s.exits.values())
            graph[s.name].add(s.exits.get(EXHAUSTED, s.on_exhausted))
        if s.kind in ("parallel", "map"):
            graph[s.name].update((*s.exits.values(), s.on_region_failure))
            if s.budget is not None:
                graph[s.name].add(s.on_exhausted)
        if s.kind != "terminal":
            graph[s.name].update((ESCALATED, chart.on_exhausted))
            if s.kind == "model" or s.budget is not None:
                graph[s.name].add(s.on_exhausted)
    return graph


def _check_exits(chart: Chart) -> None:
    sources = {e.source for e in chart.edges if e.target != ESCALATED}
    for s in chart.states:
        if s.kind in ("model", "code") and s.name not in sources:
            raise NoExitError(
                f"chart '{chart.name}': state '{s.name}' has no exit but escalation; "
                f"add an Edge('{s.name}', ...)"
            )


def _check_reachable(chart: Chart, graph: dict[str, set[str]]) -> None:
    seen = {chart.initial}
    todo = [chart.initial]
    while todo:
        for nxt in graph[str(todo.pop())]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    for s in chart.states:
        if s.name not in seen and s.name not in IMPLICIT:
            raise UnreachableStateError(
                f"chart '{chart.name}': state '{s.name}' cannot be reached from "
                f"'{chart.initial}'; add an edge into it or remove it"
            )


def _check_cycles(chart: Chart) -> None:
    """Every cycle must pass a state with `max_visits` or an edge with `max_traversals`."""
    capped = {s.name for s in chart.states if s.max_visits is not None}
    graph: dict[str, list[str]] = {s.name: [] for s in chart.states if s.name not in capped}
    for e in chart.edges:
        if e.max_traversals is None and e.source in graph and e.target in graph:
            graph[e.source].append(e.target)
    for s in chart.states:
        if s.kind in ("chart", "parallel", "map") and s.name in graph:
            for t in set(s.exits.values()):
                if t in graph:
                    graph[s.name].append(t)
        if s.kind == "approval" and s.name in graph:
            declared = {e.target for e in chart.edges if e.source == s.name}
            for out in (s.on_approve, s.on_reject):
                if out is not None and out in graph and out not in declared:
                    graph[s.name].append(out)
    path = _first_cycle(graph)
    if path:
        raise UncappedCycleError(
            f"chart '{chart.name}': cycle {path} has no cap; set max_visits on one of its "
            "states or max_traversals on one of its edges"
        )


def _check_exhaustion_targets(chart: Chart) -> None:
    """Routing on exhaustion is free, so it must never lead back into a spent budget."""
    hops: dict[str, list[str]] = {}
    for s in chart.states:
        budgeted = s.budget is not None or (
            s.kind == "chart" and chart.children[s.name].budget is not None
        )
        if not budgeted:
            continue
        target = s.exits.get(EXHAUSTED, s.on_exhausted) if s.kind == "chart" else s.on_exhausted
        if target == s.name:
            raise ChartError(
                f"chart '{chart.name}': state '{s.name}' has a budget and on_exhausted pointing "
                "at itself; route it to another state (default 'escalated')"
            )
        hops[s.name] = [target]
    graph = {name: [t for t in targets if t in hops] for name, targets in hops.items()}
    path = _first_cycle(graph)
    if path:
        raise ChartError(
            f"chart '{chart.name}': exhaustion targets form a cycle {path}; a spent budget "
            "would route forever. Route one of them to a state without a budget"
        )


def _first_cycle(graph: dict[str, list[str]]) -> str | None:
    """The first cycle found, as `a -> b -> a`, or None."""
    cycle = next(_cycles(graph), None)
    return " -> ".join([*cycle, cycle[0]]) if cycle else None


def _cycles(graph: dict[str, list[str]]) -> Iterator[list[str]]:
    color: dict[str, int] = dict.fromkeys(graph, 0)
    stack: list[str] = []

    def visit(node: str) -> Iterator[list[str]]:
        color[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if color[nxt] == 1:
                yield stack[stack.index(nxt) :]
            elif color[nxt] == 0:
                yield from visit(nxt)
        stack.pop()
        color[node] = 2

    for node in graph:
        if color[node] == 0:
            yield from visit(node)


def validate_root(chart: Chart) -> None:
    """What only a root chart must satisfy; checked when it is compiled to run."""
    if chart.budget is None or chart.budget.max_steps is None:
        raise MissingBudgetError(
            f"root chart '{chart.name}' has no max_steps; give it "
            "budget=Budget(max_steps=...) so every run is bounded"
        )
    if chart.state_map[chart.on_exhausted].kind != "terminal":
        raise ChartError(
            f"root chart '{chart.name}': on_exhausted='{chart.on_exhausted}' must be a "
            "terminal state, or an exhausted run could not end"
        )
    check_contexts(chart, chart.context)
