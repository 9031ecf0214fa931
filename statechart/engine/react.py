"""A model state's ReAct loop, compiled: the common steps of `think` and `act` in one place.

Most of a run's transitions are a model state's loop: `think` calls the model, its reply
queues calls (`propose`), `act` runs the head call (`results`, `next_call`). What those
steps need from the chart (their moves, the budget levels and caps around them, the
tools) is worked out once per model state (`Loop`); `plan_step` and `advance_step` then
make the common case directly and return None for every other (a cap reached, a strict
level, a call in doubt, an approval, `next_state`, a failed call, a reply without usage
...), which the general `plan_general` and `advance_general` take. They must agree:
`engine.transition.CHECKED` compares every compiled step with the general one (the test
suite turns it on) and `tests/engine/test_react.py` draws runs with hypothesis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from statechart.chart.chart import State
from statechart.chart.names import NEXT_STATE
from statechart.chart.tools import Tool, checked, outcome_class, parse_arguments, render_result
from statechart.engine.calls import idempotency_key, open_call, record_intent
from statechart.engine.effects import (
    TOOL_STEP,
    CallModel,
    Effect,
    Reconciled,
    RunTool,
    TakeNextState,
)
from statechart.engine.prompt import max_tokens, model_view
from statechart.engine.scopes import context_in
from statechart.engine.session import Session
from statechart.engine.tables import CompiledChart, Move
from statechart.records.messages import Message, Reply, Request, ToolSpec
from statechart.records.run import CheckedCall, Event, Intent, QueuedCall, Run, Step, Visit
from statechart.records.spent import ZERO, spent


@dataclass(frozen=True, eq=False)
class Loop:
    """What the steps of one model state's loop need, worked out when the chart compiles."""

    path: str
    state: State
    think: str
    act: str
    tools: dict[str, Tool]
    cap: int
    """`max_iterations`: model calls a visit may make."""
    propose: Move
    results: Move
    next_call: Move
    levels: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    """Every budget level around the state (path, its caps), outermost first."""
    paths: tuple[str, ...]
    """The same levels' paths: what a step charges."""
    tokens: bool
    """Some level caps output tokens or tokens: a request's `max_tokens` is lowered."""
    scope: str
    """Whose context the state reads."""
    tool_specs: tuple[ToolSpec, ...]
    """The state's tools and `next_state`, as offered to the model."""
    final_tools: tuple[ToolSpec, ...]
    """Only `next_state`: what the visit's last model call is offered."""


def loop_at(compiled_chart: CompiledChart, leaf: str) -> Loop | None:
    """The compiled loop of the model state whose `think` or `act` is `leaf` (None
    elsewhere, and for a state the general steps must always take)."""
    found = compiled_chart.react.get(leaf, _UNSET)
    if found is _UNSET:
        found = compiled_chart.react[leaf] = _compile(compiled_chart, leaf)
        if found is not None:  # one loop for both sub-states
            compiled_chart.react[found.think] = compiled_chart.react[found.act] = found
    return found  # type: ignore[no-any-return]


_UNSET = object()


def _compile(compiled_chart: CompiledChart, leaf: str) -> Loop | None:
    path, _, sub = leaf.rpartition(".")
    node = compiled_chart.nodes.get(path)
    if sub not in ("think", "act") or node is None or node.state is None:
        return None
    state = node.state
    if state.kind != "model":
        return None
    think, act = f"{path}.think", f"{path}.act"
    levels = compiled_chart.levels_of(think)
    if levels != compiled_chart.levels_of(act) or any(level.strict for level in levels):
        return None
    moves = (
        compiled_chart.fired(think, "propose"),
        compiled_chart.fired(act, "results"),
        compiled_chart.fired(act, "next_call"),
    )
    for move in moves:
        if (
            move.crosses
            or move.counted
            or move.visit is not None
            or move.clears_visit
            or move.status != "running"
            or move.transition.edge is not None
        ):
            return None
    view = model_view(compiled_chart, path)
    return Loop(
        path=path,
        state=state,
        think=think,
        act=act,
        tools=state.tool_map,
        cap=state.max_iterations or 0,
        propose=moves[0],
        results=moves[1],
        next_call=moves[2],
        levels=tuple((level.path, level.all) for level in levels),
        paths=tuple(level.path for level in levels),
        tokens=any(k in level.caps for level in levels for k in ("output_tokens", "tokens")),
        scope=node.scope,
        tool_specs=view.tools,
        final_tools=view.final_tools,
    )


