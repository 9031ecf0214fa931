"""Mined structure, shadow refusals and drift as plain-text tables, Mermaid and JSON."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from statechart.mining.drift import Drift
from statechart.mining.matrix import Mined
from statechart.mining.shadow import Refusal
from statechart.mining.traces import END, START


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table with aligned columns (`|` in a cell is escaped)."""
    cells = [[_cell(c) for c in headers], *[[_cell(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"

    return "\n".join(
        [
            line(cells[0]),
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
            *[line(r) for r in cells[1:]],
        ]
    )


RUNS_WIDTH = 60
"""The widest line of run ids in a table cell; longer lists go on to the next rows."""


def wrapped_ids(ids: Sequence[str], width: int = RUNS_WIDTH) -> list[str]:
    """Every id of `ids`, joined by `, ` on lines of at most `width` characters (an id
    longer than that gets a line of its own); no id is left out."""
    lines: list[str] = []
    line = ""
    for run_id in ids:
        joined = f"{line}, {run_id}" if line else run_id
        if line and len(joined) + 1 > width:
            lines.append(line + ",")
            line = run_id
        else:
            line = joined
    return [*lines, line]


def _rare_rows(m: Mined) -> list[tuple[object, ...]]:
    """A row per rare edge, and a row with the other cells blank per further line of its
    run ids."""
    rows: list[tuple[object, ...]] = []
    for e in m.rare:
        first, *more = wrapped_ids(e.runs)
        rows.append((e.source, e.target, e.count, e.total, f"{e.share:.2%}", first))
        rows += [("", "", "", "", "", line) for line in more]
    return rows


def mined_report(
    m: Mined, *, top: int = 30, states: Mapping[str, Mapping[int, int]] | None = None
) -> str:
    """The transition counts, rare edges, repeats and visit distributions of `m`."""
    edges = m.edges()
    shown = edges if top <= 0 else edges[:top]
    out = [
        f"{m.runs} runs, {m.steps} calls, {len(edges)} distinct moves "
        f"(labels by {'tool:outcome' if m.by == 'label' else 'tool'})",
        "",
        "## Transitions"
        + (f" (the {len(shown)} most frequent)" if len(shown) < len(edges) else ""),
        table(
            ("from", "to", "count", "share of from"),
            [(e.source, e.target, e.count, f"{e.share:.1%}") for e in shown],
        ),
        "",
        f"## Rare moves (under {m.threshold:.1%} of their source's moves)",
    ]
    out.append(
        table(("from", "to", "count", "of", "share", "runs"), _rare_rows(m)) if m.rare else "none"
    )
    out += ["", f"## Runs where one tool ran more than {m.repeat_limit} times in a row"]
    out.append(
        table(("run", "tool", "longest streak"), [(r.run_id, r.tool, r.streak) for r in m.repeats])
        if m.repeats
        else "none"
    )
    out += ["", "## Visits per run (times per run: runs)", _distribution(m.visits)]
    if states:
        out += ["", "## Visits per run to each chart state", _distribution(states)]
    return "\n".join(out)


def mined_json(
    m: Mined, *, states: Mapping[str, Mapping[int, int]] | None = None
) -> dict[str, Any]:
    """What `mined_report` shows, as JSON values: every transition (not only the top ones),
    every rare edge with all the runs that took it, repeats, and visit distributions."""
    return {
        "runs": m.runs,
        "calls": m.steps,
        "by": m.by,
        "threshold": m.threshold,
        "repeat_limit": m.repeat_limit,
        "transitions": [
            {
                "source": e.source,
                "target": e.target,
                "count": e.count,
                "total": e.total,
                "share": e.share,
            }
            for e in m.edges()
        ],
        "rare": [
            {
                "source": e.source,
                "target": e.target,
                "count": e.count,
                "total": e.total,
                "share": e.share,
                "runs": list(e.runs),
            }
            for e in m.rare
        ],
        "repeats": [{"run_id": r.run_id, "tool": r.tool, "streak": r.streak} for r in m.repeats],
        "visits": _distribution_json(m.visits),
        "state_visits": _distribution_json(states or {}),
    }


def _distribution_json(d: Mapping[str, Mapping[int, int]]) -> dict[str, list[dict[str, int]]]:
    return {k: [{"times": n, "runs": runs} for n, runs in v.items()] for k, v in d.items()}


def _number(x: float) -> float | None:
    """A float JSON can hold (NaN and infinities are not JSON)."""
    return x if math.isfinite(x) else None


def _distribution(d: Mapping[str, Mapping[int, int]]) -> str:
    return table(
        ("label", "distribution"),
        [(k, "  ".join(f"{n}:{runs}" for n, runs in v.items())) for k, v in d.items()],
    )


def mined_mermaid(m: Mined) -> str:
    """The mined graph: each label a node, each move an edge with its count and share;
    rare moves dashed."""
    labels = sorted({x for s, row in m.counts.items() for x in (s, *row)} - {START, END})
    ids = {START: "n_START", END: "n_END"}
    for i, x in enumerate(labels):
        ids[x] = f"n{i}_" + re.sub(r"\W", "_", x)  # the index keeps web-search and web_search apart
    lines = ["flowchart LR", f"  {ids[START]}(({START}))", f"  {ids[END]}(({END}))"]
    lines += [f'  {ids[x]}["{_quoted(x)}"]' for x in labels]
    rare = m.rare_keys
    for e in sorted(m.edges(), key=lambda e: (e.source, e.target)):
        arrow = "-.->" if (e.source, e.target) in rare else "-->"
        lines.append(f'  {ids[e.source]} {arrow}|"{e.count} ({e.share:.0%})"| {ids[e.target]}')
    return "\n".join(lines)


def _quoted(label: str) -> str:
    """A label inside Mermaid's double quotes."""
    return label.replace('"', "#quot;")


def _to(r: Refusal) -> str:
    """Where a refused move went, or what a refused call was."""
    if r.target != r.source:
        return r.target
    return f"(call {r.tool})" if r.tool else "(end of the loop)"


def _per_edge(
    found: Mapping[str, Sequence[Refusal]],
) -> tuple[Counter[tuple[str, str, str]], dict[tuple[str, str, str], list[str]]]:
    """Refusals per (source, where to, kind), and the runs that had each, in run order."""
    per_edge = Counter((r.source, _to(r), r.kind) for rs in found.values() for r in rs)
    runs_of: dict[tuple[str, str, str], list[str]] = {}
    for run_id, rs in found.items():
        for r in rs:
            ids = runs_of.setdefault((r.source, _to(r), r.kind), [])
            if run_id not in ids:
                ids.append(run_id)
    return per_edge, runs_of


def _per_guard(flat: Sequence[Refusal]) -> Counter[tuple[str, str]]:
    return Counter((f"{r.source} -> {r.target}", r.reason) for r in flat if r.kind == "guard")


def shadow_report(found: Mapping[str, Sequence[Refusal]]) -> str:
    """Refusals per edge and per guard over shadow runs, and the runs that had any."""
    flat = [r for rs in found.values() for r in rs]
    flagged = [k for k, rs in found.items() if rs]
    out = [f"{len(found)} shadow runs, {len(flagged)} with refusals, {len(flat)} refusals", ""]
    per_edge, runs_of = _per_edge(found)
    out += [
        "## Refusals per edge",
        table(
            ("from", "to", "kind", "refusals", "runs"),
            [(*k, n, len(runs_of[k])) for k, n in per_edge.most_common()],
        )
        if flat
        else "none",
    ]
    guards = _per_guard(flat)
    out += [
        "",
        "## Refusals per guard",
        table(("edge", "reason", "refusals"), [(e, why, n) for (e, why), n in guards.most_common()])
        if guards
        else "none",
    ]
    out += [
        "",
        "## Runs with refusals",
        table(
            ("run", "refusals", "first"), [(k, len(found[k]), found[k][0].reason) for k in flagged]
        )
        if flagged
        else "none",
    ]
    return "\n".join(out)


def shadow_json(found: Mapping[str, Sequence[Refusal]]) -> dict[str, Any]:
    """What `shadow_report` shows, as JSON values, with every refusal of every run."""
    flat = [r for rs in found.values() for r in rs]
    per_edge, runs_of = _per_edge(found)
    return {
        "shadow_runs": len(found),
        "refusals": len(flat),
        "per_edge": [
            {"source": s, "to": to, "kind": kind, "refusals": n, "runs": runs_of[(s, to, kind)]}
            for (s, to, kind), n in per_edge.most_common()
        ],
        "per_guard": [
            {"edge": edge, "reason": why, "refusals": n}
            for (edge, why), n in _per_guard(flat).most_common()
        ],
        "runs_with_refusals": [
            {"run_id": run_id, "refusals": [dataclasses.asdict(r) for r in rs]}
            for run_id, rs in found.items()
            if rs
        ],
    }


def drift_json(d: Drift) -> dict[str, Any]:
    """What `drift_report` shows, as JSON values: every edge and source (with `flagged`),
    edges in order of their Holm-adjusted p."""
    edges = sorted(d.edges, key=lambda e: e.p_holm)
    return {
        "runs_before": d.runs_before,
        "runs_after": d.runs_after,
        "alpha": d.alpha,
        "edges": [
            {
                **dataclasses.asdict(e),
                **{k: _number(getattr(e, k)) for k in ("rate_before", "rate_after", "g", "p")},
                "p_holm": _number(e.p_holm),
            }
            for e in edges
        ],
        "sources": [
            {
                **dataclasses.asdict(s),
                "g": _number(s.g),
                "p": _number(s.p),
                "p_holm": _number(s.p_holm),
            }
            for s in d.sources
        ],
        "appeared": [{"source": s, "target": t, "count": n} for s, t, n in d.appeared],
        "vanished": [{"source": s, "target": t, "count": n} for s, t, n in d.vanished],
    }


def drift_report(d: Drift, *, all_edges: bool = False) -> str:
    """Changed edges (Holm-adjusted), changed sources, and edges that appeared or vanished."""
    out = [
        f"before: {d.runs_before} runs, after: {d.runs_after} runs; alpha {d.alpha} "
        "(Holm-adjusted G-tests)",
        "",
        "## Edges whose frequency changed (per run)",
    ]
    rows = [e for e in d.edges if all_edges or e.flagged]
    rows.sort(key=lambda e: e.p_holm)
    out.append(
        table(
            ("from", "to", "before/run", "after/run", "G", "p (Holm)"),
            [
                (
                    e.source,
                    e.target,
                    f"{e.rate_before:.3f}",
                    f"{e.rate_after:.3f}",
                    f"{e.g:.1f}",
                    f"{e.p_holm:.2g}",
                )
                for e in rows
            ],
        )
        if rows
        else "none"
    )
    changed = [s for s in d.sources if s.flagged]
    out += [
        "",
        "## Sources whose exits changed",
        table(
            ("from", "df", "G", "p (Holm)"),
            [(s.source, s.df, f"{s.g:.1f}", f"{s.p_holm:.2g}") for s in changed],
        )
        if changed
        else "none",
    ]
    out += [
        "",
        "## Appeared",
        table(("from", "to", "count after"), d.appeared) if d.appeared else "none",
        "",
        "## Vanished",
        table(("from", "to", "count before"), d.vanished) if d.vanished else "none",
    ]
    return "\n".join(out)
