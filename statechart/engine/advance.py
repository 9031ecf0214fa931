"""The pure transition function: what an effect's outcome does to the run, in every case.

`advance_general()` folds the outcome of the effect `plan()` chose into the next run and
one event (`transition.advance`, what the driver calls, compiles the common cases). It
never awaits, touches a clock or writes anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace
from pydantic import ValidationError

from statechart.chart.chart import Decision, State
from statechart.chart.names import NEXT_STATE
from statechart.chart.tools import outcome_class, parse_arguments, render_result
from statechart.engine.effects import (
    TOOL_STEP,
    Ask,
    CallModel,
    Effect,
    Escalate,
    Exhaust,
    Join,
    Reconciled,
    Refuse,
    RunHandler,
    RunTool,
    TakeNextState,
    queued_and_answered,
)
from statechart.engine.moves import checked_patch, commit, drop_queue, try_move
from statechart.engine.prompt import model_view
from statechart.engine.routing import escalate, route_exhausted
from statechart.engine.strict import Worst, breach, breached, strict_levels
from statechart.engine.tables import CompiledChart, Move
from statechart.engine.timers import retry_later
from statechart.errors import CallTimeoutError, validation_problems
from statechart.records.messages import Message, Reply
from statechart.records.run import QueuedCall, Run, Step
from statechart.records.spent import ONE_STEP, ZERO, Spent, spent


def advance_general(
    compiled_chart: CompiledChart,
    run: Run,
    effect: Effect,
    outcome: Any = None,
    *,
    now: float,
    wall_ms: int = 0,
) -> Step:
    """Fold the outcome of `effect` into the next run and its event, in every case
    (`transition.advance` takes a model state's common steps compiled)."""
    wall = Spent(wall_ms=wall_ms) if wall_ms else ZERO
    if isinstance(effect, CallModel):
        return _after_model(compiled_chart, run, outcome, now, wall, effect.worst)
    if isinstance(effect, RunTool):
        return _after_tool(compiled_chart, run, effect, outcome, now, wall)
    if isinstance(effect, RunHandler):
        return _after_handler(compiled_chart, run, effect, outcome, now, wall)
    if isinstance(effect, Exhaust):
        return route_exhausted(compiled_chart, run, effect.which, now, wall)
    if isinstance(effect, Refuse):
        return _refuse_call(compiled_chart, run, effect.reason, now, wall)
    if isinstance(effect, TakeNextState):
        return _next_state(compiled_chart, run, now, wall)
    if isinstance(effect, Ask):
        return _ask(compiled_chart, run, effect.reason, now, wall)
    if isinstance(effect, Join):
        return commit(
            compiled_chart,
            run,
            compiled_chart.fired(run.state, effect.trigger),
            now,
            wall,
            trigger=effect.trigger,
            actor="system",
            reason=effect.reason,
        )
    if isinstance(effect, Escalate):
        return escalate(
            compiled_chart,
            run,
            effect.reason,
            now,
            ONE_STEP + wall,
            actor="system",
            error=f"InvalidContext: {effect.reason}",
        )
    raise ValueError(f"no transition follows effect {effect!r}")


def _after_model(
    compiled_chart: CompiledChart,
    run: Run,
    outcome: Any,
    now: float,
    wall: Spent,
    worst: Worst | None = None,
) -> Step:
    assert run.visit is not None
    visit = replace(run.visit, iterations=run.visit.iterations + 1)
    if isinstance(outcome, BaseException):
        usage = ONE_STEP + Spent(model_calls=1) + wall
        state = compiled_chart.nodes[visit.state].state
        assert state is not None
        what = f"the model call in state '{visit.state}'"
        later = retry_later(
            compiled_chart,
            run,
            state.retries,
            outcome,
            now,
            usage,
            actor="system",
            what=what,
            visit=visit,
        )
        if later is not None:
            return later
        run = replace(run, visit=visit)
        reason = f"model call failed in state '{visit.state}': {outcome}"
        return escalate(
            compiled_chart,
            run,
            reason,
            now,
            usage,
            actor="system",
            error=f"{type(outcome).__name__}: {outcome}",
            timeout=_cut_at(outcome),
        )
    reply: Reply = outcome
    u = reply.usage
    usage = spent(1, 1, 0, u.input_tokens, u.output_tokens, u.cost_micros, wall.wall_ms)
    said = Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls)
    marks: dict[str, Any] = {"usage_missing": True} if u.missing else {}
    update: dict[str, Any] = {"visit": visit}
    over = breach(worst, u) if worst is not None else None
    if worst is not None and over is not None:
        update["breached"] = breached(compiled_chart, run, run.state, over)
        level = strict_levels(compiled_chart, run.state)[0].path
        marks["breach"] = f"{level}:{over}"
        marks["reason"] = (
            f"the reply used {u.input_tokens} input and {u.output_tokens} output tokens "
            f"({u.cost_micros} micro-dollars), more than the worst case of its strict caps "
            f"({worst.input_tokens} estimated input, max_tokens {worst.max_tokens}); "
            f"level '{level}' is spent"
        )
    if not reply.tool_calls:
        why = (
            f"your reply in state '{visit.state}' called no tool; every reply must call one "
            f"of the offered tools or {NEXT_STATE}"
        )
        nudge = Message(role="user", content=f"refused: {why}")
        return commit(
            compiled_chart,
            run,
            None,
            now,
            usage,
            trigger="reply",
            actor="model",
            refused=why,
            result=why,
            messages=(said, nudge),
            update=update,
            **marks,
        )
    view = model_view(compiled_chart, visit.state)
    queued, answered = queued_and_answered(
        view.state, view.path, visit.iterations, reply.tool_calls
    )
    queue = tuple(QueuedCall(call=c) for c in queued)
    extra = tuple(_said(c.id, t) for c, t in answered)
    return commit(
        compiled_chart,
        run,
        compiled_chart.fired(run.state, "propose"),
        now,
        usage,
        trigger="propose",
        actor="model",
        calls=reply.tool_calls,
        messages=(said, *extra),
        update={**update, "pending": queue},
        **marks,
    )


