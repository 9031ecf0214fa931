"""Properties of whole runs: random charts, random model behaviour, budgets near the spending.

Hypothesis builds a chart (sub-charts up to three levels deep; model, code,
approval and terminal states; guarded and capped edges; budgets on the root,
on states and on sub-charts) and drives one run with a `FunctionModel` whose
every reply is drawn: offered and unoffered tools, bad arguments, text-only
replies, `next_state` to legal and illegal targets, several calls at once,
usage near the caps. Then it checks what the stored events say:

- every move is a compiled transition (or a refusal that stays put);
- no level spends past its caps by more than the one call that crossed them;
- the run ends or waits, within the root's `max_steps`;
- folding the events' patches and usage gives the final snapshot.

Beside those: loop caps hold per visit, only offered tools run, every call id
gets exactly one result. The last tests pin bugs these properties found.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from statechart import (
    ESCALATED,
    Budget,
    Chart,
    ChartError,
    Decision,
    Edge,
    Event,
    Facts,
    FunctionModel,
    MemoryStore,
    Message,
    Reply,
    Request,
    Retry,
    Run,
    ScriptedModel,
    Spent,
    State,
    Step,
    ToolCall,
    Usage,
    approve,
    call,
    cancel,
    reject,
    reply,
    run_to_end,
    start,
    tool,
)
from statechart.chart.chart import Guard
from statechart.engine import compiled
from statechart.engine.machine import EXIT
from statechart.engine.replay import fold
from statechart.engine.tables import CompiledChart
from statechart.records.spent import remaining, spent_of
from statechart.store import Lease
from tests.support.strategies import FIELDS, ChartOptions, Ctx, charts

SMALL = st.integers(0, 40)


# -- tools ---------------------------------------------------------------------------------------


@tool(retry="safe")
async def lookup(query: str) -> str:
    """Look something up."""
    return f"about {query}"


@tool(retry="safe", repeatable=True, output_cap=20)
async def add(n: int) -> str:
    """Add one, with a long answer (cut to 20 characters)."""
    return f"{n + 1} " * 20


@tool(retry="safe")
async def boom(x: int) -> str:
    """Always fails."""
    raise RuntimeError(f"boom {x}")


@tool(retry="safe", retries=Retry(attempts=2, initial=0, jitter=0))
async def retried(x: int) -> str:
    """Always fails, and is tried once more first (asleep until a timer due at once)."""
    raise ConnectionError(f"down {x}")


@tool(retry="keyed")
async def charge(amount: int, idempotency_key: str | None = None) -> str:
    """A keyed side effect."""
    return f"charged {amount} under {idempotency_key}"


@tool(retry="safe", needs_approval=True)
async def send(to: str) -> str:
    """Needs a human's approval."""
    return f"sent to {to}"


TOOLS = (lookup, add, boom, charge, send, retried)
TOOLSETS = (
    (lookup, add),
    (add, charge, boom),
    (lookup,),
    (send, add),
    (),
    (boom, lookup, charge),
    (retried, lookup),
)
GOOD_ARGS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "lookup": st.fixed_dictionaries({"query": st.sampled_from(["a", "b"])}),
    "add": st.fixed_dictionaries({"n": st.integers(0, 2)}),
    "boom": st.fixed_dictionaries({"x": st.integers(0, 2)}),
    "retried": st.fixed_dictionaries({"x": st.integers(0, 2)}),
    "charge": st.fixed_dictionaries({"amount": st.integers(1, 3)}),
    "send": st.fixed_dictionaries({"to": st.sampled_from(["ann", "bob"])}),
}
BAD_ARGS: st.SearchStrategy[dict[str, Any] | str] = st.sampled_from(
    [{}, {"query": [1]}, {"n": "many"}, {"x": None}, {"amount": {"a": 1}}, "{not json", "[1, 2]"]
)

# -- guards and handlers -------------------------------------------------------------------------


def _raise(facts: Facts) -> bool:
    raise ValueError("guard broke")


GUARDS: dict[str, Guard] = {
    "none": lambda f: None,
    "true": lambda f: True,
    "false": lambda f: False,
    "reason": lambda f: "not now",
    "raise": _raise,
    "count": lambda f: f.context.count >= 2 or "count is below 2",  # type: ignore[attr-defined]
}


