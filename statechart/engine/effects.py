"""What a state needs next: the effects the driver performs, and `plan_general()` that picks
one in every case (`transition.plan`, what the driver calls, compiles the common ones).

`plan_general()` reads the run and says which effect the driver must perform (call
the model, run a tool, run a handler) or decides a move that needs no I/O.
It never awaits, touches a clock or writes anywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from msgspec import Struct
from pydantic import BaseModel, ValidationError

from statechart.chart.chart import State
from statechart.chart.names import NEXT_STATE
from statechart.chart.tools import Tool, checked, parse_arguments
from statechart.engine.calls import idempotency_key
from statechart.engine.moves import typed_context
from statechart.engine.prompt import build_request, model_view
from statechart.engine.reasons import NEXT_STATE_TOO_SOON, NOT_EXECUTED, not_executed
from statechart.engine.regions import joined
from statechart.engine.scopes import context_at
from statechart.engine.session import Session
from statechart.engine.strict import Worst, fit
from statechart.engine.tables import CompiledChart
from statechart.records.messages import Request, ToolCall
from statechart.records.run import Run, Visit
from statechart.records.spent import ZERO, Spent, spent_of

TOOL_STEP = Spent(steps=1, tool_calls=1)


class CallModel(Struct, frozen=True, gc=False):
    """Ask the model; the outcome is a `Reply` or the exception it raised."""

    request: Request
    worst: Worst | None = None
    """Under strict caps: the most the call may use (more is a breach)."""


class RunTool(Struct, frozen=True, gc=False):
    """Run a validated tool call; the outcome is its return value or the exception."""

    call: ToolCall
    tool: Tool
    arguments: dict[str, Any]
    """The validated arguments as JSON values (fingerprinted, stored)."""
    fingerprint: str
    key: str | None
    parsed: BaseModel
    """The same arguments, typed: what the tool is called with."""
    doubt: str | None = None
    """Set when a killed driver may have started this call: the retry policy settling it."""


class Reconciled(Struct, frozen=True):
    """A reconcile hook's report that an interrupted call had in fact run, with its result
    (or the exception the hook raised, when it could not tell)."""

    value: Any
    failed: BaseException | None = None


class RunHandler(Struct, frozen=True):
    """Run a code state's handler; the outcome is a `Decision`, a target, or the exception."""

    state: State
    context: BaseModel
    path: str = ""
    """The code state's path (`review`, `explore.check`)."""


class Exhaust(Struct, frozen=True):
    """Route the run: the budget or cap `which` (`level:kind`) is spent."""

    which: str


class Refuse(Struct, frozen=True):
    """Refuse the queued call at the head; `reason` goes back to the model."""

    reason: str


class TakeNextState(Struct, frozen=True):
    """Take the `next_state` call at the head of the queue (its move, guard and writes)."""


class Ask(Struct, frozen=True):
    """Wait for a human to approve or reject the call at the head of the queue."""

    reason: str


class Escalate(Struct, frozen=True):
    """Escalate: the run cannot go on here (`reason` says why)."""

    reason: str


class Join(Struct, frozen=True):
    """Leave the parallel state the run is in: its regions joined (`trigger` is `join`)
    or one failed (`region_failed`); `reason` says which."""

    trigger: str
    reason: str


class Regions(Struct, frozen=True):
    """The run is in a parallel state whose regions have steps to make: the driver steps
    each region (`engine.regions`), concurrently."""


Decide = Exhaust | Refuse | TakeNextState | Ask | Escalate | Join
"""A move that needs no I/O."""


class Wait(Struct, frozen=True):
    """Nothing to do until a human decides."""

    reason: str


class Ended(Struct, frozen=True):
    """The run is over."""


class Sleep(Struct, frozen=True):
    """Nothing to do until `until` (epoch seconds): a failed call's next attempt is due
    then. The driver waits (or leaves the run `sleeping`), then records its waking."""

    until: float


Effect = CallModel | RunTool | RunHandler | Decide | Wait | Ended | Sleep | Regions


# -- plan ---------------------------------------------------------------------------------


def plan_general(compiled_chart: CompiledChart, run: Run, session: Session) -> Effect:
    """The effect the run's current state needs next, in every case (`transition.plan`
    takes a model state's common steps compiled)."""
    if run.status == "ended":
        return Ended()
    if run.status == "waiting":
        return Wait(run.reason)
    if run.status == "sleeping":
        return Sleep(run.wake or 0.0)
    spent = first_exhausted(compiled_chart, run, hard_only=True)
    if spent is not None:
        return Exhaust(spent)
    effect = _plan_state(compiled_chart, run, session)
    if isinstance(effect, (CallModel, RunTool, Ask, Regions)):
        spent = first_exhausted(compiled_chart, run)
        if spent is not None:
            return Exhaust(spent)
    if isinstance(effect, CallModel):  # only once no level around is spent (outermost first)
        fitted = fit(compiled_chart, run, effect.request, session.price)
        return Exhaust(fitted) if isinstance(fitted, str) else CallModel(*fitted)
    return effect