def _cut_at(outcome: BaseException) -> float | None:
    """The limit that cut the call off, when a limit did."""
    return outcome.seconds if isinstance(outcome, CallTimeoutError) else None


def _after_tool(
    compiled_chart: CompiledChart, run: Run, effect: RunTool, outcome: Any, now: float, wall: Spent
) -> Step:
    assert run.visit is not None
    tool = effect.tool
    if isinstance(outcome, Reconciled) and outcome.failed is not None:
        exc = outcome.failed
        return _ask(
            compiled_chart,
            run,
            (
                f"the reconcile hook of tool '{tool.name}' raised {type(exc).__name__}: {exc}; the "
                "call may have run: check its effect outside, then approve to run it again or "
                "reject to skip it"
            ),
            now,
            wall,
        )
    error = None
    reason = ""
    if effect.doubt is not None:
        reason = f"settled an interrupted call (retry='{effect.doubt}'): " + (
            "the reconcile hook reported that it had run"
            if isinstance(outcome, Reconciled)
            else "it ran again" + (" under its recorded key" if effect.doubt == "keyed" else "")
        )
    if isinstance(outcome, Reconciled):
        outcome = outcome.value
    calls = dict(run.visit.calls)
    calls[tool.name] = calls.get(tool.name, 0) + 1
    if isinstance(outcome, BaseException):
        cut = isinstance(outcome, CallTimeoutError) and tool.retry in ("never", "reconcile")
        later = retry_later(
            compiled_chart,
            run,
            None if cut else tool.retries,  # a cut call may still run on: never twice
            outcome,
            now,
            TOOL_STEP if wall is ZERO else TOOL_STEP + wall,
            actor="code",
            what=f"tool '{tool.name}'",
            call=effect.call,
            visit=replace(run.visit, calls=calls),
        )
        if later is not None:
            return later
        error = f"{type(outcome).__name__}: {outcome}"
        text = f"error: tool '{tool.name}' failed: {error}"
    else:
        text = render_result(outcome, tool.output_cap)
    counts: dict[str, Any] = {"calls": calls}
    if error is None:
        counts["succeeded"] = {
            **run.visit.succeeded,
            tool.name: run.visit.succeeded.get(tool.name, 0) + 1,
        }
    visit = replace(run.visit, **counts)
    pending = run.pending[1:]
    trigger = "next_call" if pending else "results"
    usage = TOOL_STEP if wall is ZERO else TOOL_STEP + wall
    msg = _said(effect.call.id, text)
    ran = effect.fingerprint if error is None else None  # a failed call may be retried
    return commit(
        compiled_chart,
        run,
        compiled_chart.fired(run.state, trigger),
        now,
        usage,
        trigger=trigger,
        actor="code",
        call=effect.call,
        result=text,
        error=error,
        fingerprint=ran,
        reason=reason,
        outcome=outcome_class(outcome) if error is None else None,
        messages=(msg,),
        update={"visit": visit, "pending": pending},
        timeout=outcome.seconds if isinstance(outcome, CallTimeoutError) else None,
    )


