"""Lineage: chart versions and migrations, forks, and what a fork inherits from its parent.

A fork is a new run whose base is the parent's state after event `at_seq`,
rebuilt from the log. It keeps the parent's lineage root (so idempotency keys
match) and reads the transcript and executed calls from before the fork point
out of its parents instead of copying them.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Callable

from msgspec.structs import replace
from pydantic import ValidationError

from statechart import tracing
from statechart.chart.chart import Chart
from statechart.engine.calls import open_call
from statechart.engine.replay import replay
from statechart.engine.tables import compiled, status_of
from statechart.errors import ChartChangedError, RunError
from statechart.records.messages import Message
from statechart.records.run import Event, Intent, Run, Step
from statechart.store.base import Store

Migration = Callable[[Run], Run]
"""Maps a run stored under an older chart version onto the current chart."""


def describe_change(old: str | None, new: str, limit: int = 6) -> str:
    """The lines of the chart structure that differ, or why they cannot be shown."""
    if old is None:
        return "the old structure was not stored, so the difference cannot be shown"
    lines = [
        line
        for line in difflib.ndiff(old.splitlines(), new.splitlines())
        if line[:2] in ("- ", "+ ")
    ]
    shown = "; ".join(line.strip() for line in lines[:limit])
    more = f"; and {len(lines) - limit} more" if len(lines) > limit else ""
    return (shown + more) or "only the hash differs"


async def require_version(chart: Chart, run: Run, store: Store) -> None:
    """Refuse a human decision on a run stored under another chart version."""
    if run.chart_version != chart.version:
        change = describe_change(await store.chart_description(run.chart_version), chart.describe())
        raise ChartChangedError(
            f"run {run.run_id} was stored under chart '{run.chart}' version "
            f"{run.chart_version}, but this chart is version {chart.version} ({change}); "
            "decide with the chart it started on, or migrate it first with "
            "resume(..., migrate=...)"
        )


def consistency_problem(chart: Chart, run: Run) -> str | None:
    """What makes `run` impossible under `chart`, or None."""
    compiled_chart = compiled(chart)
    if run.state not in compiled_chart.nodes or compiled_chart.descend(run.state) != run.state:
        return f"the state '{run.state}' is not a leaf of the chart"
    owner, state = compiled_chart.owner_state(run.state)
    if state.kind == "model" and (run.visit is None or run.visit.state != owner):
        return f"'{owner}' is a model state, so the run needs visit=Visit(state='{owner}', ...)"
    if state.kind != "model" and run.visit is not None:
        return f"'{owner}' is not a model state, so the run must have visit=None"
    if run.status != status_of(compiled_chart, run.state):
        return f"status '{run.status}' does not fit state '{run.state}'"
    if run.pending and not run.state.endswith((".act", ".approve")):
        return f"queued calls need a model state's act or approve, not '{run.state}'"
    unknown = sorted(
        {p for p in run.visits if p not in compiled_chart.nodes}
        | {k for k in run.ledger if k not in compiled_chart.levels}
        | {k for k in run.traversals if k not in compiled_chart.user_edges}
    )
    if unknown:
        return f"visit counters, ledgers or edge counters name {', '.join(unknown)}"
    try:
        chart.context.model_validate(run.context)
    except ValidationError as exc:
        return f"the context does not fit: {exc}"
    return None


async def checked_version(
    chart: Chart,
    run: Run,
    store: Store,
    migrate: Migration | None,
    now: float,
) -> Step | None:
    """Nothing when `run` was stored under `chart`'s version; else the migration's step."""
    if run.chart_version == chart.version:
        return None
    change = describe_change(await store.chart_description(run.chart_version), chart.describe())
    where = (
        f"run {run.run_id} was stored under chart '{run.chart}' version "
        f"{run.chart_version}, but this chart '{chart.name}' is version {chart.version}"
    )
    if migrate is None:
        raise ChartChangedError(
            f"{where}. Changed: {change}. Resume it with the chart it started on, or pass "
            "migrate= a function that maps the stored run onto this chart"
        )
    migrated = migrate(run)
    if not isinstance(migrated, Run) or migrated.run_id != run.run_id:
        problem: str | None = "the migration must return the same run (same run_id)"
    else:
        problem = consistency_problem(chart, migrated)
    if problem is not None:
        raise ChartChangedError(
            f"{where}; after {getattr(migrate, '__name__', 'migrate')}: "
            f"{problem}; nothing was changed"
        )
    await store.save_chart(chart.version, chart.describe())
    seq = run.seq + 1
    after = replace(migrated, chart_version=chart.version, seq=seq)
    name = getattr(migrate, "__name__", "a migration")
    event = Event(
        run_id=run.run_id,
        seq=seq,
        time=now,
        source=run.state,
        target=after.state,
        trigger="migrate",
        actor="system",
        reason=f"chart changed from {run.chart_version} to {chart.version} ({change}); "
        f"migrated by {name}",
    )
    return Step(after, event, base=True)


async def fork(
    chart: Chart,
    run_id: str,
    at_seq: int,
    *,
    store: Store,
    now: float,
    new_run_id: str | None = None,
) -> Run:
    """A new run from the state `run_id` had after event `at_seq`; the original is untouched."""
    loaded = await store.load(run_id)
    original = loaded.snapshot
    first = original.parent_seq if original.parent_seq is not None else 0
    if not first <= at_seq <= loaded.seq:
        hint = (
            f"; it is a fork of {original.parent_run} at seq {first}: fork that run for "
            "earlier points"
            if original.parent_run
            else ""
        )
        raise RunError(
            f"run {run_id} has seqs {first}..{loaded.seq}; cannot fork at {at_seq}{hint}"
        )
    base = await store.base(run_id, at_seq)
    if base.chart_version != chart.version:
        raise ChartChangedError(
            f"run {run_id} was at chart version {base.chart_version} at seq {at_seq}, but this "
            f"chart is version {chart.version}; fork with the chart it had, then migrate"
        )
    events = [e for e in await store.events(run_id, after=base.seq) if e.seq <= at_seq]
    state = replay(compiled(chart), base, events)
    new_id = new_run_id or uuid.uuid4().hex
    context, span = tracing.run_trace_context(chart.name, new_id)  # a run, a trace of its own
    new = replace(
        state,
        run_id=new_id,
        parent_run=run_id,
        parent_seq=at_seq,
        trace=context,
        lineage_root=original.lineage_root or run_id,
        created_at=now,
    )
    if span is not None:
        span.set_attributes({"statechart.fork.of": run_id, "statechart.fork.at": at_seq})
        span.end()
    head = open_call(new)
    inherited: list[Intent] = []
    if head is not None and new.visit is not None:
        # The parent may have run this call after the fork point: the fork settles it by
        # the tool's retry policy, under its own intent row with the same key.
        inherited.append(Intent(call=head.call, state=new.visit.state, seq=at_seq, key=head.key))
        if new.state.endswith(".act"):
            new = replace(new, doubt=head.call.id)
    await store.create(new, inherited)
    return new


async def visit_transcript(store: Store, run: Run, region: str | None = None) -> list[Message]:
    """The transcript of the run's current visit, including what a fork's parents hold
    (`region`: the run is seen from that region of a parallel state)."""
    assert run.visit is not None
    if region is None:
        return await _messages(store, run, run.visit.seq, None)
    return await region_transcript(store, run, run.visit.seq, region)


async def region_transcript(store: Store, run: Run, visit: int, region: str) -> list[Message]:
    """The messages of visit `visit` that the steps of `region` added: the regions of a
    parallel state start their visits at the same seq, so that key alone mixes them."""
    messages = await _messages(store, run, visit, None)
    out: list[Message] = []
    at = 0
    for event in await _events_since(store, run, visit):
        if event.visit != visit or not event.delta:
            continue
        if event.source == region or event.source.startswith(region + "."):
            out += messages[at : at + event.delta]
        at += event.delta
    return out


async def _events_since(store: Store, run: Run, seq: int) -> list[Event]:
    """The run's events from `seq` on, through a fork's parents."""
    own = await store.events(run.run_id, after=max(seq - 1, 0))
    if run.parent_run is None or run.parent_seq is None or seq > run.parent_seq:
        return own
    parent = (await store.load(run.parent_run)).snapshot
    early = await _events_since(store, parent, seq)
    return [e for e in early if e.seq <= run.parent_seq] + own


async def transcript_of(store: Store, run: Run, visit: int) -> list[Message]:
    """The transcript of one visit of the run, including what a fork's parents hold."""
    return await _messages(store, run, visit, None)


