"""What the inspector's pages show, read from a store: plain data for the templates.

A run's chart is loaded the way a worker loads it (`trusted_target`: only from the
`--agents` folder and installed packages' registered charts), so a database row never
makes the inspector import code; where it cannot, everything stored is still shown with
the reason the diagram and the decisions are not.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from statechart.chart.chart import Chart
from statechart.chart.names import CANCELLED, ESCALATED, EXHAUSTED
from statechart.engine import compiled, outcome_of
from statechart.engine.replay import replay
from statechart.errors import StatechartError
from statechart.io import audit
from statechart.io.diagram import mermaid
from statechart.io.loading import load_trusted
from statechart.mining.traces import regions_of
from statechart.records.run import Event, Intent, Run
from statechart.records.spent import spent_of
from statechart.runtime.current import current
from statechart.store.base import Store


@dataclass
class Charts:
    """The charts the inspector may load, by version (failures remembered with why)."""

    agents: Path | None
    found: dict[str, tuple[Chart | None, str | None]] = field(default_factory=dict)
    failed: dict[str, tuple[float, str | None]] = field(default_factory=dict)
    """version -> (when, why) of the last failed load: tried again after a pause"""

    async def of(self, store: Store, run: Run) -> tuple[Chart | None, str | None]:
        """The run's chart, or None and why not (tried again next time: a file may be
        fixed while the inspector runs)."""
        version = run.chart_version
        if version in self.found:
            return self.found[version]
        failed = self.failed.get(version)
        if failed is not None and time.monotonic() - failed[0] < RETRY_SECONDS:
            return None, failed[1]
        found = await self._load(store, run)
        if found[0] is not None:
            self.found[version] = found
        else:
            self.failed[version] = (time.monotonic(), found[1])
        return found

    async def _load(self, store: Store, run: Run) -> tuple[Chart | None, str | None]:
        try:
            source = await store.chart_source(run.chart_version)
        except StatechartError as exc:
            return None, f"the store cannot say where its chart came from: {exc}"
        if source is None:
            return None, (
                f"the store does not record where chart '{run.chart}' version "
                f"{run.chart_version} came from (it was built inside a function)"
            )
        try:
            chart, _ = load_trusted(source, self.agents)
        except Exception as exc:
            return None, f"its chart {source} cannot be loaded here: {exc}"
        if chart.version != run.chart_version:
            return None, (
                f"{source} is now version {chart.version}; the run was stored under "
                f"{run.chart_version}"
            )
        return chart, None


@dataclass(frozen=True)
class Bar:
    """One budget cap of one level: spent of cap."""

    level: str
    kind: str
    spent: int
    cap: int

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.spent / self.cap)) if self.cap else 100


def budgets(chart: Chart, run: Run) -> list[Bar]:
    """Every cap of every budget level, with what the run spent against it."""
    out = []
    for path, level in compiled(chart).levels.items():
        spent = run.ledger.get(path)
        for kind, cap in level.caps.items():
            out.append(Bar(path, kind, spent_of(spent, kind) if spent else 0, cap))
    return out


def intent_rows(intents: list[Intent], run: Run) -> list[dict[str, Any]]:
    """Intents with their status: completed, in doubt (a driver may have run it and
    stopped without saying), or open."""
    rows = []
    for i in intents:
        status = "completed" if i.completed else "in doubt" if run.doubt == i.call.id else "open"
        rows.append(
            {
                "seq": i.seq,
                "tool": i.call.name,
                "state": i.state,
                "key": i.key,
                "status": status,
                "arguments": pretty(i.call.arguments),
            }
        )
    return rows


def pretty(value: Any) -> str:
    """JSON for reading: indented, keys sorted, anything unknown as its text."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def current_call(run: Run) -> str | None:
    """The id of the call a waiting run asks a person about, if it asks about a call."""
    return run.pending[0].call.id if run.status == "waiting" and run.pending else None


RETRY_SECONDS = 5.0
"""A chart that failed to load is tried again after this long (not on every request)."""
TRACE_ID = re.compile(r"[0-9a-f]{32}")