def _plan_state(compiled_chart: CompiledChart, run: Run, session: Session) -> Effect:
    leaf = run.state
    if leaf.endswith(".think"):
        visit = run.visit
        assert visit is not None
        view = model_view(compiled_chart, visit.state)
        cap = view.state.max_iterations or 0
        if visit.iterations >= cap:
            return Exhaust(f"{visit.state}:iterations")
        final = visit.iterations == cap - 1
        return CallModel(build_request(compiled_chart, run, session.transcript, final=final))
    if leaf.endswith(".act"):
        return _plan_call(compiled_chart, run, session)
    node = compiled_chart.nodes[leaf]
    state = node.state
    assert state is not None, leaf
    if state.kind in ("parallel", "map"):
        found = joined(compiled_chart, leaf, run.regions)
        return Join(*found) if found is not None else Regions()
    if state.kind == "code":
        assert state.handler is not None
        try:
            context = typed_context(compiled_chart, leaf, context_at(compiled_chart, run, leaf))
        except ValidationError as exc:
            return Escalate(f"the context does not fit code state '{leaf}': {exc}")
        return RunHandler(state, context, leaf)
    return Wait(run.reason) if state.kind == "approval" else Ended()


def first_exhausted(
    compiled_chart: CompiledChart,
    run: Run,
    hard_only: bool = False,
    leaf: str | None = None,
) -> str | None:
    """`level:kind` of the outermost spent level around `leaf` (only steps/wall if `hard_only`)."""
    ledger = run.ledger
    for level in compiled_chart.levels_of(leaf or run.state):
        spent = ledger.get(level.path, ZERO)
        for kind, cap in level.hard if hard_only else level.all:
            if spent_of(spent, kind) >= cap:
                return f"{level.path}:{kind}"
        if run.breached and not hard_only and level.path in run.breached:
            return f"{level.path}:{run.breached[level.path]}"
    return None


def last_call(state: State, iterations: int) -> bool:
    """After `iterations` model calls in a visit, a call is the last: it offers only
    `next_state` (`max_iterations` is a true cap)."""
    return iterations >= (state.max_iterations or 0)


def queued_and_answered(
    state: State, path: str, iterations: int, tool_calls: Sequence[ToolCall]
) -> tuple[tuple[ToolCall, ...], tuple[tuple[ToolCall, str], ...]]:
    """What a reply queues (its tool calls in order, or its `next_state`) and the calls
    answered at once instead, with their results: a `next_state` that came with other
    calls (the model must read their results before it leaves) and extra ones. The last
    reply of a visit was offered only `next_state`, so there its stray calls are answered
    and its `next_state` is taken. `iterations` counts this reply."""
    calls = tuple(c for c in tool_calls if c.name != NEXT_STATE)
    nexts = tuple(c for c in tool_calls if c.name == NEXT_STATE)
    if not nexts:
        return calls, ()
    extra = tuple((c, NOT_EXECUTED) for c in nexts[1:])
    if last_call(state, iterations):
        stray = not_executed(f"only {NEXT_STATE} is offered on the last call of state '{path}'")
        return nexts[:1], (*((c, stray) for c in calls), *extra)
    if calls:
        return calls, (*((c, NEXT_STATE_TOO_SOON) for c in nexts[:1]), *extra)
    return nexts[:1], extra


def calls_cap_refusal(state: State, path: str, visit: Visit, tool: Tool) -> str | None:
    """Why one more call of `tool` in this visit passes its `max_calls`, or None."""
    cap = state.max_calls.get(tool.name)
    done = visit.calls.get(tool.name, 0)
    if cap is None or done < cap:
        return None
    return (
        f"tool '{tool.name}' was already called {done} times in this visit of "
        f"'{path}' (max_calls={cap}); use what you have or call {NEXT_STATE}"
    )


def repeat_refusal(tool: Tool, call_fingerprint: str, seen: Collection[str]) -> str | None:
    """Why a call whose fingerprint already ran is refused (unless repeatable), or None."""
    if call_fingerprint not in seen or tool.repeatable:
        return None
    return (
        f"tool '{tool.name}' already ran with these arguments; its result is above. "
        "Do not repeat a call; change the arguments or move on"
    )


def _plan_call(compiled_chart: CompiledChart, run: Run, session: Session) -> Effect:
    assert run.visit is not None and run.pending
    queued = run.pending[0]
    call = queued.call
    view = model_view(compiled_chart, run.visit.state)
    state = view.state
    if call.name == NEXT_STATE:
        return TakeNextState()
    final = last_call(state, run.visit.iterations)
    tool = state.tool_map.get(call.name)
    if tool is None or final:
        offered = ", ".join(t.name for t in state.tools) or "none"
        why = (
            f"only {NEXT_STATE} is offered on the last call of state '{view.path}'"
            if tool is not None
            else f"tool '{call.name}' is not available in state '{view.path}' "
            f"(tools here: {offered}; or call {NEXT_STATE})"
        )
        return Refuse(why)
    found = session.checked_for(call) or checked(tool, call)
    if isinstance(found, str):
        return Refuse(found)
    call_fingerprint = found.fingerprint
    refusal = calls_cap_refusal(state, view.path, run.visit, tool) or repeat_refusal(
        tool, call_fingerprint, session.fingerprints
    )
    if refusal is not None:
        return Refuse(refusal)
    doubt = tool.retry if run.doubt == call.id else None
    if doubt == "never":
        return Ask(
            (
                f"tool '{tool.name}' may have run before its driver stopped (intent recorded, "
                f"no result; retry='never'): check its effect outside, then approve to run it "
                f"again or reject to skip it"
            ),
        )
    if tool.needs_approval and queued.approved_by is None:
        return Ask(f"tool '{tool.name}' needs approval in state '{view.path}'")
    key = queued.key or idempotency_key(run, tool, call_fingerprint)
    args = parse_arguments(call)
    assert not isinstance(args, str)  # checked() parsed them
    return RunTool(call, tool, found.arguments, call_fingerprint, key, tool.parse(args), doubt)


# -- advance ------------------------------------------------------------------------------