def _refuse_call(
    compiled_chart: CompiledChart, run: Run, why: str, now: float, wall: Spent
) -> Step:
    head = run.pending[0].call
    messages = drop_queue(run, f"refused: {why}")
    return commit(
        compiled_chart,
        run,
        compiled_chart.fired(run.state, "results"),
        now,
        ONE_STEP + wall,
        trigger="refuse",
        actor="model",
        call=head,
        refused=why,
        result=f"refused: {why}",
        messages=messages,
        update={"pending": ()},
    )


def _ask(compiled_chart: CompiledChart, run: Run, why: str, now: float, wall: Spent) -> Step:
    head = run.pending[0]
    messages = drop_queue(run, "", keep_head=True)
    run = replace(run, pending=(head,), reason=why)
    return commit(
        compiled_chart,
        run,
        compiled_chart.fired(run.state, "ask"),
        now,
        ONE_STEP + wall,
        trigger="ask",
        actor="system",
        call=head.call,
        reason=why,
        messages=messages,
    )


def _next_state(compiled_chart: CompiledChart, run: Run, now: float, wall: Spent) -> Step:
    assert run.visit is not None
    call = run.pending[0].call
    view = model_view(compiled_chart, run.visit.state)
    args = parse_arguments(call)
    if isinstance(args, str):
        return _refuse_call(compiled_chart, run, args, now, wall)
    try:
        parsed = view.writes.model_validate(args)
    except ValidationError as exc:
        problems = validation_problems(exc)
        why = f"bad {NEXT_STATE} arguments in state '{view.path}': {problems}"
        return _refuse_call(compiled_chart, run, why, now, wall)
    values = parsed.model_dump(mode="json", exclude_unset=True)
    target = values.pop("target")
    values, problem = checked_patch(compiled_chart, view.path, run, values)
    if problem is not None:
        return _refuse_call(compiled_chart, run, problem, now, wall)
    prefix = compiled_chart.nodes[view.path].prefix
    move = try_move(compiled_chart, run, prefix + target, values)
    if isinstance(move, str):
        return _refuse_call(compiled_chart, run, move, now, wall)
    text = f"moved to '{target}'"
    msg = _said(call.id, text)
    return commit(
        compiled_chart,
        run,
        move,
        now,
        ONE_STEP if wall is ZERO else ONE_STEP + wall,
        update={"pending": ()},
        trigger=move.transition.trigger,
        actor="model",
        call=call,
        patch=values,
        result=text,
        messages=(msg,),
    )


def _after_handler(
    compiled_chart: CompiledChart,
    run: Run,
    effect: RunHandler,
    outcome: Any,
    now: float,
    wall: Spent,
) -> Step:
    usage = ONE_STEP + wall
    here = run.state
    if isinstance(outcome, BaseException):
        error = f"{type(outcome).__name__}: {outcome}"
        why = f"handler of code state '{here}' raised {error}"
        return escalate(
            compiled_chart,
            run,
            why,
            now,
            usage,
            actor="code",
            error=error,
            timeout=_cut_at(outcome),
        )
    decision = Decision(outcome) if isinstance(outcome, str) else outcome
    if not (
        isinstance(decision, Decision)
        and isinstance(decision.target, str)
        and isinstance(decision.reason, str)
        and isinstance(decision.patch, Mapping)
    ):
        why = (
            f"handler of code state '{here}' returned {outcome!r}; return a Decision or "
            "the name of a target state"
        )
        return escalate(
            compiled_chart, run, why, now, usage, actor="code", error=f"InvalidDecision: {why}"
        )
    patch, problem = _validate_patch(compiled_chart, here, run, effect.state, dict(decision.patch))
    if problem is None:
        move = try_move(
            compiled_chart, run, compiled_chart.nodes[here].prefix + decision.target, patch
        )
        problem = move if isinstance(move, str) else None
    if problem is not None:
        return escalate(compiled_chart, run, problem, now, usage, actor="code", refused=problem)
    assert isinstance(move, Move)
    return commit(
        compiled_chart,
        run,
        move,
        now,
        usage,
        trigger=move.transition.trigger,
        actor="code",
        reason=decision.reason,
        patch=patch,
    )


def _validate_patch(
    compiled_chart: CompiledChart, path: str, run: Run, state: State, patch: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    undeclared = sorted(set(patch) - set(state.writes))
    if undeclared:
        return {}, (
            f"code state '{path}' wrote {', '.join(undeclared)}, which it does not "
            "declare in writes="
        )
    return checked_patch(compiled_chart, path, run, patch)


def _said(call_id: str, text: str) -> Message:
    """The `tool` message answering call `call_id` with `text`."""
    return Message(role="tool", content=text, tool_call_id=call_id)
