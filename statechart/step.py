"""The pure transition function: what a state needs next, and what an outcome does to the run.

`plan()` reads the run and says which effect the driver must perform (call
the model, run a tool, run a handler) or decides a move that needs no I/O.
`advance()` folds the effect's outcome into the next run and one event.
Neither awaits, touches a clock or writes anywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .budget import ONE_STEP, ZERO, Spent, spent_of
from .chart import ESCALATED, Decision, State
from .machine import CompiledChart, Move, exhaust, go
from .models.base import Message, Reply, Request, ToolCall
from .moves import NOT_EXECUTED, checked_patch, commit, drop_queue, try_move, typed_context
from .prompt import NEXT_STATE, build_request, model_view
from .run import Actor, QueuedCall, Run, Step, evolve
from .tools import Tool, ToolArgumentsError, fingerprint, render_result

TOOL_STEP = Spent(steps=1, tool_calls=1)


@dataclass(frozen=True)
class CallModel:
    """Ask the model; the outcome is a `Reply` or the exception it raised."""

    request: Request


@dataclass(frozen=True)
class RunTool:
    """Run a validated tool call; the outcome is its return value or the exception."""

    call: ToolCall
    tool: Tool
    arguments: dict[str, Any]
    fingerprint: str
    key: str | None


@dataclass(frozen=True)
class RunHandler:
    """Run a code state's handler; the outcome is a `Decision`, a target, or the exception."""

    state: State
    context: BaseModel


@dataclass(frozen=True)
class Decide:
    """A move that needs no I/O: routing on exhaustion, a refusal, `next_state`, an approval ask."""

    what: str
    detail: str = ""


@dataclass(frozen=True)
class Wait:
    """Nothing to do until a human decides."""

    reason: str


@dataclass(frozen=True)
class Ended:
    """The run is over."""


Effect = CallModel | RunTool | RunHandler | Decide | Wait | Ended


@dataclass(frozen=True)
class Memory:
    """What the driver holds beside the run: this visit's transcript and executed fingerprints."""

    transcript: Sequence[Message] = ()
    fingerprints: frozenset[str] | set[str] = field(default_factory=frozenset)


# -- plan ---------------------------------------------------------------------------------


def plan(cc: CompiledChart, run: Run, memory: Memory) -> Effect:
    """The effect the run's current state needs next."""
    if run.status == "ended":
        return Ended()
    if run.status == "waiting":
        return Wait(run.reason)
    spent = _first_exhausted(cc, run, hard_only=True)
    if spent is not None:
        return Decide("exhaust", spent)
    effect = _plan_state(cc, run, memory)
    if isinstance(effect, (CallModel, RunTool)) or (
        isinstance(effect, Decide) and effect.what == "ask"
    ):
        spent = _first_exhausted(cc, run)
        if spent is not None:
            return Decide("exhaust", spent)
    return effect


def _plan_state(cc: CompiledChart, run: Run, memory: Memory) -> Effect:
    leaf = run.state
    if leaf.endswith(".think"):
        visit = run.visit
        assert visit is not None
        view = model_view(cc, visit.state)
        cap = view.state.max_iterations or 0
        if visit.iterations >= cap:
            return Decide("exhaust", f"{visit.state}:iterations")
        final = visit.iterations == cap - 1
        return CallModel(build_request(cc, run, memory.transcript, final=final))
    if leaf.endswith(".act"):
        return _plan_call(cc, run, memory)
    node = cc.nodes[leaf]
    state = node.state
    assert state is not None, leaf
    if state.kind == "code":
        assert state.handler is not None
        return RunHandler(state, typed_context(cc, leaf, run.context))
    return Wait(run.reason) if state.kind == "approval" else Ended()


def _first_exhausted(
    cc: CompiledChart, run: Run, hard_only: bool = False, leaf: str | None = None,
) -> str | None:
    """`level:kind` of the outermost spent level around `leaf` (only steps/wall if `hard_only`)."""
    ledger = run.ledger
    for level in cc.levels_of(leaf or run.state):
        spent = ledger.get(level.key, ZERO)
        for kind, cap in level.hard if hard_only else level.all:
            if spent_of(spent, kind) >= cap:
                return f"{level.key}:{kind}"
    return None