class World:
    """Everything random about one run's behaviour, drawn while it runs."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.ids = itertools.count(1)

    def draw(self, strategy: st.SearchStrategy[Any], label: str | None = None) -> Any:
        return self.data.draw(strategy, label=label)

    def handler(self, targets: Sequence[str], writes: Sequence[str]) -> Any:
        async def decide(ctx: Any) -> Decision | str:
            what = self.draw(st.sampled_from(["decision", "name", "decision", "raise"]), "handler")
            if what == "raise":
                raise RuntimeError("handler broke")
            illegal = self.draw(st.sampled_from([False] * 5 + [True]), "illegal target?")
            options = ["nowhere", "s0", "done"] if illegal else list(targets)
            target = self.draw(st.sampled_from(options), "target")
            if what == "name":
                return target
            patch = self.draw(
                st.dictionaries(
                    st.sampled_from([*writes, *writes, *FIELDS]),
                    st.integers(0, 3) | st.sampled_from(["x", "y"]) | st.none(),
                    max_size=2,
                ),
                "patch",
            )
            return Decision(target, patch=patch, reason="decided")

        return decide

    # -- the model ------------------------------------------------------------------------------

    def reply(self, request: Request) -> Reply:
        """One model reply, every part of it drawn."""
        if self.draw(st.sampled_from([False] * 40 + [True]), "outage"):
            raise RuntimeError("provider is down")
        offered = [t.name for t in request.tools if t.name != "next_state"]
        nxt = next(t for t in request.tools if t.name == "next_state")
        props = nxt.parameters.get("properties", {})
        target = props.get("target", {})
        targets = list(target.get("enum", [target.get("const")]))
        writes = [p for p in props if p != "target"]
        n = self.draw(st.sampled_from([1, 1, 2, 0, 1, 3]), "calls")
        calls = tuple(self._call(offered, targets, writes) for _ in range(n))
        cap = request.max_tokens
        out = self.draw(SMALL | st.integers(0, 300), "output_tokens")
        if cap is not None and self.draw(st.booleans(), "obeys max_tokens"):
            out = min(out, cap)
        usage = Usage(
            input_tokens=self.draw(SMALL | st.integers(0, 400), "input_tokens"),
            output_tokens=out,
            cost_micros=self.draw(SMALL | st.integers(0, 600), "cost"),
        )
        return reply(*calls, content="thinking" if not calls else "", usage=usage)

    def _call(self, offered: list[str], targets: list[str], writes: list[str]) -> ToolCall:
        call_id = f"c{next(self.ids)}"
        kinds = ["next_state", "next_state", "unoffered", "next_illegal", "next_bad"]
        if offered:
            kinds = ["good", "good", "good", "bad", *kinds]
        kind = self.draw(st.sampled_from(kinds), "call kind")
        if kind in ("good", "bad"):
            name = self.draw(st.sampled_from(offered), "tool")
            args = self.draw(GOOD_ARGS[name] if kind == "good" else BAD_ARGS, "args")
            return ToolCall(id=call_id, name=name, arguments=args)
        if kind == "unoffered":
            others = [t.name for t in TOOLS if t.name not in offered] + ["ghost"]
            name = self.draw(st.sampled_from(others), "unoffered tool")
            return ToolCall(id=call_id, name=name, arguments={})
        values = self.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "count": st.integers(0, 3) | st.none(),
                    "note": st.sampled_from(["x", "y", None]),
                },
            ),
            "writes",
        )
        values = {k: v for k, v in values.items() if k in writes}
        if kind == "next_state":
            onward = [t for t in targets if t != ESCALATED] or targets
            values["target"] = self.draw(st.sampled_from(onward * 4 + targets), "target")
        elif kind == "next_illegal":
            values["target"] = self.draw(
                st.sampled_from(["nowhere", "think", "s0", "done", "s0.s0"]), "illegal target"
            )
        else:
            values["target"] = self.draw(st.sampled_from(targets), "target")
            values[self.draw(st.sampled_from(["count", "target"]), "bad field")] = ["bad"]
        return ToolCall(id=call_id, name="next_state", arguments=values)


# -- driving -------------------------------------------------------------------------------------


class Unbounded(AssertionError):
    """The run kept appending events past any bound its budgets allow."""


class BoundedStore(MemoryStore):
    """A memory store that refuses to grow past `limit` events (a run that never ends)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.appended = 0
        self.snapshots: list[Run] = []
        self.steps: list[Step] = []

    async def append(self, step: Step, lease: Lease | None = None) -> None:
        self.appended += 1
        if self.appended > self.limit:
            raise Unbounded(
                f"more than {self.limit} events: {step.event.trigger} "
                f"{step.event.source} -> {step.event.target}"
            )
        await super().append(step, lease)
        self.snapshots.append(step.run)
        self.steps.append(step)


