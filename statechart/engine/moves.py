"""Moves between states: legality, guards, caps, and committing a move into the next run.

Pure functions over the compiled chart and the run record; `step.py` and
`human.py` call them to turn a decided move into one event.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from msgspec import structs
from pydantic import BaseModel, ValidationError

from statechart.chart.chart import Facts
from statechart.engine.calls import doubt_after, track
from statechart.engine.history import applied
from statechart.engine.reasons import NOT_EXECUTED
from statechart.engine.regions import closing, fanned, moved, widened
from statechart.engine.scopes import context_at, crossed, crossing, patched, ported_on, typed
from statechart.engine.tables import CompiledChart, Move, Transition, go
from statechart.errors import PortError, validation_problems
from statechart.records.messages import Message
from statechart.records.run import Actor, Event, Run, Step, Visit
from statechart.records.spent import Spent


def drop_queue(run: Run, head_text: str, keep_head: bool = False) -> tuple[Message, ...]:
    """Results for the queued calls that will not run now (the head gets `head_text`)."""
    out = []
    for i, q in enumerate(run.pending):
        if i == 0 and keep_head:
            continue
        out.append(
            Message(
                role="tool", tool_call_id=q.call.id, content=head_text if i == 0 else NOT_EXECUTED
            )
        )
    return tuple(out)


def try_move(
    compiled_chart: CompiledChart,
    run: Run,
    target: str,
    patch: dict[str, Any],
    *,
    timed: bool = False,
) -> Move | str:
    """The move to the state at path `target` from the run's state, or why it is refused;
    `timed`: an `after=` edge's timer fired (only then may such an edge be taken)."""
    t = compiled_chart.resolve(run.state, go(target))
    here = compiled_chart.owner_state(run.state)[0]
    if t is None:
        legal = ", ".join(sorted(_targets(compiled_chart, run.state))) or "none"
        return f"'{here}' has no edge to '{target}'; legal targets: {legal}"
    edge = t.edge
    if edge is not None and edge.after is not None and not timed:
        return (
            f"edge {t.counter} is taken only when its timer fires (after {edge.after:g} s); "
            "choose another target"
        )
    if edge is not None and edge.max_traversals is not None:
        taken = run.traversals.get(t.counter, 0)
        if taken >= edge.max_traversals:
            return (
                f"edge {t.counter} was already taken {taken} time(s) "
                f"(max_traversals={edge.max_traversals}); choose another target"
            )
    if edge is not None and edge.guard is not None:
        refusal = check_guard(compiled_chart, run, t, patch)
        if refusal is not None:
            return refusal
    move = compiled_chart.move(run.state, t, run.history)
    if run.regions:
        move = widened(compiled_chart, run, move)
    for path in move.entered:
        state = compiled_chart.nodes[path].state
        if state is not None and state.max_visits is not None:
            seen = run.visits.get(path, 0)
            if seen >= state.max_visits:
                return (
                    f"state '{path}' was already visited {seen} time(s) "
                    f"(max_visits={state.max_visits}); choose another target"
                )
    if move.crosses:
        after = patched(run, compiled_chart.nodes[run.state].scope, patch)
        try:
            ports = crossing(
                compiled_chart,
                after.get("context", run.context),
                after.get("contexts", run.contexts),
                move,
            )
        except PortError as exc:
            return str(exc)
        return fanned(compiled_chart, replace(move, ports=ports), ports[1])
    return move


def _targets(compiled_chart: CompiledChart, leaf: str) -> list[str]:
    here = compiled_chart.owner_state(leaf)[0]
    prefix = compiled_chart.nodes[here].prefix
    return [
        t.dest.removeprefix(prefix)
        for t in compiled_chart.table.get(here, {}).values()
        if t.named and (t.edge is None or t.edge.after is None)
    ]


def check_guard(
    compiled_chart: CompiledChart, run: Run, t: Transition, patch: dict[str, Any]
) -> str | None:
    """Why the guard of `t`'s edge refuses the move with `patch` applied, or None."""
    assert t.edge is not None and t.edge.guard is not None
    try:
        context = typed_context(
            compiled_chart, t.source, {**context_at(compiled_chart, run, t.source), **patch}
        )
    except ValidationError as exc:
        return f"the move to '{t.dest}' would leave an invalid context: {validation_problems(exc)}"
    facts = Facts(context=context, run=run, source=t.source, target=t.dest)
    try:
        verdict = t.edge.guard(facts)
    except Exception as exc:
        return f"guard of edge {t.counter} raised {type(exc).__name__}: {exc}"
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return f"guard of edge {t.counter} refused the move"
    return f"edge {t.counter} refused: {verdict}"


def typed_context(compiled_chart: CompiledChart, path: str, context: dict[str, Any]) -> BaseModel:
    """The context as the (validated) type of the chart that `path` belongs to."""
    return typed(compiled_chart.nodes[path].chart.context, context)


