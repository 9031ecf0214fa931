"""Budgets across levels: charging ancestors, exhaustion routing, token caps, overshoot."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    FunctionModel,
    MemoryStore,
    Reply,
    Request,
    Spent,
    State,
    Usage,
    call,
    reply,
    run_to_end,
    start,
    tool,
)
from statechart.records.spent import remaining
from tests.support.helpers import run_script

pytestmark = pytest.mark.anyio
DONE = State("done", kind="terminal")


class Ctx(BaseModel):
    notes: str | None = None


@tool(retry="safe", repeatable=True)
async def look(q: str) -> str:
    """Look something up."""
    return f"seen {q}"


def test_spent_adds_and_caps_compare() -> None:
    a = Spent(steps=1, input_tokens=3, output_tokens=4)
    total = a + Spent(steps=2, cost_micros=5)
    assert (total.steps, total.tokens, total.cost_micros) == (3, 7, 5)
    caps = Budget(max_tokens=7, max_steps=10).caps()
    assert remaining(caps, total, "tokens") == 0
    assert remaining(caps, total, "steps") == 7
    assert remaining(caps, total, "cost_micros") is None
    assert Budget(max_steps=5).merged(Budget(max_steps=3, max_cost_micros=9)) == Budget(
        max_steps=3, max_cost_micros=9
    )


def sub_chart() -> Chart:
    return Chart(
        "inner",
        states=(
            State("dig", tools=(look,), writes=("notes",), max_iterations=50),
            State("found", kind="terminal"),
        ),
        edges=(Edge("dig", "found"),),
        context=Ctx,
        budget=Budget(max_tool_calls=2),
    )


def outer(max_steps: int = 100, **root: int) -> Chart:
    return Chart(
        "outer",
        states=(
            State(
                "explore",
                kind="chart",
                chart=sub_chart,
                exits={"found": "report"},
                on_exhausted="report",
            ),
            State("report", max_iterations=50),
            State("done", kind="terminal"),
        ),
        edges=(Edge("report", "done"),),
        context=Ctx,
        budget=Budget(max_steps=max_steps, **root),  # type: ignore[arg-type]
    )


def looking(n: int) -> list[Reply]:
    return [
        reply(call("look", q=str(i)), usage=Usage(input_tokens=1, output_tokens=1))
        for i in range(n)
    ]


async def test_spending_in_a_sub_chart_charges_every_ancestor() -> None:
    replies = [
        *looking(1),
        reply(call("next_state", target="found", notes="n")),
        reply(call("next_state", target="done")),
    ]
    end, steps, _, _ = await run_script(outer(), replies)
    assert end.state == "done"
    inner_steps = sum(1 for s in steps if s.event.source.startswith("explore."))
    assert end.ledger["explore"].steps == inner_steps
    assert end.ledger["explore"].tool_calls == 1
    assert end.ledger["root"].steps == len(steps)
    assert end.ledger["root"].model_calls == 3


async def test_sub_chart_budget_ends_in_exhausted_and_the_parent_maps_it() -> None:
    replies = [*looking(2), reply(call("next_state", target="done"))]
    end, steps, model, _ = await run_script(outer(), replies)
    routed = [s for s in steps if s.event.exhausted]
    assert len(routed) == 1
    ev = routed[0].event
    assert ev.exhausted == "explore:tool_calls" and ev.actor == "system"
    assert ev.usage.steps == 0  # routing to the exhaustion target is free
    assert ev.exited == ("explore.dig.think", "explore.dig", "explore")
    assert ev.entered == ("report", "report.think") and ev.target == "report.think"
    assert end.state == "done"
    assert end.ledger["explore"].tool_calls == 2
    # once the level is spent no further call starts in it: the next request is the parent's
    assert [r.state for r in model.requests] == ["explore.dig", "explore.dig", "report"]


async def test_root_steps_cap_routes_to_escalated_with_context_kept() -> None:
    c = Chart(
        "c",
        states=(
            State("work", tools=(look,), writes=("notes",), max_iterations=100),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        context=Ctx,
        budget=Budget(max_steps=5),
    )
    end, steps, _, _ = await run_script(c, looking(10), {"notes": "gathered"})
    assert end.state == "escalated" and end.status == "ended"
    assert end.ledger["root"].steps == 5
    assert steps[-1].event.exhausted == "root:steps"
    assert end.context == {"notes": "gathered"}


async def test_the_charts_own_exhaustion_target_counts_as_reachable() -> None:
    c = Chart(
        "c",
        states=(
            State("work", tools=(look,), writes=("notes",), max_iterations=100),
            State("done", kind="terminal"),
            State("partial", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        context=Ctx,
        budget=Budget(max_steps=4),
        on_exhausted="partial",
    )
    end, steps, _, _ = await run_script(c, looking(10), {"notes": "gathered"})
    assert end.state == "partial" and end.status == "ended"
    assert steps[-1].event.target == "partial"
    assert end.context == {"notes": "gathered"}


async def test_state_budget_routes_to_its_on_exhausted_sibling() -> None:
    c = Chart(
        "c",
        states=(
            State(
                "work",
                tools=(look,),
                budget=Budget(max_model_calls=2),
                on_exhausted="wrap",
                max_iterations=50,
            ),
            State("wrap", max_iterations=5),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"), Edge("wrap", "done")),
        budget=Budget(max_steps=50),
    )
    end, steps, model, _ = await run_script(
        c, [*looking(2), reply(call("next_state", target="done"))]
    )
    assert [s.event.exhausted for s in steps if s.event.exhausted] == ["work:model_calls"]
    assert end.state == "done" and model.requests[-1].state == "wrap"


async def test_max_tokens_is_capped_to_what_every_level_has_left() -> None:
    seen: list[int | None] = []

    def policy(req: Request) -> Reply:
        seen.append(req.max_tokens)
        return reply(call("look", q=str(len(seen))), usage=Usage(input_tokens=0, output_tokens=30))

    c = Chart(
        "c",
        states=(
            State(
                "work",
                tools=(look,),
                max_tokens=1000,
                max_iterations=50,
                budget=Budget(max_output_tokens=100),
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=100, max_tokens=80),
    )
    store = MemoryStore()
    model = FunctionModel(policy)
    run = await start(c, store=store, model=model)
    end = await run_to_end(c, run, store=store, model=model)
    assert seen == [80, 50, 20]
    assert end.state == "escalated"
    # overshoot is at most one call: 90 spent against a cap of 80, with calls of 30
    assert end.ledger["root"].tokens == 90 and end.ledger["root"].tokens - 80 < 30


async def test_cost_cap_stops_calls() -> None:
    c = Chart(
        "c",
        states=(State("work", tools=(look,), max_iterations=50), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=100, max_cost_micros=2500),
    )
    replies = [reply(call("look", q=str(i)), usage=Usage(cost_micros=1000)) for i in range(10)]
    end, steps, model, _ = await run_script(c, replies)
    assert len(model.requests) == 3 and end.ledger["root"].cost_micros == 3000
    assert steps[-1].event.exhausted == "root:cost_micros"


async def test_wall_time_budget() -> None:
    @tool(retry="safe", repeatable=True)
    async def slow(q: str) -> str:
        """Takes a while."""
        await anyio.sleep(0.06)
        return q

    c = Chart(
        "c",
        states=(State("work", tools=(slow,), max_iterations=50), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=100, max_wall_seconds=0.1),
    )
    replies = [reply(call("slow", q=str(i))) for i in range(10)]
    end, steps, _, _ = await run_script(c, replies)
    assert steps[-1].event.exhausted == "root:wall_ms"
    assert 100 <= end.ledger["root"].wall_ms < 400
    assert end.state == "escalated"


async def test_the_reply_of_the_last_allowed_call_is_still_acted_on() -> None:
    c = Chart(
        "one",
        states=(State("s", writes=("notes",)), State("done", kind="terminal")),
        edges=(Edge("s", "done"),),
        context=Ctx,
        budget=Budget(max_steps=5, max_model_calls=1),
    )
    end, steps, _, _ = await run_script(c, [reply(call("next_state", target="done", notes="n"))])
    assert end.state == "done" and end.context == {"notes": "n"}
    assert not any(s.event.exhausted for s in steps)


def spent_child() -> Chart:
    return Chart(
        "child",
        states=(State("s", budget=Budget(max_steps=1)), State("done", kind="terminal")),
        edges=(Edge("s", "done"),),
    )


async def test_routing_back_into_a_spent_level_stops_at_the_visit_cap() -> None:
    c = Chart(
        "cross",
        states=(
            State(
                "c",
                kind="chart",
                chart=spent_child,
                max_visits=2,
                exits={"done": "done", "escalated": "c"},
            ),
            State("done", kind="terminal"),
        ),
        budget=Budget(max_steps=10),
    )
    end, steps, _, _ = await run_script(c, [reply(content="no tool")] * 5)
    assert end.state == "escalated" and end.status == "ended"
    last = steps[-1].event
    assert last.exhausted == "c.s:steps" and "'c' is at its max_visits" in last.reason
    assert end.visits["c"] == 2


def spent_then_capped() -> Chart:
    return Chart(
        "x",
        budget=Budget(max_steps=30),
        states=(
            State("a", budget=Budget(max_model_calls=1), on_exhausted="b"),
            State("b", max_visits=1),
            DONE,
        ),
        edges=(Edge("a", "b"), Edge("b", "a", max_traversals=1), Edge("b", "done")),
    )


async def test_exhaustion_routing_respects_max_visits() -> None:
    """A spent state's `on_exhausted` target that is already at its max_visits is not
    entered: the run escalates, naming the cap."""
    replies = [
        reply(call("next_state", target="b")),
        reply(call("next_state", target="a")),
        reply(content="thinking"),
    ]
    end, steps, _, _ = await run_script(spent_then_capped(), replies)
    last = steps[-1].event
    assert last.exhausted == "a:model_calls" and "'b' is at its max_visits" in last.reason
    assert end.state == "escalated" and end.visits["b"] == 1
