"""The compiled loop of a model state (`engine/react.py`) against the general steps.

The suite runs with `STATECHART_CHECK_STEPS=1` (tests/conftest.py): every compiled step is
also made the general way and the two must be equal, so every test that drives a model
state is a differential test of `react`. Here: that the check is on and catches a
difference, that the common steps do take the compiled path, and the random runs of
`test_properties.py` with the compiled and the general steps counted.
"""

from __future__ import annotations

import enum
import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from statechart import (
    Budget,
    Chart,
    Edge,
    FunctionModel,
    MemoryStore,
    ScriptedModel,
    State,
    Step,
    Usage,
    approve,
    call,
    reply,
    run_to_end,
    start,
    tool,
)
from statechart.engine import transition
from statechart.engine.effects import CallModel
from statechart.engine.react import loop_at
from statechart.engine.tables import compiled
from statechart.errors import CompiledStepMismatchError
from tests.engine.test_properties import SETTINGS, simulate


@tool(retry="safe")
def fetch(n: int) -> str:
    """Fetch record `n`."""
    return f"record {n}"


@tool(retry="keyed")
def pay(amount: int, idempotency_key: str | None = None) -> str:
    """Pay, once per key."""
    return f"paid {amount}"


def _chart() -> Chart:
    return Chart(
        "loop",
        states=(
            State("work", tools=(fetch, pay), max_iterations=6),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=40, max_tokens=10_000),
    )


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(call("fetch", "a", n=1)),
            reply(call("fetch", "b", n=2), call("pay", "c", amount=3)),
            reply(call("next_state", "d", target="done")),
        ]
    )


def _drive(chart: Chart, model: ScriptedModel) -> Any:
    async def main() -> Any:
        store = MemoryStore()
        run = await start(chart, store=store, model=model)
        return await run_to_end(chart, run, store=store, model=model)

    return anyio.run(main)


def _counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the steps each path makes (`compiled plan`, `general advance`, ...)."""
    seen: Counter[str] = Counter()
    plan_step, advance_step = transition.plan_step, transition.advance_step

    def plan(*args: Any) -> Any:
        found = plan_step(*args)
        seen["compiled plan" if found is not None else "general plan"] += 1
        return found

    def advance(*args: Any) -> Any:
        found = advance_step(*args)
        seen["compiled advance" if found is not None else "general advance"] += 1
        return found

    monkeypatch.setattr(transition, "plan_step", plan)
    monkeypatch.setattr(transition, "advance_step", advance)
    return seen


def test_the_suite_compares_every_compiled_step_with_the_general_one() -> None:
    assert transition.CHECKED


def test_the_common_steps_of_a_tool_loop_are_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counted(monkeypatch)
    end = _drive(_chart(), _script())
    assert (end.state, end.seq) == ("done", 7)
    assert seen["compiled advance"] == 5  # two replies queuing calls; results, next_call, results
    assert seen["general advance"] == 2  # the reply with `next_state`, and its move
    assert seen["compiled plan"] == 7  # 3 model calls, 3 tool calls, taking `next_state`
    assert seen["general plan"] == 0  # (in `done` no loop is asked)


def _later(step: Step) -> Step:
    return replace(step, event=replace(step.event, time=step.event.time + 1))


def _other_visit(step: Step) -> Step:
    assert step.run.visit is not None
    return replace(step, run=replace(step.run, visit=replace(step.run.visit, iterations=99)))


@pytest.mark.parametrize(("spoil", "said"), [(_later, "differs"), (_other_visit, "iterations=99")])
def test_a_compiled_advance_that_differs_is_caught(
    monkeypatch: pytest.MonkeyPatch, spoil: Callable[[Step], Step], said: str
) -> None:
    advance_step = transition.advance_step

    def wrong(*args: Any) -> Any:
        found = advance_step(*args)
        return None if found is None else spoil(found)

    monkeypatch.setattr(transition, "advance_step", wrong)
    with pytest.raises(CompiledStepMismatchError, match=rf"(?s)compiled advance of run .*{said}"):
        _drive(_chart(), _script())


def test_a_compiled_plan_that_differs_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    plan_step = transition.plan_step

    def wrong(*args: Any) -> Any:
        found = plan_step(*args)
        if isinstance(found, CallModel):
            return CallModel(replace(found.request, max_tokens=1))
        return found

    monkeypatch.setattr(transition, "plan_step", wrong)
    with pytest.raises(
        CompiledStepMismatchError, match=r"compiled plan of run .* in 'work\.think'"
    ):
        _drive(_chart(), _script())


def test_states_the_general_steps_must_take_have_no_loop() -> None:
    chart = Chart(
        "strict",
        states=(State("work", tools=(fetch,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10, max_tokens=500, strict=True),
    )
    cc = compiled(chart)
    assert loop_at(cc, "work.think") is None  # strict caps: the general fit() prices calls
    assert loop_at(cc, "done") is None
    loop = compiled(_chart())
    assert loop_at(loop, "work.act") is loop_at(loop, "work.think") is not None


@tool(retry="safe", repeatable=True)
def again(n: int) -> str:
    """Repeatable: the same arguments may run twice."""
    return f"again {n}"


@tool(retry="safe")
def broken(n: int) -> str:
    """Always fails."""
    raise RuntimeError(f"broken {n}")


@tool(retry="safe", needs_approval=True)
def send(to: str) -> str:
    """Needs a person's approval."""
    return f"sent to {to}"