# -- plan -----------------------------------------------------------------------------------


def plan_step(
    compiled_chart: CompiledChart, loop: Loop, run: Run, session: Session
) -> Effect | None:
    """The effect of the loop's common case (a model call, a tool call), or None."""
    visit = run.visit
    if run.status != "running" or run.breached or visit is None or visit.state != loop.path:
        return None
    ledger = run.ledger
    for path, caps in loop.levels:
        used = ledger.get(path, ZERO)
        for kind, cap in caps:
            if getattr(used, kind) >= cap:
                return None
    if run.state == loop.think:
        if visit.iterations >= loop.cap:
            return None
        state = loop.state
        shown = context_in(run, loop.scope)
        return CallModel(
            Request(
                state=loop.path,
                instructions=state.instructions,
                context={k: shown.get(k) for k in state.reads},
                transcript=tuple(session.transcript),
                tools=loop.final_tools if visit.iterations == loop.cap - 1 else loop.tool_specs,
                tool_choice="required",
                max_tokens=(
                    max_tokens(compiled_chart, run, state.max_tokens)
                    if loop.tokens
                    else state.max_tokens
                ),
            )
        )
    if not run.pending:
        return None
    queued = run.pending[0]
    call = queued.call
    if call.name == NEXT_STATE:
        return TakeNextState()
    tool = loop.tools.get(call.name)
    if tool is None or visit.iterations >= loop.cap or run.doubt is not None:
        return None
    if tool.needs_approval and queued.approved_by is None:
        return None
    found = session.checked_for(call) or checked(tool, call)
    if isinstance(found, str):
        return None
    most = loop.state.max_calls.get(tool.name)
    if most is not None and visit.calls.get(tool.name, 0) >= most:
        return None
    fingerprint = found.fingerprint
    if fingerprint in session.fingerprints and not tool.repeatable:
        return None
    args = parse_arguments(call)
    assert not isinstance(args, str)  # checked() parsed them
    key = queued.key or idempotency_key(run, tool, fingerprint)
    return RunTool(
        call=call,
        tool=tool,
        arguments=found.arguments,
        fingerprint=fingerprint,
        key=key,
        parsed=tool.parse(args),
        doubt=None,
    )


# -- advance --------------------------------------------------------------------------------


def advance_step(
    compiled_chart: CompiledChart,
    loop: Loop,
    run: Run,
    effect: Effect,
    outcome: Any,
    now: float,
    wall_ms: int,
    span: str | None = None,
) -> Step | None:
    """The step of the loop's common case (a reply that queues calls, a call that
    returned), or None; `span` is the id of the span tracing it, for its event."""
    if run.doubt is not None or run.attempt:
        return None
    if type(effect) is CallModel and run.state == loop.think:
        return _proposed(loop, run, effect, outcome, now, wall_ms, span)
    if type(effect) is RunTool and run.state == loop.act:
        return _returned(loop, run, effect, outcome, now, wall_ms, span)
    return None


def _proposed(
    loop: Loop,
    run: Run,
    effect: CallModel,
    reply: Any,
    now: float,
    wall_ms: int,
    span: str | None,
) -> Step | None:
    if effect.worst is not None or type(reply) is not Reply or run.pending:
        return None
    calls = reply.tool_calls
    u = reply.usage
    if not calls or u.missing or NEXT_STATE in [c.name for c in calls]:
        return None
    visit = run.visit
    assert visit is not None
    usage = spent(1, 1, 0, u.input_tokens, u.output_tokens, u.cost_micros, wall_ms)
    said = Message(role="assistant", content=reply.content, tool_calls=calls)
    queue = tuple([QueuedCall(call=c) for c in calls])
    seq = run.seq + 1
    move = loop.propose
    update = _moved(loop, run, move, usage, seq)
    update["visit"] = replace(visit, iterations=visit.iterations + 1)
    pending, opened, head = _head(loop, run, update["visit"], queue, seq)
    update["pending"] = pending
    event = _event(run, move, seq, now, "propose", "model", usage, opened, {"calls": calls}, span)
    return _step(replace(run, **update), event, (said,), opened, (), head)