async def _messages(store: Store, run: Run, visit: int, upto: int | None) -> list[Message]:
    own = await store.transcript(run.run_id, visit)
    if upto is not None:
        events = await store.events(run.run_id, after=max(visit - 1, 0))
        own = own[: sum(e.delta for e in events if e.visit == visit and e.seq <= upto)]
    if run.parent_run is None or run.parent_seq is None or visit > run.parent_seq:
        return own
    parent = (await store.load(run.parent_run)).snapshot  # its lineage, which never changes
    return await _messages(store, parent, visit, run.parent_seq) + own


async def entering_edge(store: Store, run: Run, owner: str) -> str | None:
    """The user edge of the move that last entered `owner`, searching a fork's parents too."""
    after = run.visit.seq - 1 if run.visit is not None and run.visit.state == owner else 0
    upto: int | None = None
    current: Run | None = run
    while current is not None:
        for event in reversed(await store.events(current.run_id, after=max(after, 0))):
            if (upto is None or event.seq <= upto) and owner in event.entered:
                return event.edge
        if current.parent_run is None:
            return None
        upto = current.parent_seq
        current = (await store.load(current.parent_run)).snapshot
    return None


async def fingerprints(store: Store, run: Run) -> set[str]:
    """Fingerprints of every call the run executed, including before a fork point."""
    found = await store.fingerprints(run.run_id)
    child = run
    while child.parent_run is not None and child.parent_seq is not None:
        parent = (await store.load(child.parent_run)).snapshot
        found |= {
            e.fingerprint
            for e in await store.events(parent.run_id)
            if e.fingerprint is not None and e.seq <= child.parent_seq
        }
        child = parent
    return found