def event_rows(events: list[Event], regions: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The timeline's rows, each with its whole event as JSON to open and the region of a
    parallel state it is a step of (None for the run's own steps)."""
    rows = audit.timeline(events)
    for row, event in zip(rows, events, strict=True):
        row["detail"] = pretty(msgspec.to_builtins(event))
        row["region"] = next((r for r in regions if event.source.startswith(r + ".")), None)
    return rows


@dataclass
class RunPageData:
    """Everything a run's page shows."""

    run: Run
    events: list[dict[str, Any]]
    regions: dict[str, list[dict[str, Any]]]
    """Each region of a parallel or map state the run went through -> its steps' rows."""
    chart: Chart | None
    why_no_chart: str | None
    diagram: str | None
    bars: list[Bar]
    intents: list[dict[str, Any]]
    forks: list[str]
    more_forks: int
    visits: list[tuple[tuple[int, str], str]]
    """((visit, region or ""), state) of every visit with a transcript."""
    pending: dict[str, Any] | None
    trace_link: str | None
    badge: str = "running"
    """The status badge's class: the status, or for an ended run how it ended (`done`,
    `failed`, `cancelled`), so a failure is not shown green."""
    idle: bool = False
    """A person's decision is the last event and the run is `running`: recorded, but no
    process may be driving it (nothing drives a SQLite store by itself)."""


async def run_page(store: Store, charts: Charts, run_id: str, trace_url: str | None) -> RunPageData:
    """Read a run for its page: the live run (folded when the chart loads), its events,
    diagram, budgets, intents, forks, visits and what it waits on."""
    loaded = await store.load(run_id)
    chart, why = await charts.of(store, loaded.snapshot)
    run = current(chart, loaded) if chart is not None else loaded.snapshot
    if chart is None and loaded.tail:
        run = replace(run, state=loaded.state, seq=loaded.seq)
    events = await store.events(run_id)
    children = await store.page(parent=run_id, limit=100)
    forks = [s.run_id for s in children.rows]
    regions = regions_of(run, events)
    rows = event_rows(events, regions)
    visits = sorted(
        {
            (e.visit, row["region"] or ""): e.source.rsplit(".", 1)[0]
            for e, row in zip(events, rows, strict=True)
            if e.visit is not None and e.delta
        }.items()
    )
    pending = None
    if run.status == "waiting" and run.pending:
        head = run.pending[0].call
        pending = {"tool": head.name, "id": head.id, "arguments": pretty(head.arguments)}
    trace_link = None
    parts = run.trace.get("traceparent", "").split("-")
    if trace_url and len(parts) == 4 and TRACE_ID.fullmatch(parts[1]):
        trace_link = trace_url.replace("{trace_id}", parts[1])
    return RunPageData(
        run=run,
        events=rows,
        regions={r: [row for row in rows if row["region"] == r] for r in regions},
        chart=chart,
        why_no_chart=why,
        diagram=mermaid(chart, run, events) if chart is not None else None,
        bars=budgets(chart, run) if chart is not None else [],
        intents=intent_rows(await store.intents(run_id), run),
        forks=forks,
        more_forks=children.total - len(forks),
        visits=visits,
        pending=pending,
        trace_link=trace_link,
        badge=badge_of(chart, run),
        idle=run.status == "running" and bool(events) and events[-1].actor == "human",
    )


def badge_of(chart: Chart | None, run: Run) -> str:
    """The class of a run's status badge: its status, or for an ended run `done`,
    `failed` or `cancelled` by its outcome (by the terminal's name with no chart)."""
    if run.status != "ended":
        return run.status
    if chart is not None:
        outcome = outcome_of(compiled(chart), run)
    else:
        leaf = run.state.rsplit(".", 1)[-1]
        failing = leaf in (ESCALATED, EXHAUSTED, "failed")
        outcome = "cancelled" if leaf == CANCELLED else "failure" if failing else "success"
    return {"failure": "failed", "cancelled": "cancelled"}.get(outcome, "done")


def shown_reason(reason: str) -> str:
    """A run's reason as its page's header says it: nothing when it only repeats the
    status line (`ended in 'done'`)."""
    return "" if reason.startswith("ended in ") else reason


async def context_at(
    store: Store, charts: Charts, run_id: str, seq: int
) -> tuple[dict[str, Any] | None, str | None]:
    """The context after event `seq` and what that event changed (field: before, after),
    folded with the chart of the snapshot it starts from; or None and why not."""
    run = (await store.load(run_id)).snapshot
    if run.parent_seq is not None and seq <= run.parent_seq:
        return None, f"step {seq} is run {run.parent_run}'s, before this fork: open it there"
    events = await store.events(run_id, after=max(seq - 1, 0))
    if seq and (not events or events[0].seq != seq):
        return None, f"run {run_id} has no step {seq}"
    base = await store.base(run_id, at=max(seq - 1, 0))
    chart, why = await charts.of(store, base)
    if chart is None:
        return None, why
    between = [e for e in await store.events(run_id, after=base.seq) if e.seq < seq]
    before = replay(compiled(chart), base, between)
    if seq == 0:
        after = before
    elif (migrated := await store.base(run_id, at=seq)).seq == seq:
        after = migrated  # a migration: its own base holds the run after it
    else:
        after = replay(compiled(chart), before, events[:1])
    changed = {
        key: (before.context.get(key), after.context.get(key))
        for key in sorted(set(before.context) | set(after.context))
        if before.context.get(key) != after.context.get(key)
    }
    return {"seq": seq, "context": pretty(after.context), "changed": changed}, None
