"""Pure transitions made by people: approve, reject, cancel. Free steps, actor `human`."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from statechart.chart.tools import parse_arguments
from statechart.engine.moves import commit, try_move
from statechart.engine.reasons import not_executed
from statechart.engine.regions import merged, project
from statechart.engine.tables import CANCEL, CompiledChart
from statechart.errors import NotWaitingError, RunEndedError, RunError, ToolArgumentsError
from statechart.records.messages import Message, ToolCall
from statechart.records.run import QueuedCall, Run, Step
from statechart.records.spent import ZERO


def decide(
    compiled_chart: CompiledChart,
    run: Run,
    *,
    approved: bool,
    by: str,
    note: str,
    edits: dict[str, Any] | None,
    now: float,
    region: str | None = None,
) -> Step:
    """Record a human decision on a waiting run (in a parallel state: on its waiting
    `region`, needed only when several wait); the run becomes runnable again."""
    if run.status != "waiting":
        raise NotWaitingError(
            f"run {run.run_id} is {run.status} in '{run.state}', not waiting for approval; "
            "nothing to approve or reject"
            + (" (a parallel state waits once none of its regions runs)" if run.regions else "")
        )
    if run.regions:
        path = _waiting_region(run, region)
        step = decide(
            compiled_chart,
            project(run, path),
            approved=approved,
            by=by,
            note=note,
            edits=edits,
            now=now,
        )
        return replace(step, run=merged(compiled_chart, run, path, step.run))
    verb = "approved" if approved else "rejected"
    reason = f"{verb} by {by}" + (f": {note}" if note else "")
    if run.state.endswith(".approve"):
        return _decide_call(compiled_chart, run, approved, by, reason, edits, now)
    if edits:
        raise RunError(
            f"run {run.run_id} waits in approval state '{run.state}', which has no pending call "
            "to edit; approve without edits"
        )
    state = compiled_chart.nodes[run.state].state
    assert state is not None
    target = state.on_approve if approved else state.on_reject
    prefix = compiled_chart.nodes[run.state].prefix
    run = replace(run, status="running", reason="")
    move = try_move(compiled_chart, run, prefix + str(target), {})
    if isinstance(move, str):
        waiting = replace(run, status="waiting", reason=f"{verb}, but {move}")
        return commit(
            compiled_chart,
            waiting,
            None,
            now,
            ZERO,
            trigger=verb,
            actor="human",
            reason=reason,
            refused=move,
            by=by,
        )
    return commit(
        compiled_chart, run, move, now, ZERO, trigger=verb, actor="human", reason=reason, by=by
    )


def _waiting_region(run: Run, region: str | None) -> str:
    """The region of a parallel state a decision is for."""
    waiting = [p for p, r in run.regions.items() if r.status == "waiting"]
    if region is not None:
        if region not in waiting:
            raise NotWaitingError(
                f"run {run.run_id}: region '{region}' is not waiting for approval; "
                f"waiting: {', '.join(waiting) or 'none'}"
            )
        return region
    if len(waiting) != 1:
        raise RunError(
            f"run {run.run_id} waits in {len(waiting)} regions ({', '.join(waiting)}); "
            "say which with region="
        )
    return waiting[0]


def _decide_call(
    compiled_chart: CompiledChart,
    run: Run,
    approved: bool,
    by: str,
    reason: str,
    edits: dict[str, Any] | None,
    now: float,
) -> Step:
    head = run.pending[0]
    call = head.call
    if approved:
        if edits:
            call = _edited(compiled_chart, run, call, edits)
        # An edit makes a new call: its intent is recorded again under a new key.
        queued = QueuedCall(call=call, approved_by=by, key=None if edits else head.key)
        before = run
        run = replace(run, pending=(queued,), status="running", reason="")
        return commit(
            compiled_chart,
            run,
            compiled_chart.fired(run.state, "approved"),
            now,
            ZERO,
            trigger="approved",
            actor="human",
            reason=reason,
            call=call,
            by=by,
            before=before,
            result=f"edited arguments: {edits}" if edits else None,
        )
    msg = Message(role="tool", tool_call_id=call.id, content=not_executed(reason))
    before = run
    run = replace(run, pending=(), status="running", reason="")
    return commit(
        compiled_chart,
        run,
        compiled_chart.fired(run.state, "rejected"),
        now,
        ZERO,
        trigger="rejected",
        before=before,
        actor="human",
        reason=reason,
        call=call,
        result=msg.content,
        messages=(msg,),
        by=by,
    )


def _edited(
    compiled_chart: CompiledChart, run: Run, call: ToolCall, edits: dict[str, Any]
) -> ToolCall:
    """The pending call with the human's edits, validated by the tool (or refused, unchanged)."""
    base = parse_arguments(call)
    if isinstance(base, str):
        base = {}  # malformed JSON from the model: the edit replaces it whole
    arguments = {**base, **edits}
    owner, state = compiled_chart.owner_state(run.state)
    tool = state.tool_map.get(call.name)
    if tool is not None:
        unknown = sorted(set(edits) - set(tool.args_model.model_fields))
        if unknown:
            raise RunError(
                f"edits to the pending call of run {run.run_id} in '{owner}' name "
                f"{', '.join(unknown)}, which tool '{tool.name}' does not take (it takes "
                f"{', '.join(tool.args_model.model_fields)}); nothing was changed"
            )
        try:
            arguments = tool.validate(arguments)
        except ToolArgumentsError as exc:
            where = f"run {run.run_id} in '{owner}'"
            raise RunError(f"edits to the pending call of {where}: {exc}") from None
    return replace(call, arguments=arguments)


def cancel(
    compiled_chart: CompiledChart, run: Run, *, reason: str, now: float, by: str = ""
) -> Step:
    """End a run in `cancelled` from wherever it is."""
    if run.status == "ended":
        raise RunEndedError(f"run {run.run_id} already ended in '{run.state}'; cannot cancel")
    in_flight = run.state.endswith(".act")  # its head call may be running right now
    messages = tuple(
        Message(
            role="tool",
            tool_call_id=q.call.id,
            content=f"cancelled: {reason}; this call may have started"
            if i == 0 and in_flight
            else not_executed(f"cancelled: {reason}"),
        )
        for i, q in enumerate(run.pending)
    )
    step = commit(
        compiled_chart,
        run,
        compiled_chart.fired(run.state, CANCEL),
        now,
        ZERO,
        trigger=CANCEL,
        actor="human",
        reason=reason,
        messages=messages,
        update={"pending": ()},
        keep_open=in_flight,
        by=by or None,
    )
    ended = replace(step.run, reason=f"cancelled: {reason}")
    return replace(step, run=ended)
