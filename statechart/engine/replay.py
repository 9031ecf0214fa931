"""Replay: the run as a fold of its events, starting from a stored base snapshot.

The stored snapshot is a cache of this fold; `fork` rebuilds a past state
with it, and a property test checks that the fold equals the snapshot after
every event of random runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec.structs import replace

from statechart.chart.names import NEXT_STATE
from statechart.engine import regions as regions_
from statechart.engine.calls import doubt_after
from statechart.engine.effects import queued_and_answered
from statechart.engine.history import applied
from statechart.engine.reasons import waiting_for_approval
from statechart.engine.scopes import crossed, patched
from statechart.engine.strict import breached
from statechart.engine.tables import CompiledChart, status_of
from statechart.records.run import Event, QueuedCall, Run, Visit

_TOOL_TRIGGERS = ("next_call", "results", "shadow")
_COUNTED = (*_TOOL_TRIGGERS, "retry")
"""Tool steps that count a call against the visit's caps (a failed attempt counts too)."""


def replay(compiled_chart: CompiledChart, base: Run, events: Iterable[Event]) -> Run:
    """The run after folding `events` (those following `base`, in order) into `base`."""
    run = base
    for event in events:
        run = fold(compiled_chart, run, event)
    return run


def fold(compiled_chart: CompiledChart, run: Run, e: Event) -> Run:
    """The run after one event."""
    if e.trigger == "migrate":
        raise ValueError(f"event {e.seq} of run {run.run_id} is a migration: replay from its base")
    if e.seq != run.seq + 1:
        raise ValueError(f"event {e.seq} does not follow seq {run.seq} of run {run.run_id}")
    if run.regions:
        path = regions_.region_of(run, e.source)
        if path is not None:  # a region's step: folded on the run as the region sees it
            seen = fold(compiled_chart, regions_.project(run, path), e)
            return regions_.merged(compiled_chart, run, path, seen)
    u: dict[str, Any] = {"seq": e.seq, "state": e.target}
    if not e.usage.is_zero():
        u["ledger"] = compiled_chart.charged(run.ledger, e.source, e.usage)
    if e.exhausted is not None:
        u["routed"] = run.routed + 1
    elif run.routed and e.usage.steps:
        u["routed"] = 0
    if e.patch:
        u.update(patched(run, e.scope, e.patch))
    if len(compiled_chart.scopes) > 1 and (e.exited or e.inputs):
        u["context"], u["contexts"] = crossed(
            compiled_chart,
            u.get("context", run.context),
            u.get("contexts", run.contexts),
            e.exited,
            e.outputs,
            e.inputs,
        )
    if e.model is not None:
        u["model"] = e.model
    if e.breach is not None:
        u["breached"] = breached(compiled_chart, run, e.source, e.breach.rsplit(":", 1)[1])
    moved = bool(e.entered or e.exited)
    u["pending"] = _pending(compiled_chart, run, e, moved)
    if e.trigger == "takeover" and e.call is not None:
        u["doubt"] = e.call.id
    elif run.doubt is not None:
        u["doubt"] = doubt_after(run.doubt, e.call.id if e.call is not None else None, u["pending"])
    u["visit"] = _visit(compiled_chart, run, e, moved)
    if e.trigger == "retry":
        u.update(status="sleeping", wake=e.wake, attempt=run.attempt + 1, reason=e.reason)
    elif e.trigger == "wake":
        u.update(status="running", wake=min(run.timers.values(), default=None), reason="")
    elif run.attempt and (e.usage.model_calls or e.usage.tool_calls or moved):
        u["attempt"] = 0
    if e.remembered:
        u["history"] = applied(run.history, e.remembered)
    if moved:
        if run.wake is not None or run.timers or compiled_chart.timers:
            u.update(compiled_chart.rearmed(run.timers, e.exited, e.entered, e.time))
        _entered(compiled_chart, run, e, u)
        if run.regions or e.target in compiled_chart.parallels:
            starts = regions_.starts_of(compiled_chart, e.target, e.entered)
            regions_.moved(compiled_chart, run, e.target, starts, e.seq, u)
    elif e.trigger in ("approved", "rejected") and e.refused is not None:
        u["reason"] = f"{e.trigger}, but {e.refused}"
    return replace(run, **u)


def _pending(
    compiled_chart: CompiledChart, run: Run, e: Event, moved: bool
) -> tuple[QueuedCall, ...]:
    if e.trigger == "propose":
        assert run.visit is not None
        state = compiled_chart.nodes[run.visit.state].state
        assert state is not None
        iterations = run.visit.iterations + e.usage.model_calls
        queued, answered = queued_and_answered(state, run.visit.state, iterations, e.calls)
        if e.delta != 1 + len(answered):  # stored before next_state waited for results
            nexts = [c for c in e.calls if c.name == NEXT_STATE][:1]
            queued = (*(c for c in e.calls if c.name != NEXT_STATE), *nexts)
        queue = tuple(QueuedCall(call=c) for c in queued)
    elif e.trigger in _TOOL_TRIGGERS and e.actor == "code":
        queue = run.pending[1:]
    elif e.trigger == "ask":
        queue = run.pending[:1]
    elif e.trigger == "approved" and e.source.endswith(".approve") and e.call is not None:
        head = run.pending[0]
        key = head.key if e.call == head.call else None
        queue = (QueuedCall(call=e.call, approved_by=e.by, key=key),)
    elif moved:
        queue = ()
    else:
        queue = run.pending
    if e.intent is not None:
        queue = (replace(queue[0], key=e.key), *queue[1:])
    return queue


def _visit(compiled_chart: CompiledChart, run: Run, e: Event, moved: bool) -> Visit | None:
    visit = run.visit
    if visit is not None:
        if e.usage.model_calls:
            visit = replace(visit, iterations=visit.iterations + e.usage.model_calls)
        if e.actor == "code" and e.trigger in _COUNTED and e.call is not None:
            name = e.call.name
            counts: dict[str, Any] = {"calls": {**visit.calls, name: visit.calls.get(name, 0) + 1}}
            if e.error is None:
                counts["succeeded"] = {**visit.succeeded, name: visit.succeeded.get(name, 0) + 1}
            visit = replace(visit, **counts)
    if moved:
        owner, state = compiled_chart.owner_state(e.target)
        if state.kind == "model" and owner in e.entered:
            return Visit(state=owner, seq=e.seq)
        if state.kind != "model":
            return None
    return visit


def _entered(compiled_chart: CompiledChart, run: Run, e: Event, u: dict[str, Any]) -> None:
    counted = [p for p in e.entered if compiled_chart.nodes[p].state is not None]
    if counted:
        visits = dict(run.visits)
        for p in counted:
            visits[p] = visits.get(p, 0) + 1
        u["visits"] = visits
    t = compiled_chart.user_edges.get(e.edge) if e.edge is not None else None
    if t is not None and t.edge is not None and t.edge.max_traversals is not None:
        u["traversals"] = {**run.traversals, t.counter: run.traversals.get(t.counter, 0) + 1}
    status = status_of(compiled_chart, e.target)
    u["status"] = status
    owner = compiled_chart.owner_state(e.target)[0]
    if e.trigger == "cancel":
        u["reason"] = f"cancelled: {e.reason}"
    elif status == "waiting":
        u["reason"] = e.reason if e.trigger == "ask" else waiting_for_approval(owner)
    elif status == "ended":
        u["reason"] = f"ended in '{e.target}'"
    else:
        u["reason"] = ""
