"""Three levels deep: sub-charts inside sub-charts, approvals and budgets across all levels."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    ScriptedModel,
    State,
    Usage,
    approve,
    call,
    reply,
    run_to_end,
    tool,
)
from statechart.engine import compiled
from tests.support.helpers import run_script

pytestmark = pytest.mark.anyio
DONE = State("done", kind="terminal")


class Ctx(BaseModel):
    notes: str | None = None


@tool(retry="safe", repeatable=True)
async def dig(q: str) -> str:
    """Dig for facts."""
    return f"fact {q}"


@tool(retry="keyed", needs_approval=True)
async def buy(item: str, idempotency_key: str | None = None) -> str:
    """Buy access to a source."""
    return f"bought {item} with key {idempotency_key}"


def level3() -> Chart:
    return Chart(
        "deep",
        context=Ctx,
        budget=Budget(max_tool_calls=3),
        states=(State("probe", tools=(dig, buy), writes=("notes",), max_iterations=20), DONE),
        edges=(Edge("probe", "done"),),
    )


def level2() -> Chart:
    return Chart(
        "middle",
        context=Ctx,
        budget=Budget(max_steps=30),
        states=(State("inner", kind="chart", chart=level3, exits={"done": "done"}), DONE),
    )


def workflow() -> Chart:
    return Chart(
        "workflow",
        context=Ctx,
        budget=Budget(max_steps=60, max_tokens=1000),
        states=(
            State(
                "explore",
                kind="chart",
                chart=level2,
                exits={"done": "report"},
                on_exhausted="report",
            ),
            State("report"),
            DONE,
        ),
        edges=(Edge("report", "done"),),
    )


U = Usage(input_tokens=10, output_tokens=5)


async def test_three_levels_paths_approval_and_ledgers() -> None:
    c = workflow()
    assert compiled(c).initial_leaf == "explore.inner.probe.think"
    script = [reply(call("dig", q="1"), usage=U), reply(call("buy", "b1", item="archive"), usage=U)]
    end, steps, _, store = await run_script(c, script)
    assert end.status == "waiting" and end.state == "explore.inner.probe.approve"
    rec = await approve(c, end.run_id, store=store, by="lead")
    assert rec.run.state == "explore.inner.probe.act"
    model = ScriptedModel(
        [
            reply(call("next_state", target="done", notes="found"), usage=U),
            reply(call("next_state", target="done"), usage=U),
        ]
    )
    done = await run_to_end(c, end.run_id, store=store, model=model)
    assert done.state == "done" and done.context["notes"] == "found"
    events = await store.events(end.run_id)
    bought = next(e for e in events if e.call is not None and e.call.id == "b1" and e.result)
    assert bought.result is not None and bought.result.startswith("bought archive with key ")
    # the deep exit maps through two hosts to the root's report state in one event
    leave = next(e for e in events if e.target == "report.think")
    assert leave.exited == (
        "explore.inner.probe.act",
        "explore.inner.probe",
        "explore.inner",
        "explore",
    )
    assert leave.entered == ("report", "report.think")
    # spending in the deepest state charged all three levels
    led = done.ledger
    assert led["explore.inner"].tool_calls == 2 and led["explore"].tool_calls == 2
    assert led["root"].tool_calls == 2 and led["root"].tokens == 4 * 15
    # the middle chart holds only the inner one, so its steps are the inner ones
    assert led["explore.inner"].steps == led["explore"].steps < led["root"].steps


async def test_the_deepest_budget_ends_its_chart_and_each_parent_maps_it() -> None:
    script = [reply(call("dig", q=str(i)), usage=U) for i in range(5)]
    end, steps, model, _ = await run_script(
        workflow(), [*script, reply(call("next_state", target="done"))]
    )
    exhausted = [s.event for s in steps if s.event.exhausted]
    assert [e.exhausted for e in exhausted] == ["explore.inner:tool_calls"]
    # deep 'exhausted' -> middle's escalated by default -> root maps explore's escalated
    assert exhausted[0].target == "escalated"
    assert end.state == "escalated"


async def test_a_parent_budget_stops_calls_deep_below_it() -> None:
    big = Usage(input_tokens=400, output_tokens=200)
    script = [reply(call("dig", q=str(i)), usage=big) for i in range(5)]
    end, steps, model, _ = await run_script(workflow(), script)
    assert len(model.requests) == 2  # 1200 tokens > 1000 after two calls: no third call
    assert steps[-1].event.exhausted == "root:tokens"
    assert end.state == "escalated" and end.ledger["root"].tokens == 1200