LOOP_TOOLS = (fetch, pay, again, broken, send)
GOOD = {"fetch": "n", "pay": "amount", "again": "n", "broken": "n", "send": "to"}


def _loop_chart(data: st.DataObject) -> Chart:
    """One or two model states in a loop, with budgets drawn near what a run spends."""
    tokens = data.draw(st.sampled_from([None, 200, 2_000]), "max_tokens")
    output = data.draw(st.sampled_from([None, 60]), "max_output_tokens")
    tools = tuple(
        LOOP_TOOLS[i]
        for i in sorted(data.draw(st.sets(st.integers(0, len(LOOP_TOOLS) - 1), min_size=1)))
    )
    capped = data.draw(st.sampled_from([t.name for t in tools]), "capped tool")
    work = State(
        "work",
        tools=tools,
        max_iterations=data.draw(st.integers(1, 6), "max_iterations"),
        max_calls=data.draw(st.sampled_from([{}, {capped: 1}, {capped: 2}]), "max_calls"),
        max_tokens=data.draw(st.sampled_from([None, 50]), "state max_tokens"),
        budget=data.draw(st.sampled_from([None, Budget(max_tool_calls=3)]), "state budget"),
    )
    check = State("check", tools=(fetch,), max_iterations=3)
    return Chart(
        "loops",
        states=(work, check, State("done", kind="terminal")),
        edges=(
            Edge("work", "check"),
            Edge("check", "done"),
            Edge("check", "work", max_traversals=1),
        ),
        budget=Budget(
            max_steps=data.draw(st.integers(4, 40), "max_steps"),
            max_tokens=tokens,
            max_output_tokens=output,
        ),
    )


def _loop_reply(data: st.DataObject, ids: Any, request: Any) -> Any:
    offered = [t.name for t in request.tools if t.name != "next_state"]
    targets = next(t for t in request.tools if t.name == "next_state").parameters
    targets = targets["properties"]["target"].get("enum", ["done"])
    calls = []
    for _ in range(data.draw(st.sampled_from([1, 1, 1, 2, 3]), "calls")):
        kind = data.draw(st.sampled_from(["good"] * 6 + ["bad", "unoffered", "next"]), "kind")
        cid = f"c{next(ids)}"
        if kind == "next" or not offered:
            calls.append(call("next_state", cid, target=data.draw(st.sampled_from(targets))))
        elif kind == "unoffered":
            calls.append(call("nothing", cid))
        else:
            name = data.draw(st.sampled_from(offered), "tool")
            value: Any = data.draw(st.integers(0, 2)) if GOOD[name] != "to" else "ann"
            calls.append(call(name, cid, **{GOOD[name]: "x" if kind == "bad" else value}))
    usage = Usage(
        input_tokens=data.draw(st.integers(0, 120), "input"),
        output_tokens=data.draw(st.integers(0, 60), "output"),
        missing=data.draw(st.sampled_from([False] * 9 + [True]), "usage missing"),
    )
    return reply(*calls, usage=usage)


