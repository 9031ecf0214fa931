"""Drift: did a model change move the transition structure?

Two sets of runs (before and after) are compared edge by edge. An edge's
frequency is how often runs take it, per run; each edge gets a G-test of
"same rate in both sets", and per source a G-test of its exit distribution.
P-values are Holm-corrected over all tests of a kind. Edges seen in one set
only are listed as appeared or vanished.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from statechart.mining.matrix import transition_counts
from statechart.mining.traces import Trace

DEFAULT_ALPHA = 0.01


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with integer `df` degrees of freedom (closed form)."""
    if df < 1:
        raise ValueError(f"df={df}: need at least one degree of freedom")
    if x <= 0:
        return 1.0
    half = x / 2
    if df % 2 == 0:
        terms = (-half + i * math.log(half) - math.lgamma(i + 1) for i in range(df // 2))
        return min(1.0, sum(math.exp(t) for t in terms))
    total = math.erfc(math.sqrt(half))
    for i in range(1, (df - 1) // 2 + 1):
        total += math.exp(-half + (i - 0.5) * math.log(half) - math.lgamma(i + 0.5))
    return min(1.0, total)


def g_statistic(observed: Sequence[float], expected: Sequence[float]) -> float:
    """2 Σ O ln(O/E), over cells with O > 0."""
    return 2 * sum(o * math.log(o / e) for o, e in zip(observed, expected, strict=True) if o > 0)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class EdgeDrift:
    """One edge in both sets."""

    source: str
    target: str
    before: int
    after: int
    rate_before: float
    """Times taken per run."""
    rate_after: float
    g: float
    p: float
    p_holm: float
    flagged: bool


@dataclass(frozen=True)
class SourceDrift:
    """A source's exit distribution in both sets."""

    source: str
    before: dict[str, int]
    after: dict[str, int]
    g: float
    df: int
    p: float
    p_holm: float
    flagged: bool


@dataclass(frozen=True)
class Drift:
    """The comparison of two sets of runs."""

    runs_before: int
    runs_after: int
    edges: tuple[EdgeDrift, ...]
    sources: tuple[SourceDrift, ...]
    appeared: tuple[tuple[str, str, int], ...]
    """Edges taken only after: (source, target, count)."""
    vanished: tuple[tuple[str, str, int], ...]
    """Edges taken only before."""
    alpha: float

    @property
    def flagged(self) -> list[EdgeDrift]:
        """Edges whose frequency changed (Holm-adjusted p below alpha)."""
        return [e for e in self.edges if e.flagged]


def _rate_test(c1: int, n1: int, c2: int, n2: int) -> tuple[float, float]:
    """G-test that two counts over `n1` and `n2` runs share one rate (1 df)."""
    total = c1 + c2
    e1, e2 = total * n1 / (n1 + n2), total * n2 / (n1 + n2)
    g = g_statistic((c1, c2), (e1, e2))
    return g, chi2_sf(g, 1)


def _source_test(before: dict[str, int], after: dict[str, int]) -> tuple[float, int, float]:
    """G-test of independence on the 2 x K table of a source's exits."""
    targets = sorted(set(before) | set(after))
    n1, n2 = sum(before.values()), sum(after.values())
    if len(targets) < 2 or not n1 or not n2:
        return 0.0, 0, 1.0
    observed, expected = [], []
    for t in targets:
        col = before.get(t, 0) + after.get(t, 0)
        observed += [before.get(t, 0), after.get(t, 0)]
        expected += [col * n1 / (n1 + n2), col * n2 / (n1 + n2)]
    g = g_statistic(observed, expected)
    df = len(targets) - 1
    return g, df, chi2_sf(g, df)


def drift(
    before: Sequence[Trace],
    after: Sequence[Trace],
    *,
    by: str = "label",
    alpha: float = DEFAULT_ALPHA,
) -> Drift:
    """Compare two sets of runs; edges and sources with Holm-adjusted p < `alpha` are flagged."""
    if not before or not after:
        raise ValueError("drift needs runs on both sides; one set is empty")
    if by not in ("label", "tool"):
        raise ValueError(f"by={by!r}: compare by 'label' (tool:outcome) or by 'tool'")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}: give a level between 0 and 1, such as 0.01")
    a = transition_counts(t.labels(by) for t in before)
    b = transition_counts(t.labels(by) for t in after)
    n1, n2 = len(before), len(after)
    keys = sorted(
        {(s, d) for s, row in a.items() for d in row}
        | {(s, d) for s, row in b.items() for d in row}
    )
    raw = []
    for s, d in keys:
        c1, c2 = a.get(s, {}).get(d, 0), b.get(s, {}).get(d, 0)
        raw.append((s, d, c1, c2, *_rate_test(c1, n1, c2, n2)))
    adjusted = holm([r[5] for r in raw])
    edges = tuple(
        EdgeDrift(s, d, c1, c2, c1 / n1, c2 / n2, g, p, ph, ph < alpha)
        for (s, d, c1, c2, g, p), ph in zip(raw, adjusted, strict=True)
    )
    per_source = []
    for s in sorted(set(a) | set(b)):
        per_source.append(
            (s, a.get(s, {}), b.get(s, {}), *_source_test(a.get(s, {}), b.get(s, {})))
        )
    tested = [r for r in per_source if r[4] > 0]  # a source with one exit has nothing to test
    adj_s = holm([r[5] for r in tested])
    sources = tuple(
        SourceDrift(s, dict(x), dict(y), g, df, p, ph, ph < alpha)
        for (s, x, y, g, df, p), ph in zip(tested, adj_s, strict=True)
    )
    appeared = tuple((e.source, e.target, e.after) for e in edges if e.before == 0)
    vanished = tuple((e.source, e.target, e.before) for e in edges if e.after == 0)
    return Drift(n1, n2, edges, sources, appeared, vanished, alpha)