@dataclass
class Outcome:
    chart: Chart
    initial: Run
    final: Run
    events: list[Event]
    requests: list[Request]
    transcripts: dict[int, list[Message]]
    """Transcript of every visit, keyed by the seq of the event that entered it."""
    snapshots: list[Run]
    """The stored snapshot after each event."""
    steps: list[Step]


def event_bound(cc: CompiledChart) -> int:
    """A generous bound on the events of one run: every charged step, each followed by a
    chain of free exhaustion routes no longer than the number of states."""
    assert cc.chart.budget is not None and cc.chart.budget.max_steps is not None
    return (cc.chart.budget.max_steps + 1) * (len(cc.nodes) + 1)


def simulate(
    data: st.DataObject, decide: bool = False, ports: bool = False, backend: str = "asyncio"
) -> Outcome:
    world = World(data)
    options = ChartOptions(
        guards=st.sampled_from([None, None, *GUARDS.values()]),
        toolsets=TOOLSETS,
        handler=world.handler,
        ports=ports,
    )
    chart = data.draw(charts(options), "chart")
    note(chart.describe())
    context = data.draw(
        st.fixed_dictionaries(
            {
                "count": st.integers(0, 3),
                "note": st.sampled_from(["", "hi"]),
            }
        ),
        "context",
    )
    model = FunctionModel(world.reply)
    store = BoundedStore(event_bound(compiled(chart)))

    async def main() -> tuple[Run, Run, list[Event], dict[int, list[Message]]]:
        run = await start(chart, store=store, model=model, context=context, clock=lambda: 0.0)
        end = await run_to_end(chart, run, store=store, model=model, clock=lambda: 0.0)
        for _ in range(3 if decide else 0):
            if end.status != "waiting":
                break
            how = data.draw(st.sampled_from(["approve", "reject", "cancel"]), "decision")
            if how == "cancel":
                await cancel(chart, run.run_id, store=store, reason="stop", by="ops")
            elif how == "approve":
                await approve(chart, run.run_id, store=store, by="ops")
            else:
                await reject(chart, run.run_id, store=store, by="ops", reason="no")
            end = await run_to_end(chart, run.run_id, store=store, model=model, clock=lambda: 0.0)
        events = await store.events(run.run_id)
        visits = {e.visit for e in events if e.visit is not None}
        return run, end, events, {v: await store.transcript(run.run_id, v) for v in visits}

    initial, final, events, transcripts = anyio.run(main, backend=backend)
    note(
        f"{len(events)} events: " + ", ".join(f"{e.trigger}:{e.source}->{e.target}" for e in events)
    )
    return Outcome(
        chart, initial, final, events, model.requests, transcripts, store.snapshots, store.steps
    )


# -- the properties ------------------------------------------------------------------------------