def test_a_repeatable_tool_queued_twice_keys_its_second_call_after_the_first() -> None:
    """The key of a repeatable call counts the calls of its tool that returned in the
    visit, the one that just returned included: the compiled `next_call` must use the
    visit after the step, as the general one does."""
    chart = Chart(
        "twice",
        states=(State("work", tools=(again,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    model = ScriptedModel(
        [
            reply(call("again", "a", n=1), call("again", "b", n=1)),
            reply(call("next_state", "c", target="done")),
        ]
    )

    async def main() -> Any:
        store = MemoryStore()
        run = await start(chart, store=store, model=model)
        await run_to_end(chart, run, store=store, model=model)
        return await store.intents(run.run_id)

    first, second = anyio.run(main)
    assert (first.call.id, second.call.id) == ("a", "b")
    assert first.key != second.key  # same arguments, second occurrence


@given(st.data())
@settings(SETTINGS, max_examples=80)
def test_random_loops_agree_step_by_step(data: st.DataObject) -> None:
    """Random tool loops (good, bad, unoffered, repeated, failing, approval-bound calls;
    several calls a reply; token caps near the spending): every compiled step is checked
    against the general one as it is made (the run raises at the first difference)."""
    chart = _loop_chart(data)
    ids = itertools.count(1)
    model = FunctionModel(lambda request: _loop_reply(data, ids, request))

    async def main() -> Any:
        store = MemoryStore()
        run = await start(chart, store=store, model=model)
        end = await run_to_end(chart, run, store=store, model=model)
        if end.status == "waiting":
            await approve(chart, run.run_id, store=store, by="ops")
            end = await run_to_end(chart, run.run_id, store=store, model=model)
        return end, await store.events(run.run_id)

    with pytest.MonkeyPatch.context() as monkeypatch:
        seen = _counted(monkeypatch)
        end, events = anyio.run(main)
    _TOTALS.update(seen)
    assert end.status in ("ended", "waiting")
    assert seen["compiled advance"] <= sum(1 for e in events if e.trigger in _LOOP)


_LOOP = {"propose", "results", "next_call"}
_TOTALS: Counter[str] = Counter()


def test_random_loops_take_both_paths() -> None:
    """The random loops above took both paths many times: their check is not vacuous.
    (Runs after them, in file order; run alone, it draws its own.)"""
    if _TOTALS["compiled advance"] < 100:
        test_random_loops_agree_step_by_step()
    assert _TOTALS["compiled advance"] > 100 and _TOTALS["general advance"] > 100, _TOTALS
    assert _TOTALS["compiled plan"] > 100 and _TOTALS["general plan"] > 20, _TOTALS


@given(st.data())
@settings(SETTINGS, max_examples=40)
def test_random_charts_agree_step_by_step(data: st.DataObject) -> None:
    """The random charts and model behaviour of `test_properties.py` (sub-charts, code and
    approval states, guards, budgets), with the check on."""
    o = simulate(data, decide=True)
    assert o.final.status in ("ended", "waiting")


class Status(enum.StrEnum):
    OK = "ok"


@tool(retry="safe")
def status(n: int) -> Status:
    """The status of record `n`."""
    return Status.OK


def test_a_tool_returning_a_str_subclass_gets_a_plain_str_message() -> None:
    """A tool message holds a plain `str`, whatever `str` subclass the tool returned."""

    chart = Chart(
        "status",
        states=(State("work", tools=(status,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    model = ScriptedModel(
        [reply(call("status", "a", n=1)), reply(call("next_state", "b", target="done"))]
    )

    async def main() -> Any:
        store = MemoryStore(encode=False)
        run = await start(chart, store=store, model=model)
        await run_to_end(chart, run, store=store, model=model)
        return await store.transcript(run.run_id, 0)

    said = anyio.run(main)[1]
    assert (said.role, said.content, type(said.content)) == ("tool", "ok", str)
