"""Mermaid state diagrams of charts, nested states drawn nested; a run's current state
and the edges it took can be marked."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from statechart.chart.chart import Chart
from statechart.chart.names import IMPLICIT
from statechart.engine import compiled
from statechart.records.run import Event, Run


def mermaid(chart: Chart, run: Run | None = None, events: Sequence[Event] = ()) -> str:
    """A `stateDiagram-v2` of `chart`; with `run`, its active states are highlighted and
    each edge is labelled with how often the run took it."""
    if run is not None and run.chart_version != chart.version:
        raise ValueError(
            f"run {run.run_id} is a run of chart '{run.chart}' version "
            f"{run.chart_version}, not of '{chart.name}' version {chart.version}"
        )
    taken: Counter[str] = Counter(e.edge for e in events if e.edge)
    nodes = compiled(chart).nodes
    hosts = {p for p, n in nodes.items() if n.state is not None and n.state.kind == "chart"}
    # a sub-chart's exit: the event left its host and entered a sibling (the mapped target)
    taken.update(
        f"{h}->{t}"
        for e in events
        for h in e.exited
        if h in hosts
        for t in e.entered
        if t != h and _parent(t) == _parent(h)
    )
    visited = {p for e in events for p in e.entered} | ({run.state} if run else set())
    lines = ["stateDiagram-v2"]
    _chart(lines, chart, "", 1, taken, visited)
    if run is not None:
        active = [_id(p) for p in _active(chart, run.state)]
        lines.append("  classDef current fill:#fde68a,stroke:#b45309,stroke-width:2px")
        if active:
            lines.append(f"  class {','.join(active)} current")
    return "\n".join(lines) + "\n"


def _chart(
    lines: list[str], chart: Chart, prefix: str, depth: int, taken: Counter[str], visited: set[str]
) -> None:
    pad = "  " * depth
    used = (
        {e.target for e in chart.edges}
        | {chart.on_exhausted}
        | {
            t
            for s in chart.states
            for t in (*s.exits.values(), s.on_exhausted, s.on_approve, s.on_reject)
            if t
        }
    )
    lines.append(f"{pad}[*] --> {_id(prefix + str(chart.initial))}")
    for s in chart.states:
        path = prefix + s.name
        if s.name in IMPLICIT and s.name not in used and not _seen(path, visited):
            continue
        sid = _id(path)
        if s.kind == "chart" and s.chart is not None:
            lines.append(f'{pad}state "{s.name}" as {sid} {{')
            _chart(lines, chart.children[s.name], path + ".", depth + 1, taken, visited)
            lines.append(f"{pad}}}")
            for term, target in sorted(s.exits.items()):
                n = taken.get(f"{path}->{prefix + target}", 0)
                lines.append(f"{pad}{sid} --> {_id(prefix + target)} : exit {term}{_times(n)}")
            continue
        kind = "" if s.kind in ("model", "terminal") else f" ({s.kind})"
        lines.append(f'{pad}state "{s.name}{kind}" as {sid}')
        if s.kind == "terminal" and not prefix:
            lines.append(f"{pad}{sid} --> [*]")
        if s.kind == "approval":
            declared = {e.target for e in chart.edges if e.source == s.name}
            for verb, to in (("approve", s.on_approve), ("reject", s.on_reject)):
                target = to or ""
                if target and target not in declared:
                    n = taken.get(f"{path}->{prefix + target}", 0)
                    lines.append(f"{pad}{sid} --> {_id(prefix + target)} : {verb}{_times(n)}")
    for e in chart.edges:
        notes = []
        if e.guard is not None:
            notes.append(f"[{getattr(e.guard, '__name__', 'guard')}]")
        if e.max_traversals is not None:
            notes.append(f"max {e.max_traversals}")
        n = taken.get(f"{prefix + e.source}->{prefix + e.target}", 0)
        label = " ".join(notes) + _times(n)
        lines.append(
            f"{pad}{_id(prefix + e.source)} --> {_id(prefix + e.target)}"
            + (f" : {label.strip()}" if label.strip() else "")
        )


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


_ESCAPES = {".": "__", "-": "_d_", "_": "_u_"}


def _id(path: str) -> str:
    """A Mermaid state id for a state path: letters, digits and `_` only, never a keyword
    (`note`, `default`, ...), one id per path."""
    return "s_" + re.sub(r"[^A-Za-z0-9]", lambda m: _ESCAPES[m.group()], path)