def check_moves(o: Outcome) -> None:
    """Every event is a compiled transition from where the run was, or a refusal in place."""
    cc = compiled(o.chart)
    here = o.initial.state
    for e in o.events:
        assert e.source == here, (e.seq, e.source, here)
        assert e.target in cc.nodes, e
        assert EXIT not in cc.table.get(e.target, {}), f"rests on sub-chart terminal {e.target}"
        assert not any(p.startswith(e.target + ".") for p in cc.nodes), f"compound {e.target}"
        if e.trigger == "reply":  # a text-only reply, refused back to the model
            assert e.refused and e.target == e.source and e.source.endswith(".think"), e
        elif e.trigger == "refuse":  # a refused call: back to `.think` of the same state
            assert e.refused and e.source.endswith(".act"), e
            assert e.target == e.source.removesuffix(".act") + ".think", e
        elif e.trigger in ("retry", "wake"):  # a failed call put to sleep, and its waking
            assert e.target == e.source and not (e.entered or e.exited), e
            assert (e.wake is not None) == (e.trigger == "retry") and e.source.endswith(".act")
        else:
            move = cc.fire(e.source, e.trigger, lambda _t: True)  # MachineError when illegal
            assert move is not None and move.leaf == e.target, (e, move)
            assert (e.entered, e.exited) == (move.entered, move.exited), e
        here = e.target
    assert o.final.state == here


def check_caps(o: Outcome) -> None:
    """Loop caps: iterations and per-tool calls per visit; only offered tools ever run."""
    cc = compiled(o.chart)
    iterations: dict[str, int] = {}
    calls: dict[tuple[str, str], int] = {}
    for e in o.events:
        owner, state = cc.owner_state(e.source)
        if e.usage.model_calls:
            iterations[owner] = iterations.get(owner, 0) + 1
            assert state.kind == "model", e
            assert iterations[owner] <= (state.max_iterations or 0), (e, iterations)
        if e.fingerprint is not None:
            assert e.call is not None and e.call.name in state.tool_map, e
            key = (owner, e.call.name)
            calls[key] = calls.get(key, 0) + 1
            cap = state.max_calls.get(e.call.name)
            assert cap is None or calls[key] <= cap, (e, calls)
        for path in e.entered:
            iterations.pop(path, None)
            for k in [k for k in calls if k[0] == path]:
                del calls[k]


TOKEN_KINDS = ("input_tokens", "output_tokens", "tokens", "cost_micros")
HARD_KINDS = ("steps", "wall_ms")


def check_results(o: Outcome) -> None:
    """Every call a reply made gets exactly one result, whether it ran, was refused or was
    dropped (only the call waiting for approval is still open)."""
    open_call = o.final.pending[0].call.id if o.final.state.endswith(".approve") else None
    for visit, transcript in o.transcripts.items():
        asked = [c.id for m in transcript if m.role == "assistant" for c in m.tool_calls]
        answered = [m.tool_call_id for m in transcript if m.role == "tool"]
        assert len(answered) == len(set(answered)), (visit, answered)
        assert set(answered) <= set(asked), (visit, asked, answered)
        missing = set(asked) - set(answered)
        if open_call is not None and o.final.visit is not None and o.final.visit.seq == visit:
            missing.discard(open_call)
        assert not missing, (visit, missing)


def check_budgets(o: Outcome) -> None:
    """No step starts once a level's steps are spent, and no call (model call, tool run,
    approval ask) starts once any of its caps is: so steps, model calls and tool calls never
    pass a cap, and tokens and cost pass it by at most the one call that crossed it.
    `max_tokens` asked of the model is exactly what the state and every level have left."""
    cc = compiled(o.chart)
    ledger: dict[str, Spent] = {}
    worst: dict[tuple[str, str], int] = {}  # (level, kind) -> the largest single call's usage
    requests = iter(o.requests)
    for e in o.events:
        levels = cc.levels_of(e.source)
        starts_call = bool(e.usage.model_calls or e.usage.tool_calls or e.trigger == "ask")
        for level in levels if e.usage.steps else ():
            before = ledger.get(level.path, Spent())
            for kind, cap in level.caps.items():
                if kind in HARD_KINDS or starts_call:
                    assert spent_of(before, kind) < cap, (
                        f"event {e.seq} ({e.trigger}) started with level '{level.path}' spent: "
                        f"{kind} {spent_of(before, kind)} >= {cap}"
                    )
        if e.usage.model_calls:
            request = next(requests)
            owner, state = cc.owner_state(e.source)
            assert request.state == owner
            limits = [state.max_tokens] if state.max_tokens is not None else []
            for level in levels:
                before = ledger.get(level.path, Spent())
                for kind in ("output_tokens", "tokens"):
                    left = remaining(level.caps, before, kind)
                    if left is not None:
                        limits.append(left)
            assert request.max_tokens == (min(limits) if limits else None), (
                e.seq,
                request.max_tokens,
                limits,
            )
        for level in levels:
            ledger[level.path] = ledger.get(level.path, Spent()) + e.usage
            for kind in TOKEN_KINDS if e.usage.model_calls else ():
                key = (level.path, kind)
                worst[key] = max(worst.get(key, 0), spent_of(e.usage, kind))
    assert next(requests, None) is None, "a model call left no event"
    for level in cc.levels.values():
        spent = o.final.ledger.get(level.path, Spent())
        for kind, cap in level.caps.items():
            value = spent_of(spent, kind)
            if kind in TOKEN_KINDS:
                over = worst.get((level.path, kind), 0)
                assert value <= cap or value - over < cap, (level.path, kind, value, cap, over)
            else:
                assert value <= cap, (level.path, kind, value, cap)


