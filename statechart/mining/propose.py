"""A draft chart from mined structure: phases as states, common edges as moves.

Tools that follow each other both ways and share the same common neighbours
outside the pair merge into one phase (research: search and lookup); every
other tool is its own phase. Common edges between phases become edges; rare
ones are left out, so a run that tries one is refused and can only escalate.
Caps come from the runs that took no rare edge and did not repeat: calls per
visit, calls of a repeating tool per visit, visits to states on a cycle, steps.
"""

from __future__ import annotations

import keyword
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from statechart.chart.names import CANCELLED, ESCALATED, EXHAUSTED, RESERVED
from statechart.chart.tools import valid_tool_name
from statechart.errors import TraceFormatError
from statechart.mining.matrix import (
    DEFAULT_REPEAT_LIMIT,
    DEFAULT_THRESHOLD,
    Mined,
    mine,
    transition_counts,
)
from statechart.mining.traces import END, START, Trace

DONE = "done"
ROUTER = "start"
TAKEN = {*RESERVED, ESCALATED, EXHAUSTED, CANCELLED, DONE, ROUTER}


@dataclass(frozen=True)
class Phase:
    """A candidate state: the tools a run uses together, and its mined caps."""

    name: str
    tools: tuple[str, ...]
    max_iterations: int
    max_calls: dict[str, int] = field(default_factory=dict)
    max_visits: int | None = None


@dataclass(frozen=True)
class Proposal:
    """A draft chart: its phases, edges, budget, and the Python source to edit."""

    name: str
    phases: tuple[Phase, ...]
    initial: str
    edges: tuple[tuple[str, str], ...]
    max_steps: int
    mined: Mined
    common: tuple[str, ...]
    """Ids of the runs the caps were taken from."""
    source: str
    left_out: tuple[str, ...] = ()
    """Tools only rare moves lead to: no state offers them, so a run calling one escalates."""


def common_tool_edges(traces: Sequence[Trace], threshold: float) -> set[tuple[str, str]]:
    """Tool-to-tool moves (START/END included) taking at least `threshold` of their source."""
    counts = transition_counts(t.labels("tool") for t in traces)
    out: set[tuple[str, str]] = set()
    for src, row in counts.items():
        total = sum(row.values())
        out.update((src, dst) for dst, n in row.items() if n / total >= threshold)
    return out


def phases_of(tools: Sequence[str], common: set[tuple[str, str]]) -> list[list[str]]:
    """Group tools: merge while a pair links both ways with equal outside neighbours."""
    group = {t: i for i, t in enumerate(tools)}

    def members(g: int) -> set[str]:
        return {t for t, x in group.items() if x == g}

    def outside(ms: set[str], both: set[str]) -> tuple[frozenset[str], frozenset[str]]:
        ins = {s for s, d in common if d in ms and s not in both}
        outs = {d for s, d in common if s in ms and d not in both}
        return frozenset(ins), frozenset(outs)

    changed = True
    while changed:
        changed = False
        for a, b in sorted(common):
            if a not in group or b not in group or group[a] == group[b]:
                continue
            if (b, a) not in common:
                continue
            ga, gb = members(group[a]), members(group[b])
            both = ga | gb
            if outside(ga, both) == outside(gb, both):
                for t in gb:
                    group[t] = group[a]
                changed = True
    order: dict[int, list[str]] = {}
    for t in tools:
        order.setdefault(group[t], []).append(t)
    return list(order.values())


def _name(tools: Sequence[str], used: set[str]) -> str:
    joined = "_or_".join(tools[:2]) + ("_and_more" if len(tools) > 2 else "")
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", joined).strip("_-") or "phase"
    if not base[0].isalpha():
        base = f"s_{base}"
    name, n = base if base not in TAKEN else f"{base}_state", 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    used.add(name)
    return name


def _visits(trace: Trace, phase_of: dict[str, str]) -> list[tuple[str, list[str]]]:
    """The run as visits: (phase, tools called in that visit)."""
    out: list[tuple[str, list[str]]] = []
    for c in trace.calls:
        p = phase_of[c.tool]
        if out and out[-1][0] == p:
            out[-1][1].append(c.tool)
        else:
            out.append((p, [c.tool]))
    return out


