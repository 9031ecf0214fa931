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

from msgspec.structs import replace

from statechart.chart.names import NEXT_STATE
from statechart.chart.tools import Tool, checked
from statechart.engine.tables import CompiledChart
from statechart.records.run import CheckedCall, Intent, QueuedCall, Run, Visit


def idempotency_key(run: Run, tool: Tool, call_fingerprint: str) -> str:
    """Lineage root + state path + fingerprint (+ occurrence for repeatable tools)."""
    assert run.visit is not None
    return key_in(run.lineage_root or run.run_id, run.visit, run.visits, tool, call_fingerprint)


def key_in(
    root: str, visit: Visit, visits: dict[str, int], tool: Tool, call_fingerprint: str
) -> str:
    """The idempotency key of a call in `visit`, from the parts `idempotency_key` reads off a
    run (a step that has not made its run yet passes them itself)."""
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


def record_intent(
    tools: dict[str, Tool],
    run: Run,
    visit: Visit,
    visits: dict[str, int],
    head: QueuedCall,
    seq: int,
) -> tuple[QueuedCall, Intent, CheckedCall] | None:
    """The head call with its idempotency key, the intent that opens for it at `seq`, and
    its checked arguments; None when it has a key already, is `next_state`, or cannot run
    (an unknown tool, arguments that do not fit). `visit` and `visits` are the run's after
    the step."""
    if head.key is not None or head.call.name == NEXT_STATE:
        return None
    tool = tools.get(head.call.name)
    found = checked(tool, head.call) if tool is not None else None
    if tool is None or not isinstance(found, CheckedCall):
        return None
    key = key_in(run.lineage_root or run.run_id, visit, visits, tool, found.fingerprint)
    opened = Intent(call=head.call, state=visit.state, seq=seq, key=key)
    return replace(head, key=key), opened, found


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
    visit = update.get("visit", run.visit)
    if head is not None and visit is not None and update.get("state", run.state).endswith(".act"):
        visits = update.get("visits", run.visits)
        tools = compiled_chart.tools_of(visit.state)
        recorded = record_intent(tools, run, visit, visits, head, seq)
        if recorded is not None:
            head, opened, head_checked = recorded
            update["pending"] = (head, *pending[1:])
    closed: tuple[str, ...] = ()
    if (
        was is not None
        and not keep_open
        and (head is None or head.call.id != was.call.id or opened is not None)
    ):
        closed = (was.call.id,)  # it left the queue, or is recorded again (edited)
    return opened, closed, head_checked