def check_ends(o: Outcome) -> None:
    """The run ends or waits for a human, within the root's `max_steps`."""
    cc = compiled(o.chart)
    final = o.final
    budget = o.chart.budget
    assert budget is not None and budget.max_steps is not None
    assert final.status in ("ended", "waiting"), (final.status, final.state)
    assert final.ledger.get("", Spent()).steps <= budget.max_steps
    assert len(o.events) <= event_bound(cc)
    node = cc.nodes[final.state]
    if final.status == "waiting":
        assert final.state.endswith(".approve") or (
            node.state is not None and node.state.kind == "approval"
        ), final.state
        assert final.state.endswith(".approve") == bool(final.pending)
    else:
        assert node.state is not None and node.state.kind == "terminal", final.state
        assert final.pending == ()


def check_replay(o: Outcome) -> None:
    """The final snapshot is the fold of the events: context, ledgers and visit counts."""
    cc = compiled(o.chart)
    context = dict(o.initial.context)
    ledger: dict[str, Spent] = {}
    visits = dict(o.initial.visits)
    for e in o.events:
        if not e.scope:
            context.update(e.patch)
        for path, patch in e.outputs.items():  # a ported sub-chart writing to the root
            if not cc.nodes[path].scope:
                context.update(patch)
        if not e.usage.is_zero():
            for level in cc.levels_of(e.source):
                ledger[level.path] = ledger.get(level.path, Spent()) + e.usage
        for path in e.entered:
            if cc.nodes[path].state is not None:
                visits[path] = visits.get(path, 0) + 1
    assert context == o.final.context
    Ctx.model_validate(o.final.context)  # every write was validated against the context type
    for scope, values in o.final.contexts.items():
        cc.scopes[scope].model_validate(values)
        assert o.final.state.startswith(scope + "."), (scope, o.final.state)
    root = Spent()
    for e in o.events:
        root = root + e.usage
    assert o.final.ledger.get("root", Spent()) == root
    assert o.final.ledger == ledger
    assert o.final.visits == visits
    assert o.final.seq == len(o.events) == (o.events[-1].seq if o.events else 0)
    run = o.initial  # the whole snapshot, not only those fields, is the fold after every event
    for e, snapshot in zip(o.events, o.snapshots, strict=True):
        run = fold(cc, run, e)
        assert run == snapshot, (e.seq, e.trigger, run, snapshot)


SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@given(st.data())
@SETTINGS
def test_runs_only_take_moves_the_chart_allows(data: st.DataObject) -> None:
    o = simulate(data)
    check_moves(o)
    check_caps(o)
    check_results(o)


@given(st.data())
@SETTINGS
def test_no_level_spends_past_its_caps_by_more_than_one_call(data: st.DataObject) -> None:
    check_budgets(simulate(data))


@given(st.data())
@SETTINGS
def test_every_run_ends_or_waits_within_max_steps(data: st.DataObject) -> None:
    check_ends(simulate(data))


@given(st.data())
@SETTINGS
def test_the_final_snapshot_is_the_fold_of_the_events(data: st.DataObject) -> None:
    check_replay(simulate(data, decide=True))


