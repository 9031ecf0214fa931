"""Intents: a tool call recorded, with its idempotency key, before it runs.

A call becomes an intent when a step leaves it at the head of the queue in
`act`; the event of that step *is* the intent row. It completes when the call
leaves the queue (it ran, or was refused, rejected or dropped). On resume, an
intent left open by a driver that never released its lease is settled by the
tool's retry policy (see `docs/persistence.md`).
"""

from __future__ import annotations

import hashlib

from statechart.chart.names import NEXT_STATE
from statechart.chart.tools import Tool, checked
from statechart.engine.tables import CompiledChart
from statechart.records.build import evolve
from statechart.records.messages import ToolCall
from statechart.records.run import CheckedCall, Intent, QueuedCall, Run


def idempotency_key(run: Run, tool: Tool, call_fingerprint: str) -> str:
    """Lineage root + state path + fingerprint (+ occurrence for repeatable tools)."""
    assert run.visit is not None
    occurrence = ""
    if tool.repeatable:
        done = run.visit.succeeded.get(tool.name, 0)
        occurrence = f"|{run.visits.get(run.visit.state, 0)}.{done}"
    raw = f"{run.lineage_root or run.run_id}|{run.visit.state}|{call_fingerprint}{occurrence}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


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
    after: Run,
    seq: int,
    *,
    keep_open: bool = False,
) -> tuple[Run, Intent | None, tuple[str, ...], CheckedCall | None]:
    """The run with the new head's key recorded, the intent opened (and its call's checked
    arguments), and the intents closed."""
    was = open_call(before)
    head = after.pending[0] if after.pending else None
    opened = None
    head_checked: CheckedCall | None = None
    visit = after.visit
    if (
        head is not None
        and head.key is None
        and after.state.endswith(".act")
        and head.call.name != NEXT_STATE
        and visit is not None
    ):
        found = _checked_key(compiled_chart, after, head.call)
        if found is not None:
            head_checked, key = found
            head = evolve(head, {"key": key})
            after = evolve(after, {"pending": (head, *after.pending[1:])})
            opened = Intent(call=head.call, state=visit.state, seq=seq, key=key)
    closed: tuple[str, ...] = ()
    if (
        was is not None
        and not keep_open
        and (head is None or head.call.id != was.call.id or opened is not None)
    ):
        closed = (was.call.id,)  # it left the queue, or is recorded again (edited)
    return after, opened, closed, head_checked


def _checked_key(
    compiled_chart: CompiledChart, run: Run, call: ToolCall
) -> tuple[CheckedCall, str] | None:
    """The validated arguments and the key of a call that can run: a known tool with
    arguments that fit."""
    assert run.visit is not None
    state = compiled_chart.nodes[run.visit.state].state
    tool = state.tool_map.get(call.name) if state is not None else None
    if tool is None:
        return None
    found = checked(tool, call)
    if isinstance(found, str):
        return None
    return found, idempotency_key(run, tool, found.fingerprint)
