"""Mermaid state diagrams of charts, nested states drawn nested; a run's current state
and the edges it took can be marked."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from statechart.chart.chart import Chart, State
from statechart.chart.names import ESCALATED, EXHAUSTED, IMPLICIT
from statechart.engine import compiled
from statechart.records.run import Event, Run


def mermaid(chart: Chart, run: Run | None = None, events: Sequence[Event] = ()) -> str:
    """A `stateDiagram-v2` of `chart`; with `run`, its active states are highlighted and
    each edge is labelled with how often the run took it.

    Besides the chart's edges and sub-chart exits, the routes the chart takes by itself are
    drawn: an edge labelled `exhausted` from each state whose cap or budget routes it
    somewhere other than the implicit escalation (`on_exhausted`). The implicit `escalated`
    and `exhausted` terminals are drawn only when an edge of the drawing reaches them (an
    edge, exit or route that names them, or the move a run took into them), with a dashed
    outline; every state may escalate, and an edge from each would hide the chart.
    """
    if run is not None and run.chart_version != chart.version:
        raise ValueError(
            f"run {run.run_id} is a run of chart '{run.chart}' version "
            f"{run.chart_version}, not of '{chart.name}' version {chart.version}"
        )
    nodes = compiled(chart).nodes
    hosts = {p for p, n in nodes.items() if n.state is not None and n.state.kind == "chart"}
    taken = _Taken(Counter(e.edge for e in events if e.edge))
    for e in events:
        for h in e.exited:
            for t in e.entered:
                if t == h or _parent(t) != _parent(h):
                    continue
                if h in hosts:  # a sub-chart's exit: left its host for a sibling
                    taken.exits[f"{h}->{t}", e.exhausted is not None] += 1
                if e.edge is None:  # moved by the chart itself: a cap, or an escalation
                    taken.routes[f"{h}->{t}", e.exhausted is not None] += 1
    visited = {p for e in events for p in e.entered} | ({run.state} if run else set())
    lines = ["stateDiagram-v2"]
    implicit: list[str] = []
    _chart(lines, chart, "", 1, taken, visited, implicit)
    if implicit:
        lines.append("  classDef implicit stroke-dasharray:4 4")
        lines.append(f"  class {','.join(implicit)} implicit")
    if run is not None:
        leaves = [run.state, *(_template(chart, r.state) for r in run.regions.values())]
        active = list(dict.fromkeys(_id(p) for leaf in leaves for p in _active(chart, leaf)))
        lines.append("  classDef current fill:#fde68a,stroke:#b45309,stroke-width:2px")
        if active:
            lines.append(f"  class {','.join(active)} current")
    return "\n".join(lines) + "\n"


@dataclass
class _Taken:
    """What a run took, by `source->target` (full paths)."""

    edges: Counter[str]
    """User edges (and an approval's implicit edges), from `Event.edge`."""
    exits: Counter[tuple[str, bool]] = field(default_factory=Counter)
    """Sub-chart exits `host->target`, and whether a cap forced them."""
    routes: Counter[tuple[str, bool]] = field(default_factory=Counter)
    """Moves no edge made (caps, escalations) between siblings, and whether a cap forced
    them."""


def _exhausts(chart: Chart, s: State) -> bool:
    """Whether running out routes `s` to its `on_exhausted`: a model state (its
    `max_iterations`), a state with a budget, or a sub-chart whose `exhausted` terminal a
    budget or one of its states routes to."""
    if s.kind == "model":
        return True
    if s.budget is not None and s.budget.caps():
        return s.kind != "terminal"
    if s.kind != "chart":
        return False
    child = chart.children[s.name]
    return (
        bool(child.budget and child.budget.caps())
        or any(x.on_exhausted == EXHAUSTED and _exhausts(child, x) for x in child.states)
        or any(e.target == EXHAUSTED for e in child.edges)
    )


def _routed(chart: Chart, s: State) -> str | None:
    """Where `s` goes when exhausted, if that is drawn: not the implicit escalation, and
    for a sub-chart not already an exit it maps (`exits={"exhausted": ...}`)."""
    if s.on_exhausted == ESCALATED or not _exhausts(chart, s):
        return None
    if s.kind == "chart" and EXHAUSTED in s.exits:
        return None
    return s.on_exhausted


def _chart(
    lines: list[str],
    chart: Chart,
    prefix: str,
    depth: int,
    taken: _Taken,
    visited: set[str],
    implicit: list[str],
) -> None:
    pad = "  " * depth
    routed = {s.name: t for s in chart.states if (t := _routed(chart, s)) is not None}
    used = (
        {e.target for e in chart.edges}
        | set(routed.values())
        | ({chart.on_exhausted} - {ESCALATED} if not prefix else set())
        | {t for s in chart.states for t in (*s.exits.values(), s.on_approve, s.on_reject) if t}
        | {s.on_region_failure for s in chart.states if s.regions}
    )
    drawn: set[tuple[str, str]] = set()

    def edge(source: str, target: str, label: str) -> None:
        drawn.add((source, target))
        said = f" : {label.strip()}" if label.strip() else ""
        if source == target:  # Mermaid draws `A --> A` as a tick hugging the box: go round
            turn = _id(source) + "_loop"  # a choice point, so the loop is drawn full size
            lines.append(f"{pad}state {turn} <<choice>>")
            lines.append(f"{pad}{_id(source)} --> {turn}{said}")
            lines.append(f"{pad}{turn} --> {_id(source)}")
            return
        lines.append(f"{pad}{_id(source)} --> {_id(target)}{said}")

    lines.append(f"{pad}[*] --> {_id(prefix + str(chart.initial))}")
    terminals: list[str] = []
    for s in chart.states:
        path = prefix + s.name
        if s.name in IMPLICIT:
            if s.name not in used and not _seen(path, visited):
                continue
            terminals.append(path)
            implicit.append(_id(path))
        sid = _id(path)
        if s.kind == "chart" and s.chart is not None:
            mark = {"shallow": " (H)", "deep": " (H*)"}.get(s.history or "", "")  # UML's marks
            lines.append(f'{pad}state "{s.name}{mark}" as {sid} {{')
            _chart(lines, chart.children[s.name], path + ".", depth + 1, taken, visited, implicit)
            lines.append(f"{pad}}}")
            for term, target in sorted(s.exits.items()):
                n = taken.exits[f"{path}->{prefix + target}", term == EXHAUSTED]
                edge(path, prefix + target, f"exit {term}{_times(n)}")
        elif s.kind in ("parallel", "map"):
            _regions(lines, chart, s, path, depth, taken, visited, implicit)
            n = taken.routes[f"{path}->{prefix + s.exits['done']}", False]
            edge(path, prefix + s.exits["done"], f"join {s.join}{_times(n)}")
            failure = prefix + s.on_region_failure
            if s.on_region_failure != ESCALATED or taken.routes[f"{path}->{failure}", False]:
                n = taken.routes[f"{path}->{failure}", False]
                edge(path, failure, f"region failed{_times(n)}")
        else:
            kind = "" if s.kind in ("model", "terminal") else f" ({s.kind})"
            lines.append(f'{pad}state "{s.name}{kind}" as {sid}')
            if s.kind == "terminal" and not prefix:
                lines.append(f"{pad}{sid} --> [*]")
            if s.kind == "approval":
                declared = {e.target for e in chart.edges if e.source == s.name}
                for verb, to in (("approve", s.on_approve), ("reject", s.on_reject)):
                    target = to or ""
                    if target and target not in declared:
                        n = taken.edges[f"{path}->{prefix + target}"]
                        edge(path, prefix + target, f"{verb}{_times(n)}")
    for name, to in routed.items():
        path, target = prefix + name, prefix + to
        counts = taken.exits if chart.state_map[name].kind == "chart" else taken.routes
        edge(path, target, f"exhausted{_times(counts[f'{path}->{target}', True])}")
    for e in chart.edges:
        notes = []
        if e.guard is not None:
            notes.append(f"[{getattr(e.guard, '__name__', 'guard')}]")
        if e.max_traversals is not None:
            notes.append(f"max {e.max_traversals}")
        if isinstance(e.after, float):
            notes.append(f"after {_duration(e.after)}")
        n = taken.edges[f"{prefix + e.source}->{prefix + e.target}"]
        edge(prefix + e.source, prefix + e.target, " ".join(notes) + _times(n))
    # the moves the run took by a route no line above shows (an escalation, the root's
    # budget running out): between two drawn states of this chart
    shown = {prefix + s.name for s in chart.states if s.name not in IMPLICIT} | set(terminals)
    for (move, forced), n in sorted(taken.routes.items()):
        source, target = move.split("->", 1)
        if source in shown and target in shown and (source, target) not in drawn:
            edge(source, target, f"{'exhausted' if forced else 'escalated'}{_times(n)}")


def _regions(
    lines: list[str],
    chart: Chart,
    s: State,
    path: str,
    depth: int,
    taken: _Taken,
    visited: set[str],
    implicit: list[str],
) -> None:
    """A parallel state as Mermaid draws concurrent states: its regions side by side,
    split by `--`; a map state as its one sub-chart, run for each item."""
    pad = "  " * depth
    if s.kind == "map":
        width = "all" if s.max_concurrency is None else str(s.max_concurrency)
        label = f"{s.name} (map over {s.over}, {width} at once)"
    else:
        label = f"{s.name} (parallel)"
    lines.append(f'{pad}state "{label}" as {_id(path)} {{')
    for i, r in enumerate(s.regions if s.kind == "parallel" else s.regions[:1]):
        if i:
            lines.append(f"{pad}  --")
        at = f"{path}.{r.name}"
        name = r.name if s.kind == "parallel" else f"each {s.item}"
        lines.append(f'{pad}  state "{name}" as {_id(at)} {{')
        child = chart.children[f"{s.name}.{r.name}"]
        _chart(lines, child, at + ".", depth + 2, taken, visited, implicit)
        lines.append(f"{pad}  }}")
    lines.append(f"{pad}}}")


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _times(n: int) -> str:
    return f" taken {n}x" if n else ""


def _seen(path: str, visited: set[str]) -> bool:
    return any(v == path or v.startswith(path + ".") for v in visited)


def _active(chart: Chart, leaf: str) -> list[str]:
    """The user states containing `leaf` (its `.think`/`.act` parts are not drawn)."""
    compiled_chart = compiled(chart)
    return [p for p in compiled_chart.ancestors(leaf) if compiled_chart.nodes[p].state is not None]


def _template(chart: Chart, leaf: str) -> str:
    """`leaf` in a map instance as the drawing shows it: on instance 0 (the one drawn)."""
    maps = compiled(chart).maps
    for host in maps:
        if leaf.startswith(host + "."):
            head, _, rest = leaf[len(host) + 1 :].partition(".")
            return f"{host}.0" + (f".{rest}" if rest else "") if head.isdigit() else leaf
    return leaf


_ESCAPES = {".": "__", "-": "_d_", "_": "_u_"}


def _id(path: str) -> str:
    """A Mermaid state id for a state path: letters, digits and `_` only, never a keyword
    (`note`, `default`, ...), one id per path."""
    return "s_" + re.sub(r"[^A-Za-z0-9]", lambda m: _ESCAPES[m.group()], path)


def _duration(seconds: float) -> str:
    """`90 s`, `15 min`, `24 h`, `2 d`: an `after=` delay as a label shows it."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
