"""What a replay says of one run: it agrees to the end, or where and why it diverges.

The kinds of divergence are worked out from the new chart itself (its states, edges,
guards and tools) at the first step where the new run and the recorded one part.
"""

from __future__ import annotations

from typing import Literal, get_args

from statechart.chart.names import NEXT_STATE
from statechart.engine import CompiledChart, go
from statechart.records.record import Record
from statechart.records.run import Event
from statechart.rerun.cassette import Miss, Renames, owner_of

Outcome = Literal["agree", "diverge", "cannot_say"]
Kind = Literal[
    "call_not_allowed",
    "arguments_refused",
    "edge_illegal",
    "guard_refused",
    "budget_exhausted",
    "state_missing",
    "needs_model",
    "needs_tool",
    "context_refused",
    "changed",
]
KINDS: tuple[Kind, ...] = get_args(Kind)
"""Every kind of divergence, in the order the summary lists them."""


class Verdict(Record, frozen=True):
    """One run replayed against a chart: `agree`, `diverge` (with `kind`, `seq`, `state`)
    or `cannot_say` (the run could not be replayed; `detail` says why)."""

    run_id: str
    outcome: Outcome
    kind: Kind | None = None
    seq: int | None = None
    """The seq of the recorded step where the runs part (the new run's seq there may differ
    by the takeovers, model switches and refreshes either run recorded around its steps)."""
    state: str | None = None
    """The state the new run was in at that step."""
    detail: str = ""
    agreed: int = 0
    """Steps that agreed before the divergence (all of them when the run agrees)."""

    @property
    def diverged(self) -> bool:
        return self.outcome == "diverge"


def classify(
    compiled_chart: CompiledChart,
    new: Event,
    old: Event | None,
    renames: Renames,
    miss: Miss | None,
) -> tuple[Kind, str]:
    """The kind of the divergence at `new` (the recorded step there: `old`) and what to
    say of it."""
    if old is not None:
        for path in (renames(old.source), renames(old.target)):
            if path not in compiled_chart.nodes:
                return "state_missing", _missing(owner_of(path))
    if miss is not None and _asked_there(new, old, miss):
        return ("needs_model" if miss.kind == "needs_model" else "needs_tool"), miss.detail
    if new.exhausted is not None and (old is None or old.exhausted != new.exhausted):
        return "budget_exhausted", (
            f"{new.exhausted} is spent at step {new.seq} in '{new.source}'"
            + ("" if old is None or old.exhausted is None else f" (recorded: {old.exhausted})")
            + f": {new.reason}"
        )
    if new.refused is not None and (old is None or old.refused is None):
        return _refusal(compiled_chart, new)
    return "changed", _changed(new, old, renames)


def _asked_there(new: Event, old: Event | None, miss: Miss) -> bool:
    """Whether the record was at the same place at this step (for a tool: running a tool
    there too), so what parts the runs is only what the record cannot answer; else the
    step itself is what changed."""
    if old is None:
        return True
    if owner_of(old.source) != owner_of(new.source):
        return False
    return miss.kind == "needs_model" or bool(old.usage.tool_calls)


def _refusal(compiled_chart: CompiledChart, new: Event) -> tuple[Kind, str]:
    why = new.refused or ""
    owner = compiled_chart.owner_state(new.source)[0]
    call = new.call
    if call is None or call.name == NEXT_STATE:
        args = {} if call is None or not isinstance(call.arguments, dict) else call.arguments
        target = args.get("target")
        if isinstance(target, str):
            parent = owner.rpartition(".")[0]
            t = compiled_chart.resolve(new.source, go(target))
            if t is None and parent:  # a sibling named as the model names it
                t = compiled_chart.resolve(new.source, go(f"{parent}.{target}"))
            if t is None:
                known = any(p == target or p.endswith("." + target) for p in compiled_chart.nodes)
                if not known:
                    return "state_missing", _missing(f"{parent}.{target}" if parent else target)
                return "edge_illegal", f"'{owner}' can no longer go to '{target}': {why}"
            if t.edge is not None and t.edge.guard is not None and "max_" not in why:
                return "guard_refused", f"the guard of edge {t.counter} now refuses: {why}"
        if "max_" in why:
            return "budget_exhausted", f"a cap now stops the move from '{owner}': {why}"
        if call is None and "guard" in why:
            return "guard_refused", f"'{owner}' decided a move its guard now refuses: {why}"
        return "changed", f"the move from '{owner}' is refused now: {why}"
    tools = compiled_chart.tools_of(owner)
    if call.name not in tools:
        return "call_not_allowed", f"'{owner}' no longer allows tool '{call.name}': {why}"
    if any(cap in why for cap in ("max_calls", "at most", "iteration", "last call")):
        return "budget_exhausted", f"a cap now stops '{call.name}' in '{owner}': {why}"
    return "arguments_refused", f"'{owner}' refuses the recorded '{call.name}' call: {why}"


def _missing(path: str) -> str:
    return (
        f"the recorded run was in state '{path}', which the new chart does not have: renamed "
        f"or removed without a mapping (replay(..., renames={{'{path}': 'NEW'}}) maps it)"
    )


def _changed(new: Event, old: Event | None, renames: Renames) -> str:
    went = f"{new.source} -> {new.target} ({new.trigger})"
    if old is None:
        return f"the new run goes on ({went}) where the recorded run stopped"
    was = f"{renames(old.source)} -> {renames(old.target)} ({renames.trigger(old.trigger)})"
    extra = f": {new.refused or new.error or new.reason}" if (new.refused or new.error) else ""
    return f"the new run went {went}{extra}; the recorded run went {was}"
