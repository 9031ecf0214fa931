"""Mined structure, shadow refusals and drift as plain-text tables and Mermaid."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

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


def _ids(ids: Sequence[str], limit: int = 4) -> str:
    return ", ".join(ids[:limit]) + (f", ... (+{len(ids) - limit})" if len(ids) > limit else "")


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
        table(
            ("from", "to", "count", "of", "share", "runs"),
            [
                (e.source, e.target, e.count, e.total, f"{e.share:.2%}", _ids(e.runs))
                for e in m.rare
            ],
        )
        if m.rare
        else "none"
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


def shadow_report(found: Mapping[str, Sequence[Refusal]]) -> str:
    """Refusals per edge and per guard over shadow runs, and the runs that had any."""
    flat = [r for rs in found.values() for r in rs]
    flagged = [k for k, rs in found.items() if rs]
    out = [f"{len(found)} shadow runs, {len(flagged)} with refusals, {len(flat)} refusals", ""]
    per_edge = Counter((r.source, _to(r), r.kind) for r in flat)
    runs_of: dict[tuple[str, str, str], set[str]] = {}
    for run_id, rs in found.items():
        for r in rs:
            key = (r.source, _to(r), r.kind)
            runs_of.setdefault(key, set()).add(run_id)
    out += [
        "## Refusals per edge",
        table(
            ("from", "to", "kind", "refusals", "runs"),
            [(*k, n, len(runs_of[k])) for k, n in per_edge.most_common()],
        )
        if flat
        else "none",
    ]
    guards = Counter((f"{r.source} -> {r.target}", r.reason) for r in flat if r.kind == "guard")
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