def propose(
    traces: Sequence[Trace],
    *,
    name: str = "mined",
    threshold: float = DEFAULT_THRESHOLD,
    repeat_limit: int = DEFAULT_REPEAT_LIMIT,
    where: str = "traces",
) -> Proposal:
    """A draft chart for `traces` (see the module docstring for the rules).

    Raises `TraceFormatError` (its message starts with `where`, the file or store the
    traces came from) when no trace made a tool call: a chart needs a state to propose.
    """
    if not traces:
        raise ValueError("no runs to propose a chart from")
    if not any(t.calls for t in traces):
        raise TraceFormatError(
            f"{where}: no tool calls in any trace; a proposal needs at least one"
        )
    mined = mine(traces, threshold=threshold, repeat_limit=repeat_limit, by="tool")
    flagged = {r.run_id for r in mined.repeats} | {i for e in mined.rare for i in e.runs}
    common_runs = [t for t in traces if t.run_id not in flagged] or list(traces)
    common = common_tool_edges(traces, threshold)
    tools = list(dict.fromkeys(c.tool for t in traces for c in t.calls))
    used: set[str] = set()
    groups = phases_of(tools, common)
    phase_of = {}
    names = []
    for g in groups:
        n = _name(g, used)
        names.append(n)
        phase_of.update(dict.fromkeys(g, n))
    edges = sorted(
        {
            (phase_of[s], phase_of[d])
            for s, d in common
            if s in phase_of and d in phase_of and phase_of[s] != phase_of[d]
        }
    )
    starts = sorted({phase_of[d] for s, d in common if s == START and d in phase_of})
    ends = sorted({phase_of[s] for s, d in common if d == END and s in phase_of})
    edges += [(p, DONE) for p in ends]
    initial = starts[0] if len(starts) == 1 else ROUTER
    if initial == ROUTER:
        edges += [(ROUTER, p) for p in starts]
    if (START, END) in common or not any(s == initial for s, _ in edges):
        edges.append((initial, DONE))  # runs that called nothing end at once
    reach = _reachable(initial, edges)
    left_out = tuple(t for g, n in zip(groups, names, strict=True) if n not in reach for t in g)
    groups = [g for g, n in zip(groups, names, strict=True) if n in reach]
    names = [n for n in names if n in reach]
    edges = [(s, d) for s, d in edges if s in reach]
    edges += _exits(names, groups, phase_of, mined, edges, reach)
    if DONE not in _reachable(initial, edges):  # every move to END was rare
        ends_at = Counter(
            {
                n: sum(mined.counts.get(t, {}).get(END, 0) for t in g)
                for g, n in zip(groups, names, strict=True)
            }
        )
        edges.append((ends_at.most_common(1)[0][0] if ends_at else initial, DONE))
    rank = {n: i for i, n in enumerate([ROUTER, *names, DONE])}
    edges.sort(key=lambda e: (rank[e[0]], rank[e[1]]))
    per_visit: dict[str, int] = defaultdict(int)
    per_tool: dict[tuple[str, str], int] = defaultdict(int)
    visits: dict[str, int] = defaultdict(int)
    steps = 0
    for t in common_runs:
        seen: Counter[str] = Counter()
        vs = _visits(t, phase_of)
        for p, called in vs:
            seen[p] += 1
            per_visit[p] = max(per_visit[p], len(called))
            for tool, k in Counter(called).items():
                per_tool[(p, tool)] = max(per_tool[(p, tool)], k)
        for p, k in seen.items():
            visits[p] = max(visits[p], k)
        steps = max(steps, 2 * (len(t.calls) + len(vs) + 1))
    repeating = {r.tool for r in mined.repeats}
    cyclic = _on_cycles(edges)
    phases = tuple(
        Phase(
            n,
            tuple(g),
            max(per_visit[n], 1) + 1,
            {tool: max(per_tool[(n, tool)], 1) for tool in g if tool in repeating},
            max(visits[n], 1) if n in cyclic else None,
        )
        for n, g in zip(names, groups, strict=True)
    )
    max_steps = max(10, -(-2 * steps // 10) * 10)
    proposal = Proposal(
        name,
        phases,
        initial,
        tuple(edges),
        max_steps,
        mined,
        tuple(t.run_id for t in common_runs),
        "",
        left_out,
    )
    return Proposal(**{**proposal.__dict__, "source": render(proposal)})


def _reachable(initial: str, edges: Sequence[tuple[str, str]]) -> set[str]:
    nxt: dict[str, set[str]] = defaultdict(set)
    for s, d in edges:
        nxt[s].add(d)
    seen, stack = {initial}, [initial]
    while stack:
        for d in nxt[stack.pop()] - seen:
            seen.add(d)
            stack.append(d)
    return seen


def _exits(
    names: Sequence[str],
    groups: Sequence[Sequence[str]],
    phase_of: dict[str, str],
    mined: Mined,
    edges: Sequence[tuple[str, str]],
    reach: set[str],
) -> list[tuple[str, str]]:
    """For a state whose only common moves stay inside it, its most frequent way out."""
    out = []
    for n, g in zip(names, groups, strict=True):
        if any(s == n for s, _ in edges):
            continue
        ways: Counter[str] = Counter()
        for tool in g:
            for dst, k in mined.counts.get(tool, {}).items():
                target = DONE if dst == END else phase_of.get(dst)
                if target is not None and target != n and (target == DONE or target in reach):
                    ways[target] += k
        out.append((n, ways.most_common(1)[0][0] if ways else DONE))
    return out


def _on_cycles(edges: Sequence[tuple[str, str]]) -> set[str]:
    """States that lie on a cycle of `edges`."""
    nxt: dict[str, set[str]] = defaultdict(set)
    for s, d in edges:
        nxt[s].add(d)
    out = set()
    for start in list(nxt):
        stack, seen = list(nxt[start]), set()
        while stack:
            x = stack.pop()
            if x == start:
                out.add(start)
                break
            if x not in seen:
                seen.add(x)
                stack.extend(nxt.get(x, ()))
    return out


def _ident(tool: str) -> str:
    """A Python name for the tool's function that the draft's own names cannot clash with."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", tool).strip("_") or "tool"
    if name[0].isdigit() or keyword.iskeyword(name) or name in ("sc", "chart"):
        name = f"tool_{name}"
    return name


def _shown(name: str) -> str:
    """A name as it may appear in a comment: escapes instead of line breaks."""
    return repr(name)[1:-1]


def render(p: Proposal) -> str:
    """The draft as Python source that `statechart check FILE.py:chart` accepts; every
    name from the traces is written with `repr`, so any tool name is safe in it."""
    m = p.mined
    lines = [
        f"# Draft chart {_shown(p.name)!r}, mined from {m.runs} runs ({m.steps} calls) by",
        "# `statechart mine --propose`. Edit before enforcing: rename the states, write the",
        "# instructions, give the tools their real code and arguments, and add guards (the",
        "# traces say where runs went, not why). Caps come from the runs that took no rare",
        "# move and did not repeat.",
        "#",
        f"# Rare moves (under {m.threshold:.0%} of their source's moves) are not edges: a run",
        "# that tries one is refused and can only escalate:",
    ]
    lines += [
        f"#   - {_shown(e.source)} -> {_shown(e.target)}: {e.count} of {e.total} "
        f"({len(e.runs)} runs)"
        for e in m.rare
    ] or ["#   (none)"]
    lines.append(f"# Runs where a tool ran more than {m.repeat_limit} times in a row:")
    by_tool = Counter(r.tool for r in m.repeats)
    lines += [
        f"#   - {_shown(tool)}: {n} runs (capped below with max_calls)"
        for tool, n in sorted(by_tool.items())
    ] or ["#   (none)"]
    if p.left_out:
        lines.append(
            "# Tools only rare moves reach, offered by no state (a run calling one "
            "escalates): " + ", ".join(_shown(t) for t in p.left_out)
        )
    lines += ["", "import statechart as sc", ""]
    idents: dict[str, str] = {}
    for ph in p.phases:
        for tool in ph.tools:
            ident = _ident(tool)
            while ident in idents.values():
                ident += "_"
            idents[tool] = ident
            offered = valid_tool_name(tool)
            named = f", name={offered!r}" if ident != offered else ""
            if offered != tool:
                lines.append(f"# the traces call it {tool!r}, a name providers refuse")
            lines += [
                "",
                f'@sc.tool(retry="never"{named})',
                f"async def {ident}() -> str:",
                f"    {tool + ' (mined; give it its real arguments and code).'!r}",
                f"    raise NotImplementedError({'connect ' + tool + ' to its code'!r})",
                "",
            ]
    lines += ["", "chart = sc.Chart(", f"    name={p.name!r},", "    states=("]
    if p.initial == ROUTER:
        lines.append(
            f'        sc.State("{ROUTER}", instructions="Choose where to begin.", '
            "max_iterations=2),"
        )
    for ph in p.phases:
        tools = ", ".join(idents[t] for t in ph.tools)
        extra = f", max_calls={ph.max_calls!r}" if ph.max_calls else ""
        extra += f", max_visits={ph.max_visits}" if ph.max_visits is not None else ""
        lines += [
            f"        sc.State({ph.name!r}, instructions={'Use ' + ', '.join(ph.tools) + '.'!r},",
            f"                 tools=({tools},), max_iterations={ph.max_iterations}{extra}),",
        ]
    lines += [f'        sc.State("{DONE}", kind="terminal"),', "    ),", "    edges=("]
    lines += [f"        sc.Edge({s!r}, {d!r})," for s, d in p.edges]
    lines += [
        "    ),",
        f"    initial={p.initial!r},",
        f"    budget=sc.Budget(max_steps={p.max_steps}),",
        ")",
        "",
    ]
    return "\n".join(lines)
