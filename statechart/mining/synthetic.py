"""Seeded synthetic loop traces with a known structure, for tests, docs and benchmarks.

The support-triage loop of seed 003: fetch the ticket, research (search and
lookup, at most two of a tool in a row, one lookup), draft, review (a failed
review drafts once more), send. Three kinds of anomalous runs are planted, each
in its own runs, and reported: long search streaks, sends without a review,
and drafts before the ticket was fetched.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from statechart.mining.traces import START, Call, Trace

FETCH = Call("fetch_ticket", "ok")
DRAFT = Call("draft_reply", "ok")
SEND = Call("send_reply", "sent")
PASS = Call("policy_check", "pass")
FAIL = Call("policy_check", "fail")


@dataclass(frozen=True)
class Synthetic:
    """Generated runs and the truth about them."""

    traces: tuple[Trace, ...]
    repeated: frozenset[str]
    """Runs that search five or more times in a row."""
    unreviewed: frozenset[str]
    """Runs that send a reply straight after drafting it."""
    early_drafts: frozenset[str]
    """Runs that draft before fetching the ticket."""
    rare_edges: frozenset[tuple[str, str]]
    """The label edges only the planted runs take."""

    @property
    def anomalous(self) -> frozenset[str]:
        """Every planted run."""
        return self.repeated | self.unreviewed | self.early_drafts


def _search(rng: random.Random) -> Call:
    return Call("search_kb", "hit" if rng.random() < 0.6 else "empty")


def _lookup(rng: random.Random) -> Call:
    return Call("lookup_account", "found" if rng.random() < 0.7 else "missing")


def _research(rng: random.Random) -> list[Call]:
    """One to three calls; never three of a tool in a row; at most one lookup."""
    out: list[Call] = []
    for _ in range(rng.choices((1, 2, 3), (0.4, 0.4, 0.2))[0]):
        lookups = sum(c.tool == "lookup_account" for c in out)
        two_searches = len(out) >= 2 and out[-1].tool == out[-2].tool == "search_kb"
        use_lookup = lookups == 0 and (two_searches or rng.random() < 0.35)
        if not use_lookup and two_searches:
            break
        out.append(_lookup(rng) if use_lookup else _search(rng))
    return out


def synthetic_traces(
    runs: int = 1200,
    *,
    seed: int = 0,
    repeated: int = 14,
    unreviewed: int = 9,
    early_drafts: int = 3,
    review_fail: float = 0.15,
    redraft: float = 0.05,
) -> Synthetic:
    """`runs` loop traces; the planted runs are spread at random among the normal ones.

    `review_fail` is how often a review fails (then the reply is drafted again);
    `redraft` how often a draft is redone at once (the edge draft -> draft, the one
    that changes alone when only it changes).
    """
    planted_runs = repeated + unreviewed + early_drafts
    if planted_runs > runs:
        raise ValueError(
            f"runs={runs} cannot hold the {planted_runs} planted runs (repeated="
            f"{repeated}, unreviewed={unreviewed}, early_drafts={early_drafts}); "
            "ask for more runs or plant fewer"
        )
    rng = random.Random(seed)
    planted = rng.sample(range(runs), repeated + unreviewed + early_drafts)
    kinds = dict.fromkeys(planted[:repeated], "repeated")
    kinds.update(dict.fromkeys(planted[repeated : repeated + unreviewed], "unreviewed"))
    kinds.update(dict.fromkeys(planted[repeated + unreviewed :], "early"))
    traces = []
    found: dict[str, set[str]] = {"repeated": set(), "unreviewed": set(), "early": set()}
    for i in range(runs):
        run_id = f"run-{i:05d}"
        research = _research(rng)
        review = (
            [DRAFT, FAIL, DRAFT, PASS, SEND] if rng.random() < review_fail else [DRAFT, PASS, SEND]
        )
        if rng.random() < redraft:
            review = [DRAFT, *review]
        kind = kinds.get(i)
        if kind == "repeated":
            research = [*[_search(rng) for _ in range(rng.randint(5, 7))], _lookup(rng)]
        elif kind == "unreviewed":
            review = [DRAFT, SEND]
        calls = [FETCH, *research, *review]
        if kind == "early":
            calls = [DRAFT, *calls]
        if kind is not None:
            found[kind].add(run_id)
        traces.append(Trace(run_id, tuple(calls)))
    rare: frozenset[tuple[str, str]] = frozenset()
    if early_drafts:
        rare |= {(START, DRAFT.label), (DRAFT.label, FETCH.label)}
    if unreviewed:
        rare |= {(DRAFT.label, SEND.label)}
    return Synthetic(
        tuple(traces),
        frozenset(found["repeated"]),
        frozenset(found["unreviewed"]),
        frozenset(found["early"]),
        rare,
    )