# -- regressions found by the properties above ----------------------------------------------------


def _ping_pong() -> Chart:
    return Chart(
        "ping_pong",
        states=(
            State("s", budget=Budget(max_steps=1), on_exhausted="t"),
            State("t", budget=Budget(max_steps=1), on_exhausted="s"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("s", "done"), Edge("t", "done")),
        budget=Budget(max_steps=10),
    )


def _self_route() -> Chart:
    return Chart(
        "self_route",
        states=(
            State("s", budget=Budget(max_steps=1), on_exhausted="s"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("s", "done"),),
        budget=Budget(max_steps=10),
    )


def _spent_child() -> Chart:
    return Chart(
        "child",
        states=(State("s", budget=Budget(max_steps=1)), State("done", kind="terminal")),
        edges=(Edge("s", "done"),),
    )


def _cross_level() -> Chart:
    # `c.s` runs out and routes to its `escalated` (the default); `c` maps that exit back
    # to itself (allowed: `c` has max_visits); entering `c` lands on the spent `c.s` again.
    return Chart(
        "cross_level",
        states=(
            State(
                "c",
                kind="chart",
                chart=_spent_child,
                max_visits=2,
                exits={"done": "done", ESCALATED: "c"},
            ),
            State("done", kind="terminal"),
        ),
        budget=Budget(max_steps=10),
    )


def run_once(chart: Chart, model: FunctionModel | ScriptedModel) -> tuple[Run, list[Event]]:
    """Start and drive one run to its end; the final snapshot and the stored events."""
    store = BoundedStore(100)

    async def main() -> tuple[Run, list[Event]]:
        run = await start(chart, store=store, model=model)
        final = await run_to_end(chart, run, store=store, model=model)
        return final, await store.events(run.run_id)

    return anyio.run(main)


@pytest.mark.parametrize("factory", [_ping_pong, _self_route, _cross_level])
def test_exhaustion_routing_always_ends(factory: Callable[[], Chart]) -> None:
    """A spent budget routes the run away for free, so routing must never loop: either the
    chart is refused when built, or the run ends within its steps."""
    try:
        chart = factory()
    except ChartError:
        return
    final, _ = run_once(chart, FunctionModel(lambda r: reply(content="no tool")))
    assert final.status == "ended"
    assert final.ledger["root"].steps <= 10


class Strict(BaseModel):
    count: int = 0


def test_next_state_cannot_write_null_into_a_non_optional_field() -> None:
    chart = Chart(
        "strict",
        states=(State("s", writes=("count",)), State("done", kind="terminal")),
        edges=(Edge("s", "done"),),
        context=Strict,
        budget=Budget(max_steps=5),
    )
    final, events = run_once(
        chart,
        ScriptedModel(
            [
                reply(call("next_state", target="done", count=None)),
                reply(call("next_state", target="done", count=3)),
            ]
        ),
    )
    assert events[1].refused is not None and "count" in events[1].refused
    assert final.state == "done" and final.context == {"count": 3}


def test_the_reply_of_the_last_allowed_model_call_is_acted_on() -> None:
    """`next_state` is not a call: reaching `max_model_calls` does not drop the last reply."""
    chart = Chart(
        "one_call",
        states=(State("s"), State("done", kind="terminal")),
        edges=(Edge("s", "done"),),
        budget=Budget(max_steps=5, max_model_calls=1),
    )
    final, _ = run_once(chart, ScriptedModel([reply(call("next_state", target="done"))]))
    assert final.state == "done", final.reason
    assert final.ledger["root"].model_calls == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@given(data=st.data())
@SETTINGS
def test_the_fold_is_the_snapshot_with_sub_charts_on_contexts_of_their_own(
    backend: str, data: st.DataObject
) -> None:
    """Random three-level charts whose chart states may run their sub-chart on a context of
    its own, with random field or function mappings: replay (which calls no mapping)
    rebuilds every snapshot, and only active ported sub-charts hold a context."""
    o = simulate(data, decide=True, ports=True, backend=backend)
    check_replay(o)
    check_budgets(o)
