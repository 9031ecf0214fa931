"""Assertions over a finished run that read like the property they check: the path it
took, that it kept within its budgets, which tools it called."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statechart.chart.chart import Chart
from statechart.chart.names import SUBSTATES
from statechart.engine import compiled
from statechart.records.run import Event, Run
from statechart.records.spent import spent_of
from statechart.store.base import Store

COUNTED = ("steps", "model_calls", "tool_calls")
"""Kinds no run may pass at all: a call that would pass them never starts."""


@dataclass(frozen=True)
class Ran:
    """A run with what the assertions read beside it: its events and its chart."""

    run: Run
    events: tuple[Event, ...]
    chart: Chart

    @classmethod
    async def read(cls, chart: Chart, run: Run, store: Store) -> Ran:
        """`run` (from `run_sync`, `run_to_end`, ...) with its events read from `store`."""
        return cls(run=run, events=tuple(await store.events(run.run_id)), chart=chart)

    @property
    def state(self) -> str:
        return self.run.state

    @property
    def status(self) -> str:
        return self.run.status


def path_of(events: Sequence[Event], first: str, *, nested: bool = False) -> list[str]:
    """The states a run entered, in order, from `first` (its initial state): top-level
    states only unless `nested` (then every state, by path); a model state's own loop
    (`think`, `act`, `approve`) is not a state of its own."""
    out = _top(first, nested)
    for e in events:
        for p in e.entered:
            if p.rsplit(".", 1)[-1] in SUBSTATES:
                continue
            if not nested and "." in p:
                continue
            out.append(p)
    return out


def _top(leaf: str, nested: bool) -> list[str]:
    """The states `leaf` is in: the top-level one, or (nested) it and each below it."""
    parts = [p for p in leaf.split(".") if p not in SUBSTATES]
    if not nested:
        return parts[:1]
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def assert_path(ran: Ran, expected: Sequence[str], *, nested: bool = False) -> None:
    """The run entered exactly these states, in this order (top-level states, or with
    `nested` every state by path: `["scope", "explore", "explore.survey", ...]`)."""
    first = _first_state(ran)
    found = path_of(ran.events, first, nested=nested)
    assert found == list(expected), (
        f"run {ran.run.run_id} took the path {found}, not {list(expected)}"
    )


def _first_state(ran: Ran) -> str:
    if ran.events:
        return ran.events[0].source
    return ran.run.state


def assert_within_budget(ran: Ran) -> None:
    """Every budget level of the chart kept its promise: steps, model calls and tool
    calls never past their caps; tokens, cost and wall time past theirs by at most the
    one call that crossed (not at all on a strict level)."""
    tables = compiled(ran.chart)
    for name, level in tables.levels.items():
        spent = ran.run.ledger.get(name)
        if spent is None:
            continue
        for kind, cap in level.caps.items():
            used = spent_of(spent, kind)
            if kind in COUNTED or (level.strict and kind != "wall_ms"):
                slack = 0
            else:
                slack = max(
                    (spent_of(e.usage, kind) for e in ran.events if _under(e.source, name)),
                    default=0,
                )
            assert used <= cap + slack, (
                f"run {ran.run.run_id}: budget level '{name}' spent {used} {kind}, over its "
                f"cap of {cap}" + (f" by more than one call ({slack})" if slack else "")
            )


def _under(leaf: str, level: str) -> bool:
    return level == "root" or leaf == level or leaf.startswith(level + ".")


def calls_of(ran: Ran, tool: str) -> list[Event]:
    """The events where `tool` ran (returned or raised), in order."""
    return [e for e in ran.events if e.usage.tool_calls and e.call and e.call.name == tool]


def assert_called(ran: Ran, tool: str, *, once: bool = False, times: int | None = None) -> None:
    """`tool` ran in this run: at least once, exactly once (`once`), or exactly `times`."""
    n = len(calls_of(ran, tool))
    want = 1 if once else times
    if want is None:
        assert n >= 1, f"run {ran.run.run_id} never called '{tool}'"
    else:
        assert n == want, f"run {ran.run.run_id} called '{tool}' {n} time(s), not {want}"


def assert_not_called(ran: Ran, tool: str) -> None:
    """`tool` never ran in this run (a call refused or rejected did not run)."""
    assert_called(ran, tool, times=0)
