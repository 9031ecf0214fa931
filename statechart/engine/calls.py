"""Intents: a tool call recorded, with its idempotency key, before it runs.

A call becomes an intent when a step leaves it at the head of the queue in
`act`; the event of that step *is* the intent row. It completes when the call
leaves the queue (it ran, or was refused, rejected or dropped). On resume, an
intent left open by a driver that never released its lease is settled by the
tool's retry policy (see `docs/persistence.md`).
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any

from statechart.chart.names import NEXT_STATE
from statechart.chart.tools import Tool, checked
from statechart.engine.tables import CompiledChart
from statechart.records.build import evolve
from statechart.records.run import CheckedCall, Intent, QueuedCall, Run, Visit


def idempotency_key(run: Run, tool: Tool, call_fingerprint: str) -> str:
    """Lineage root + state path + fingerprint (+ occurrence for repeatable tools)."""
    assert run.visit is not None
    return _key(run.lineage_root or run.run_id, run.visit, run.visits, tool, call_fingerprint)


def _key(root: str, visit: Visit, visits: dict[str, int], tool: Tool, call_fingerprint: str) -> str:
    occurrence = ""
    if tool.repeatable:
        done = visit.succeeded.get(tool.name, 0)
        occurrence = f"|{visits.get(visit.state, 0)}.{done}"
    raw = f"{root}|{visit.state}|{call_fingerprint}{occurrence}"
    return sha256(raw.encode()).hexdigest()[:32]


def doubt_after(
    doubt: str | None,
    handled: str | None,
    pending: tuple[QueuedCall, ...],
) -> str | None:
    """The call still in doubt after a step that handled call `handled` (ran, refused,
    asked about, decided on it) and left `pending` queued."""
    if doubt is None or handled == doubt or all(q.call.id != doubt for q in pending):
        return None
    return doubt


def open_call(run: Run) -> QueuedCall | None:
    """The queued call whose intent is open (recorded and not completed), if any."""
    if run.pending and run.pending[0].key is not None:
        return run.pending[0]
    return None


def track(
    compiled_chart: CompiledChart,
    before: Run,
    run: Run,
    update: dict[str, Any],
    seq: int,
    *,
    keep_open: bool = False,
) -> tuple[Intent | None, tuple[str, ...], CheckedCall | None]:
    """Record the new head's key in `update` (the changes that make `run` the run after
    the step); the intent opened (and its call's checked arguments) and the intents
    closed."""
    was = open_call(before)
    pending = update.get("pending", run.pending)
    head = pending[0] if pending else None
    opened = None
    head_checked: CheckedCall | None = None
    if head is not None and head.key is None and head.call.name != NEXT_STATE:
        visit = update.get("visit", run.visit)
        state = update.get("state", run.state)
        if visit is not None and state.endswith(".act"):
            tool = compiled_chart.tools_of(visit.state).get(head.call.name)
            found = checked(tool, head.call) if tool is not None else None
            if tool is not None and isinstance(found, CheckedCall):
                visits = update.get("visits", run.visits)
                key = _key(run.lineage_root or run.run_id, visit, visits, tool, found.fingerprint)
                head_checked = found
                head = evolve(head, {"key": key})
                update["pending"] = (head, *pending[1:])
                opened = Intent(call=head.call, state=visit.state, seq=seq, key=key)
    closed: tuple[str, ...] = ()
    if (
        was is not None
        and not keep_open
        and (head is None or head.call.id != was.call.id or opened is not None)
    ):
        closed = (was.call.id,)  # it left the queue, or is recorded again (edited)
    return opened, closed, head_checked
