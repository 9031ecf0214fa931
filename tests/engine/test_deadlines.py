"""Time limits on calls: a tool's `timeout`, a state's `call_timeout`, the chart's default
and what is left of a wall budget. A call cut off is a failed call, recorded as an event."""

from __future__ import annotations

import time
from typing import Any

import anyio
import msgspec
import pytest

from statechart import (
    Budget,
    CallTimeoutError,
    Chart,
    ChartError,
    Decision,
    Edge,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    State,
    ToolDefinitionError,
    call,
    reply,
    run_to_end,
    start,
    tool,
)
from statechart.engine import compiled
from statechart.engine.deadlines import limit
from statechart.engine.effects import CallModel, RunHandler
from statechart.records.messages import Request
from statechart.records.run import Run
from statechart.records.spent import Spent

pytestmark = pytest.mark.anyio
ASK = Request(state="work", instructions="Work.", context={}, transcript=(), tools=())


@tool(retry="safe", timeout=0.2)
async def slow(q: str) -> str:
    """Answers after a long wait."""
    await anyio.sleep(30)
    return q


@tool(retry="safe", timeout=0.2)
def stuck(q: str) -> str:
    """Blocks its thread for a while."""
    time.sleep(2)
    return q


@tool(retry="safe")
def quick(q: str) -> str:
    """Answers at once."""
    return q


def _chart(*tools: Any, call_timeout: float | None = None, **kw: Any) -> Chart:
    return Chart(
        "timed",
        states=(
            State("work", tools=tools, instructions="Work, then finish.", **kw),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20),
        call_timeout=call_timeout,
    )


async def _run(c: Chart, *replies: Any, store: Any = None) -> tuple[Run, list[Any], Any]:
    store = store or MemoryStore()
    model = ScriptedModel(list(replies))
    started = time.monotonic()
    end = await run_to_end(c, await start(c, store=store, model=model), store=store, model=model)
    return end, await store.events(end.run_id), time.monotonic() - started


@pytest.mark.parametrize("which", [slow, stuck])
async def test_a_tool_past_its_timeout_is_a_failed_call_the_model_sees(which: Any) -> None:
    """Async or blocking in a thread, the call is cut off at 0.2 s: the event says what
    timed out and the limit, the model reads the error, and the run goes on."""
    c = _chart(which, quick)
    end, events, took = await _run(
        c,
        reply(call(which.name, q="x")),
        reply(call("quick", q="y")),
        reply(call("next_state", target="done")),
    )
    assert end.state == "done" and took < 1.5
    (cut,) = [e for e in events if e.timeout is not None]
    assert cut.timeout == 0.2 and cut.trigger == "results" and cut.call.name == which.name
    assert cut.error == (
        f"CallTimeoutError: tool '{which.name}' in state 'work' ran past its timeout (0.2 s) "
        "and was cut off"
    )
    assert cut.result == f"error: tool '{which.name}' failed: {cut.error}"
    assert cut.fingerprint is None  # a failed call may be tried again
    assert end.visit is None and end.ledger["root"].tool_calls == 2


async def test_the_chart_default_applies_where_a_tool_sets_none() -> None:
    @tool(retry="safe")
    async def lingering(q: str) -> str:
        """Takes too long."""
        await anyio.sleep(30)
        return q

    c = _chart(lingering, call_timeout=0.1)
    end, events, _ = await _run(
        c, reply(call("lingering", q="x")), reply(call("next_state", target="done"))
    )
    (cut,) = [e for e in events if e.timeout is not None]
    assert "the call_timeout of chart 'timed' (0.1 s)" in str(cut.error)
    assert end.state == "done"


class _Hanging(ScriptedModel):
    """A model whose calls never answer."""

    async def complete(self, request: Request) -> Any:
        await anyio.sleep(30)


async def test_a_model_call_past_the_state_call_timeout_escalates_with_the_limit() -> None:
    c = Chart(
        "timed",
        states=(
            State("work", tools=(quick,), instructions="Work.", call_timeout=0.1),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20),
        call_timeout=5,
    )
    store, model = MemoryStore(), _Hanging([])
    end = await run_to_end(c, await start(c, store=store, model=model), store=store, model=model)
    assert end.state == "escalated"
    last = (await store.events(end.run_id))[-1]
    assert last.timeout == 0.1 and "the call_timeout of state 'work'" in str(last.error)
    assert end.ledger["root"].model_calls == 1


