"""Counting what loops did: transition matrices, rare edges, repeats and visit counts.

The seed-003 recipe, over any number of runs: label each step `tool:outcome`,
count label-to-label moves with START and END, call an edge rare when it takes
less than `threshold` of its source's moves, and flag runs where one tool
repeats more than `repeat_limit` times in a row.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from statechart.mining.traces import END, START, Trace

DEFAULT_THRESHOLD = 0.01
DEFAULT_REPEAT_LIMIT = 3


@dataclass(frozen=True)
class Edge:
    """A mined move between two labels and how often it was taken."""

    source: str
    target: str
    count: int
    total: int
    """Moves out of `source` in all runs."""
    runs: tuple[str, ...] = ()
    """Ids of the runs that took it (kept for rare edges)."""

    @property
    def share(self) -> float:
        """Fraction of `source`'s moves that went to `target`."""
        return self.count / self.total if self.total else 0.0


@dataclass(frozen=True)
class Repeat:
    """A run in which one tool ran more than the limit in a row."""

    run_id: str
    tool: str
    streak: int


@dataclass(frozen=True)
class Mined:
    """What mining a set of runs found."""

    runs: int
    steps: int
    counts: dict[str, dict[str, int]]
    """`counts[source][target]`: moves between labels, START and END included."""
    rare: tuple[Edge, ...]
    repeats: tuple[Repeat, ...]
    visits: dict[str, dict[int, int]]
    """Per label (or state): how many runs had it `n` times, `{n: runs}`; zeros included."""
    by: str = "label"
    threshold: float = DEFAULT_THRESHOLD
    repeat_limit: int = DEFAULT_REPEAT_LIMIT

    def edges(self) -> list[Edge]:
        """Every mined edge, most frequent first."""
        out: list[Edge] = []
        for src, row in self.counts.items():
            total = sum(row.values())
            out.extend(Edge(src, dst, n, total) for dst, n in row.items())
        return sorted(out, key=lambda e: (-e.count, e.source, e.target))

    @property
    def rare_keys(self) -> set[tuple[str, str]]:
        """`(source, target)` of every rare edge."""
        return {(e.source, e.target) for e in self.rare}


def transition_counts(sequences: Iterable[Sequence[str]]) -> dict[str, dict[str, int]]:
    """Moves between consecutive labels of each sequence, with START and END."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for labels in sequences:
        prev = START
        for label in labels:
            counts[prev][label] += 1
            prev = label
        counts[prev][END] += 1
    return {k: dict(v) for k, v in counts.items()}


def longest_streaks(labels: Sequence[str]) -> dict[str, int]:
    """The longest run of consecutive equal entries, per entry."""
    best: dict[str, int] = {}
    prev, streak = None, 0
    for x in labels:
        streak = streak + 1 if x == prev else 1
        prev = x
        if streak > best.get(x, 0):
            best[x] = streak
    return best


def mine(
    traces: Sequence[Trace],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    repeat_limit: int = DEFAULT_REPEAT_LIMIT,
    by: str = "label",
) -> Mined:
    """Mine `traces`: labels by `tool:outcome` (`by="label"`) or by tool (`by="tool"`)."""
    if by not in ("label", "tool"):
        raise ValueError(f"by={by!r}: mine by 'label' (tool:outcome) or by 'tool'")
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold={threshold}: give a fraction such as 0.01 (1%)")
    if repeat_limit < 1:
        raise ValueError(f"repeat_limit={repeat_limit}: give the longest allowed streak, such as 3")
    sequences = [t.labels(by) for t in traces]
    counts = transition_counts(sequences)
    rare_pairs = {}
    for src, row in counts.items():
        total = sum(row.values())
        for dst, n in row.items():
            if n / total < threshold:
                rare_pairs[(src, dst)] = (n, total)
    takers: dict[tuple[str, str], list[str]] = defaultdict(list)
    repeats = []
    per_run: list[Counter[str]] = []
    for trace, labels in zip(traces, sequences, strict=True):
        prev = START
        for label in [*labels, END]:
            if (prev, label) in rare_pairs and trace.run_id not in takers[(prev, label)]:
                takers[(prev, label)].append(trace.run_id)
            prev = label
        tools = [c.tool for c in trace.calls]
        streaks = longest_streaks(tools)
        for tool, streak in sorted(streaks.items()):
            if streak > repeat_limit:
                repeats.append(Repeat(trace.run_id, tool, streak))
        per_run.append(Counter(labels))
    rare = tuple(
        sorted(
            (
                Edge(s, d, n, total, tuple(takers[(s, d)]))
                for (s, d), (n, total) in rare_pairs.items()
            ),
            key=lambda e: (e.count, e.source, e.target),
        )
    )
    return Mined(
        runs=len(traces),
        steps=sum(len(s) for s in sequences),
        counts=counts,
        rare=rare,
        repeats=tuple(repeats),
        visits=visit_distribution(per_run),
        by=by,
        threshold=threshold,
        repeat_limit=repeat_limit,
    )


def visit_distribution(per_run: Sequence[Counter[str]]) -> dict[str, dict[int, int]]:
    """Per key: `{n: number of runs that had it n times}`, runs without it counted at 0."""
    keys = sorted({k for c in per_run for k in c})
    out: dict[str, dict[int, int]] = {}
    for key in keys:
        dist = Counter(c.get(key, 0) for c in per_run)
        out[key] = dict(sorted(dist.items()))
    return out


def state_visits(traces: Sequence[Trace]) -> dict[str, dict[int, int]]:
    """Per chart state (runs read from a store): entries per run, as a distribution."""
    return visit_distribution([Counter(dict(t.visits)) for t in traces])