def checked_patch(
    compiled_chart: CompiledChart, path: str, run: Run, patch: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """`patch` as JSON values once the patched context passes its type's validation."""
    if not patch:
        return {}, None
    node = compiled_chart.nodes[path]
    context = {**context_at(compiled_chart, run, path), **patch}
    try:
        merged = typed_context(compiled_chart, path, context)
        shared = compiled_chart.scopes[node.scope]
        if node.chart.context is not shared:  # a sub-chart sharing a wider context: it too
            shared.model_validate(context)
    except ValidationError as exc:
        return {}, f"invalid values written in '{path}': {validation_problems(exc)}"
    return merged.model_dump(mode="json", include=set(patch)), None


def commit(
    compiled_chart: CompiledChart,
    run: Run,
    move: Move | None,
    now: float,
    usage: Spent,
    *,
    trigger: str,
    actor: Actor,
    messages: tuple[Message, ...] = (),
    update: dict[str, Any] | None = None,
    keep_open: bool = False,
    before: Run | None = None,
    **fields: Any,
) -> Step:
    """The next run and its event: charge the ledger, count visits, apply the patch,
    and record the intent of the call this step leaves next to run. `before` is the run
    as it was, when the caller already emptied its queue (its open intent closes)."""
    seq = run.seq + 1
    update = {**update, "seq": seq} if update else {"seq": seq}
    leaving: tuple[str, ...] = ()
    if move is not None and run.regions:
        move = widened(compiled_chart, run, move)
        if run.state in move.exited:
            leaving = closing(run)
    if run.routed and usage.steps:
        update["routed"] = 0
    if run.attempt and trigger != "retry" and (usage.model_calls or usage.tool_calls or move):
        update["attempt"] = 0  # the call tried again has ended: it returned, or moved on
    if move is not None and move.remembered:
        update["history"] = applied(run.history, move.remembered)
        fields["remembered"] = move.remembered
    if not usage.is_zero():
        update["ledger"] = compiled_chart.charged(run.ledger, run.state, usage)
    patch = fields.get("patch")
    if patch:
        scope = compiled_chart.nodes[run.state].scope
        update.update(patched(run, scope, patch))
        if scope:
            fields["scope"] = scope
    visit_key = run.visit.seq if run.visit is not None else None
    if move is not None:
        if move.crosses:
            move = fanned(compiled_chart, move, _cross(compiled_chart, run, move, update, fields))
        if run.wake is not None or run.timers or compiled_chart.timers:  # (after fanning)
            update.update(compiled_chart.rearmed(run.timers, move.exited, move.entered, now))
        _entering(run, move, seq, update)
        if move.regions or run.regions:
            moved(compiled_chart, run, move.leaf, move.regions, seq, update)
        fields["entered"], fields["exited"] = move.entered, move.exited
        if move.transition.edge is not None:
            fields["edge"] = move.transition.counter
    if run.doubt is not None and "doubt" not in update:
        handled = fields.get("call")
        update["doubt"] = doubt_after(
            run.doubt,
            handled.id if handled is not None else None,
            update.get("pending", run.pending),
        )
    opened, closed, head_checked = track(
        compiled_chart, before or run, run, update, seq, keep_open=keep_open
    )
    if opened is not None:
        fields["intent"], fields["key"] = opened.call.id, opened.key
    if leaving:
        closed = (*closed, *leaving)
    fields["run_id"] = run.run_id
    fields["seq"] = seq
    fields["time"] = now
    fields["source"] = run.state
    fields["target"] = move.leaf if move is not None else run.state
    fields["trigger"] = trigger
    fields["actor"] = actor
    fields["usage"] = usage
    fields["visit"] = visit_key if messages else None
    fields["delta"] = len(messages)
    return Step(
        structs.replace(run, **update),
        Event(**fields),
        messages,
        opened,
        closed,
        checked=head_checked,
    )


def _cross(
    compiled_chart: CompiledChart,
    run: Run,
    move: Move,
    update: dict[str, Any],
    fields: dict[str, Any],
) -> dict[str, Any]:
    """Hand contexts across the ported sub-chart borders `move` crosses, into `update`, and
    record what crossed in the event `fields`; the contexts it starts. A mapping that fails
    is recorded as the event's error: its output is not written; a sub-chart it enters
    starts empty (a map state's instances do not start)."""
    context = update.get("context", run.context)
    contexts = update.get("contexts", run.contexts)
    try:
        outputs, inputs = move.ports or crossing(compiled_chart, context, contexts, move)
    except PortError as exc:
        fields["error"] = "; ".join(x for x in (fields.get("error"), f"PortError: {exc}") if x)
        outputs = {}
        inputs = {
            p: {}
            for p in ported_on(compiled_chart, move.entered)
            if p not in compiled_chart.maps and p.rsplit(".", 1)[0] not in compiled_chart.maps
        }
    context, contexts = crossed(compiled_chart, context, contexts, move.exited, outputs, inputs)
    update["context"], update["contexts"] = context, contexts
    if outputs:
        fields["outputs"] = outputs
    if inputs:
        fields["inputs"] = inputs
    return inputs


def _entering(run: Run, move: Move, seq: int, out: dict[str, Any]) -> None:
    """What entering `move`'s leaf changes in the run, written into `out`."""
    out["state"] = move.leaf
    out["status"] = move.status
    t = move.transition
    if t.edge is not None and t.edge.max_traversals is not None:
        out["traversals"] = {**run.traversals, t.counter: run.traversals.get(t.counter, 0) + 1}
    if move.counted:
        visits = dict(run.visits)
        for p in move.counted:
            visits[p] = visits.get(p, 0) + 1
        out["visits"] = visits
    if move.visit is not None:
        out["visit"] = Visit(state=move.visit, seq=seq)
    elif move.clears_visit:
        out["visit"] = None
    if move.status == "waiting":
        out["reason"] = run.reason or move.reason
    elif move.status == "ended":
        out["reason"] = move.reason
    elif run.reason:
        out["reason"] = ""