def _plan_call(cc: CompiledChart, run: Run, memory: Memory) -> Effect:
    assert run.visit is not None and run.pending
    queued = run.pending[0]
    call = queued.call
    view = model_view(cc, run.visit.state)
    state = view.state
    if call.name == NEXT_STATE:
        return Decide("next_state")
    final = run.visit.iterations >= (state.max_iterations or 0)
    tool = state.tool_map.get(call.name)
    if tool is None or final:
        offered = ", ".join(t.name for t in state.tools) or "none"
        why = (
            f"only {NEXT_STATE} is offered on the last call of state '{view.path}'"
            if tool is not None
            else f"tool '{call.name}' is not available in state '{view.path}' "
            f"(tools here: {offered}; or call {NEXT_STATE})"
        )
        return Decide("refuse", why)
    args = parse_arguments(call)
    if isinstance(args, str):
        return Decide("refuse", args)
    try:
        args = tool.validate(args)
    except ToolArgumentsError as exc:
        return Decide("refuse", str(exc))
    cap = state.max_calls.get(tool.name)
    done = run.visit.calls.get(tool.name, 0)
    if cap is not None and done >= cap:
        return Decide(
            "refuse",
            f"tool '{tool.name}' was already called {done} times in this visit of "
            f"'{view.path}' (max_calls={cap}); use what you have or call {NEXT_STATE}",
        )
    fp = fingerprint(tool.name, args)
    if fp in memory.fingerprints and not tool.repeatable:
        return Decide(
            "refuse",
            f"tool '{tool.name}' already ran with these arguments; its result is above. "
            "Do not repeat a call; change the arguments or move on",
        )
    if tool.needs_approval and queued.approved_by is None:
        return Decide("ask", f"tool '{tool.name}' needs approval in state '{view.path}'")
    key = idempotency_key(run, tool, fp) if tool.retry == "keyed" else None
    return RunTool(call, tool, args, fp, key)


def parse_arguments(call: ToolCall) -> dict[str, Any] | str:
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"arguments of '{call.name}' are not valid JSON ({exc.msg}); send a JSON object"
    if not isinstance(value, dict):
        return f"arguments of '{call.name}' must be a JSON object"
    return value


def idempotency_key(run: Run, tool: Tool, fp: str) -> str:
    """Lineage root + state path + fingerprint (+ occurrence for repeatable tools)."""
    assert run.visit is not None
    occurrence = ""
    if tool.repeatable:
        occurrence = f"|{run.visits.get(run.visit.state, 0)}.{run.visit.calls.get(tool.name, 0)}"
    raw = f"{run.lineage_root or run.run_id}|{run.visit.state}|{fp}{occurrence}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


# -- advance ------------------------------------------------------------------------------


def advance(
    cc: CompiledChart, run: Run, memory: Memory, effect: Effect, outcome: Any = None,
    *, now: float, wall_ms: int = 0,
) -> Step:
    """Fold the outcome of `effect` into the next run and its event."""
    wall = Spent(wall_ms=wall_ms) if wall_ms else ZERO
    if isinstance(effect, CallModel):
        return _after_model(cc, run, outcome, now, wall)
    if isinstance(effect, RunTool):
        return _after_tool(cc, run, effect, outcome, now, wall)
    if isinstance(effect, RunHandler):
        return _after_handler(cc, run, effect, outcome, now, wall)
    if isinstance(effect, Decide):
        if effect.what == "exhaust":
            return route_exhausted(cc, run, effect.detail, now, wall)
        if effect.what == "refuse":
            return _refuse_call(cc, run, effect.detail, now, wall)
        if effect.what == "next_state":
            return _next_state(cc, run, now, wall)
        if effect.what == "ask":
            return _ask(cc, run, effect.detail, now, wall)
    raise ValueError(f"no transition follows effect {effect!r}")