async def test_a_handler_past_its_call_timeout_escalates() -> None:
    async def decide(ctx: Any) -> Decision:
        await anyio.sleep(30)
        return Decision("done")

    c = Chart(
        "coded",
        states=(
            State("check", kind="code", handler=decide, call_timeout=0.1),
            State("done", kind="terminal"),
        ),
        edges=(Edge("check", "done"),),
        budget=Budget(max_steps=5),
    )
    end, events, took = await _run(c)
    assert end.state == "escalated" and took < 5
    assert events[-1].timeout == 0.1
    assert "the handler of state 'check' ran past the call_timeout" in str(events[-1].error)


async def test_the_wall_budget_cuts_a_call_in_flight_then_routes(tmp_path: Any) -> None:
    """A 30 s call under a 0.4 s wall budget is cut off when the budget runs out; the next
    step routes the run as the budget says, on a real SQLite file."""

    @tool(retry="safe")
    async def forever(q: str) -> str:
        """Never answers in time."""
        await anyio.sleep(30)
        return q

    c = Chart(
        "walled",
        states=(
            State("work", tools=(forever,), instructions="Work."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20, max_wall_seconds=0.4),
    )
    store = SQLiteStore(tmp_path / "w.db")
    end, events, took = await _run(
        c, reply(call("forever", q="x")), reply(call("next_state", target="done")), store=store
    )
    assert end.state == "escalated" and took < 5
    cut = next(e for e in events if e.timeout is not None)
    assert "what was left of the wall budget of level 'root'" in str(cut.error)
    assert 0 < cut.timeout <= 0.4
    assert events[-1].exhausted == "root:wall_ms"
    assert end.ledger["root"].wall_ms >= 400
    store.close()


def test_the_limit_is_the_shortest_of_timeout_and_wall_budget_left() -> None:
    c = Chart(
        "pure",
        states=(
            State("work", tools=(quick,), instructions="Work.", call_timeout=3),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=20, max_wall_seconds=10),
    )
    tables = compiled(c)
    run = Run(run_id="r", chart="pure", chart_version=c.version, model="m", state="work.think")
    ask = CallModel(ASK)
    found = limit(tables, run, ask)
    assert found is not None and (found.seconds, found.by) == (
        3,
        "the call_timeout of state 'work'",
    )
    late = Run(
        run_id="r",
        chart="pure",
        chart_version=c.version,
        model="m",
        state="work.think",
        ledger={"root": Spent(wall_ms=8500)},
    )
    found = limit(tables, late, ask)
    assert found is not None and found.seconds == 1.5 and "wall budget" in found.by
    assert limit(tables, run, RunHandler(c.states[0], context=None)) is not None  # type: ignore[arg-type]


def test_no_limit_without_a_timeout_or_wall_budget() -> None:
    c = _chart(quick)
    run = Run(run_id="r", chart="timed", chart_version=c.version, model="m", state="work.think")
    assert limit(compiled(c), run, CallModel(ASK)) is None


@pytest.mark.parametrize("bad", [0, -1, "2", True])
def test_a_timeout_must_be_a_positive_number_of_seconds(bad: Any) -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'quick2': a timeout must be"):
        tool(retry="safe", timeout=bad, name="quick2")(quick.fn)
    with pytest.raises(ChartError, match=r"state 'work': a timeout must be"):
        State("work", call_timeout=bad)
    with pytest.raises(ChartError, match=r"chart 'timed': a timeout must be"):
        _chart(quick, call_timeout=bad)


def test_timeouts_do_not_change_the_chart_version() -> None:
    """A timeout is how long to wait, not the chart's structure: tuning one does not make
    stored runs refuse to resume."""
    assert _chart(quick).version == _chart(quick, call_timeout=4).version


def test_a_timeout_error_names_the_call_and_the_limit() -> None:
    exc = CallTimeoutError("tool 'x' in state 'y'", 2.0, "its timeout")
    assert isinstance(exc, TimeoutError)
    assert str(exc) == "tool 'x' in state 'y' ran past its timeout (2 s) and was cut off"


def test_a_call_settled_by_its_reconcile_hook_has_no_limit() -> None:
    """The hook is asked first; a cut would read as the tool failing."""
    from statechart.engine.effects import RunTool
    from statechart.records.messages import ToolCall

    c = _chart(slow)
    run = Run(run_id="r", chart="timed", chart_version=c.version, model="m", state="work.act")
    effect = RunTool(
        call=ToolCall(id="c1", name="slow", arguments={"q": "x"}),
        tool=slow,
        arguments={"q": "x"},
        fingerprint="f",
        key=None,
        parsed=slow.parse({"q": "x"}),
    )
    found = limit(compiled(c), run, effect)
    assert found is not None and found.seconds == 0.2
    assert limit(compiled(c), run, msgspec.structs.replace(effect, doubt="reconcile")) is None