def _returned(
    loop: Loop,
    run: Run,
    effect: RunTool,
    outcome: Any,
    now: float,
    wall_ms: int,
    span: str | None,
) -> Step | None:
    if (
        effect.doubt is not None
        or isinstance(outcome, (BaseException, Reconciled))
        or not run.pending
        or run.pending[0].call is not effect.call
    ):
        return None
    tool = effect.tool
    name = tool.name
    text = render_result(outcome, tool.output_cap)
    visit = run.visit
    assert visit is not None
    calls = dict(visit.calls)
    calls[name] = calls.get(name, 0) + 1
    counts = {
        "calls": calls,
        "succeeded": {**visit.succeeded, name: visit.succeeded.get(name, 0) + 1},
    }
    queue = run.pending[1:]
    trigger, move = ("next_call", loop.next_call) if queue else ("results", loop.results)
    usage = TOOL_STEP + spent(wall_ms=wall_ms) if wall_ms else TOOL_STEP
    seq = run.seq + 1
    update = _moved(loop, run, move, usage, seq)
    update["visit"] = after = replace(visit, **counts)
    pending, opened, head = (
        _head(loop, run, after, queue, seq) if trigger == "next_call" else (queue, None, None)
    )
    update["pending"] = pending
    was = open_call(run)
    closed = (
        (was.call.id,)
        if was is not None
        and (not pending or pending[0].call.id != was.call.id or opened is not None)
        else ()
    )
    ran = {
        "call": effect.call,
        "result": text,
        "error": None,
        "fingerprint": effect.fingerprint,
        "reason": "",
        "outcome": outcome_class(outcome),
    }
    event = _event(run, move, seq, now, trigger, "code", usage, opened, ran, span)
    message = Message(role="tool", content=text, tool_call_id=effect.call.id)
    return _step(replace(run, **update), event, (message,), opened, closed, head)


def _event(
    run: Run,
    move: Move,
    seq: int,
    now: float,
    trigger: str,
    actor: str,
    usage: Any,
    opened: Intent | None,
    fields: dict[str, Any],
    span: str | None,
) -> Event:
    """The event of a loop step that adds one message to the visit's transcript: `fields`
    with what every such step records (the same fields the general step sets)."""
    fields["entered"], fields["exited"] = move.entered, move.exited
    if span is not None:
        fields["span"] = span
    if opened is not None:
        fields["intent"], fields["key"] = opened.call.id, opened.key
    assert run.visit is not None
    fields.update(
        run_id=run.run_id,
        seq=seq,
        time=now,
        source=run.state,
        target=move.leaf,
        trigger=trigger,
        actor=actor,
        usage=usage,
        visit=run.visit.seq,
        delta=1,
    )
    return Event(**fields)


def _moved(loop: Loop, run: Run, move: Move, usage: Any, seq: int) -> dict[str, Any]:
    """The run fields a loop step changes besides its visit and queue."""
    ledger = run.ledger.copy()
    for path in loop.paths:
        ledger[path] = ledger.get(path, ZERO) + usage
    update: dict[str, Any] = {
        "seq": seq,
        "ledger": ledger,
        "state": move.leaf,
        "status": "running",
    }
    if run.routed:
        update["routed"] = 0
    if run.reason:
        update["reason"] = ""
    return update


def _head(
    loop: Loop, run: Run, visit: Visit, queue: tuple[QueuedCall, ...], seq: int
) -> tuple[tuple[QueuedCall, ...], Intent | None, CheckedCall | None]:
    """The queue with its head's idempotency key recorded, when the head can run: the
    intent that opens, and the call's checked arguments (`calls.record_intent`)."""
    recorded = record_intent(loop.tools, run, visit, run.visits, queue[0], seq) if queue else None
    if recorded is None:
        return queue, None, None
    keyed, opened, found = recorded
    return (keyed, *queue[1:]), opened, found


def _step(
    run: Run,
    event: Event,
    messages: tuple[Message, ...],
    opened: Intent | None,
    closed: tuple[str, ...],
    checked: CheckedCall | None,
) -> Step:
    return Step(
        run=run, event=event, messages=messages, opened=opened, closed=closed, checked=checked
    )