def _after_model(cc: CompiledChart, run: Run, outcome: Any, now: float, wall: Spent) -> Step:
    assert run.visit is not None
    visit = evolve(run.visit, {"iterations": run.visit.iterations + 1})
    if isinstance(outcome, BaseException):
        run = run.model_copy(update={"visit": visit})
        usage = ONE_STEP + Spent(model_calls=1) + wall
        reason = f"model call failed in state '{visit.state}': {outcome}"
        return _escalate(cc, run, reason, now, usage, actor="system", error=repr(outcome))
    reply: Reply = outcome
    u = reply.usage
    usage = Spent(
        steps=1, model_calls=1, tool_calls=0, input_tokens=u.input_tokens,
        output_tokens=u.output_tokens, cost_micros=u.cost_micros, wall_ms=wall.wall_ms,
    )
    said = Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls)
    if not reply.tool_calls:
        why = (
            f"your reply in state '{visit.state}' called no tool; every reply must call one "
            f"of the offered tools or {NEXT_STATE}"
        )
        nudge = Message(role="user", content=f"refused: {why}")
        return commit(cc, run, None, now, usage, trigger="reply", actor="model",
                      refused=why, result=why, delta=(said, nudge), update={"visit": visit})
    calls = [c for c in reply.tool_calls if c.name != NEXT_STATE]
    nexts = [c for c in reply.tool_calls if c.name == NEXT_STATE]
    queue = tuple(QueuedCall(call=c) for c in calls + nexts[:1])
    extra = tuple(Message(role="tool", tool_call_id=c.id, content=NOT_EXECUTED) for c in nexts[1:])
    t = cc.resolve(run.state, "propose")
    assert t is not None
    return commit(cc, run, cc.move(run.state, t), now, usage, trigger="propose", actor="model",
                  calls=reply.tool_calls, delta=(said, *extra),
                  update={"visit": visit, "pending": queue})


def _after_tool(
    cc: CompiledChart, run: Run, effect: RunTool, outcome: Any, now: float, wall: Spent
) -> Step:
    assert run.visit is not None
    tool = effect.tool
    error = None
    if isinstance(outcome, BaseException):
        error = f"{type(outcome).__name__}: {outcome}"
        text = f"error: tool '{tool.name}' failed: {error}"
    else:
        text = render_result(outcome, tool.output_cap)
    calls = dict(run.visit.calls)
    calls[tool.name] = calls.get(tool.name, 0) + 1
    visit = evolve(run.visit, {"calls": calls})
    pending = run.pending[1:]
    trigger = "next_call" if pending else "results"
    t = cc.resolve(run.state, trigger)
    assert t is not None
    usage = TOOL_STEP if wall is ZERO else TOOL_STEP + wall
    msg = Message(role="tool", tool_call_id=effect.call.id, content=text)
    ran = effect.fingerprint if error is None else None  # a failed call may be retried
    return commit(cc, run, cc.move(run.state, t), now, usage, trigger=trigger, actor="code",
                  call=effect.call, result=text, error=error, fingerprint=ran,
                  delta=(msg,), update={"visit": visit, "pending": pending})


def _refuse_call(cc: CompiledChart, run: Run, why: str, now: float, wall: Spent) -> Step:
    head = run.pending[0].call
    delta = drop_queue(run, f"refused: {why}")
    run = run.model_copy(update={"pending": ()})
    t = cc.resolve(run.state, "results")
    assert t is not None
    return commit(cc, run, cc.move(run.state, t), now, ONE_STEP + wall, trigger="refuse",
                   actor="model", call=head, refused=why, result=f"refused: {why}", delta=delta)


def _ask(cc: CompiledChart, run: Run, why: str, now: float, wall: Spent) -> Step:
    head = run.pending[0]
    delta = drop_queue(run, "", keep_head=True)
    run = run.model_copy(update={"pending": (head,), "reason": why})
    t = cc.resolve(run.state, "ask")
    assert t is not None
    return commit(cc, run, cc.move(run.state, t), now, ONE_STEP + wall, trigger="ask",
                   actor="system", call=head.call, reason=why, delta=delta)


def _next_state(cc: CompiledChart, run: Run, now: float, wall: Spent) -> Step:
    assert run.visit is not None
    call = run.pending[0].call
    view = model_view(cc, run.visit.state)
    args = parse_arguments(call)
    if isinstance(args, str):
        return _refuse_call(cc, run, args, now, wall)
    try:
        parsed = view.writes.model_validate(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        why = f"bad {NEXT_STATE} arguments in state '{view.path}': {problems}"
        return _refuse_call(cc, run, why, now, wall)
    values = parsed.model_dump(mode="json", exclude_unset=True)
    target = values.pop("target")
    values, problem = checked_patch(cc, view.path, run, values)
    if problem is not None:
        return _refuse_call(cc, run, problem, now, wall)
    prefix = cc.nodes[view.path].prefix
    move = try_move(cc, run, go(prefix + target), values)
    if isinstance(move, str):
        return _refuse_call(cc, run, move, now, wall)
    text = f"moved to '{target}'"
    msg = Message(role="tool", tool_call_id=call.id, content=text)
    return commit(cc, run, move, now, ONE_STEP if wall is ZERO else ONE_STEP + wall,
                  update={"pending": ()}, trigger=move.transition.trigger,
                  actor="model", call=call, patch=values, result=text, delta=(msg,))


def _after_handler(
    cc: CompiledChart, run: Run, effect: RunHandler, outcome: Any, now: float, wall: Spent
) -> Step:
    usage = ONE_STEP + wall
    here = run.state
    if isinstance(outcome, BaseException):
        why = f"handler of code state '{here}' raised {type(outcome).__name__}: {outcome}"
        return _escalate(cc, run, why, now, usage, actor="code", error=why)
    decision = Decision(outcome) if isinstance(outcome, str) else outcome
    if not isinstance(decision, Decision) or not isinstance(decision.target, str):
        why = (f"handler of code state '{here}' returned {outcome!r}; return a Decision or "
               "the name of a target state")
        return _escalate(cc, run, why, now, usage, actor="code", error=why)
    patch, problem = _validate_patch(cc, here, run, effect.state, dict(decision.patch))
    if problem is None:
        move = try_move(cc, run, go(cc.nodes[here].prefix + decision.target), patch)
        problem = move if isinstance(move, str) else None
    if problem is not None:
        return _escalate(cc, run, problem, now, usage, actor="code", refused=problem)
    assert isinstance(move, Move)
    return commit(cc, run, move, now, usage, trigger=move.transition.trigger, actor="code",
                   reason=decision.reason, patch=patch)


def _validate_patch(
    cc: CompiledChart, path: str, run: Run, state: State, patch: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    undeclared = sorted(set(patch) - set(state.writes))
    if undeclared:
        return {}, (f"code state '{path}' wrote {', '.join(undeclared)}, which it does not "
                    "declare in writes=")
    return checked_patch(cc, path, run, patch)


def route_exhausted(cc: CompiledChart, run: Run, which: str, now: float, wall: Spent) -> Step:
    """Route a run whose level ran out (`level:kind`) to that level's target; a free step."""
    level = which.rsplit(":", 1)[0]
    t = cc.resolve(run.state, exhaust(level))
    assert t is not None, (run.state, which)
    move = cc.move(run.state, t)
    reason = f"budget exhausted at {which or 'root'}; routed to '{move.leaf}'"
    again = _first_exhausted(cc, run, leaf=move.leaf) or _over_visits(cc, run, move)
    if again is not None and level:
        # The target is out of budget too; routing is free, so go to the root's target.
        t = cc.resolve(run.state, exhaust(""))
        assert t is not None
        move = cc.move(run.state, t)
        reason = (f"budget exhausted at {which}; its target is spent too ({again}); "
                  f"routed to '{move.leaf}'")
    delta = drop_queue(run, NOT_EXECUTED) if run.pending else ()
    return commit(cc, run, move, now, wall, trigger=t.trigger, actor="system", reason=reason,
                  exhausted=which, delta=delta, update={"pending": ()})


def _over_visits(cc: CompiledChart, run: Run, move: Move) -> str | None:
    for path in move.counted:
        state = cc.nodes[path].state
        cap = state.max_visits if state is not None else None
        if cap is not None and run.visits.get(path, 0) >= cap:
            return f"{path}:max_visits"
    return None


def _escalate(
    cc: CompiledChart, run: Run, why: str, now: float, usage: Spent, *, actor: Actor,
    error: str | None = None, refused: str | None = None,
) -> Step:
    delta = drop_queue(run, NOT_EXECUTED) if run.pending else ()
    here = cc.owner_state(run.state)[0]
    t = cc.resolve(run.state, go(cc.nodes[here].prefix + ESCALATED))
    assert t is not None
    run = run.model_copy(update={"pending": ()})
    return commit(cc, run, cc.move(run.state, t), now, usage, trigger=t.trigger, actor=actor,
                   reason=why, error=error, refused=refused, delta=delta)


# -- commit -------------------------------------------------------------------------------
