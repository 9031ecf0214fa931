"""Deriving a chart from another (`Chart.replace_state`, `with_states`, `with_edges`,
`without_edges`, `with_tools`, `with_budget`, `with_name`): each returns a new, validated
chart with its own version, leaves the original as it was, and the result runs."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    ChartError,
    ChartWarning,
    DerivationError,
    Edge,
    Facts,
    MemoryStore,
    ScriptedModel,
    State,
    UnreachableStateError,
    call,
    reply,
    run_to_end,
    start,
    tool,
)

DONE = State("done", kind="terminal")


class Ctx(BaseModel):
    notes: str | None = None
    answer: str | None = None


@tool(retry="safe")
def search(q: str) -> str:
    """Search."""
    return f"found {q}"


@tool(retry="safe")
def lookup(key: str) -> str:
    """Look up."""
    return f"value of {key}"


def has_notes(facts: Facts) -> str | None:
    return None if getattr(facts.context, "notes", None) else "take notes first"


def base() -> Chart:
    """plan -> research (loops on itself) -> write -> done; write may go back once."""
    return Chart(
        "base",
        context=Ctx,
        budget=Budget(max_steps=40),
        states=(
            State("plan", instructions="Plan."),
            State(
                "research",
                tools=(search, lookup),
                writes=("notes",),
                max_visits=3,
                max_calls={"search": 2, "lookup": 1},
                instructions="Research.",
            ),
            State("write", writes=("answer",), instructions="Write."),
            DONE,
        ),
        edges=(
            Edge("plan", "research", guard=None),
            Edge("research", "research"),
            Edge("research", "write", guard=has_notes),
            Edge("write", "research", max_traversals=1),
            Edge("write", "done"),
        ),
    )


def team() -> Chart:
    """A sub-chart sharing the parent's context: search, then check."""
    return Chart(
        "team",
        context=Ctx,
        states=(
            State("dig", tools=(search,), writes=("notes",), instructions="Dig."),
            State("check", instructions="Check."),
            State("ok", kind="terminal"),
            State("gave_up", kind="terminal", outcome="failure"),
        ),
        edges=(Edge("dig", "check"), Edge("check", "ok"), Edge("check", "gave_up")),
    )


def sub_state(**exits: str) -> State:
    return State("research", kind="chart", chart=team, exits=exits, max_visits=2)


def labels(chart: Chart) -> list[str]:
    return [e.label for e in chart.edges]


# replace_state


def test_a_state_replaced_by_a_sub_chart_leaves_through_the_exits_given() -> None:
    original = base()
    before = (original.version, original.describe(), labels(original))
    with pytest.warns(ChartWarning, match=r"edge research->write had a guard") as warned:
        derived = original.replace_state(
            "research", sub_state(), exits={"ok": "write", "gave_up": "plan"}
        )
    assert warned[0].filename == __file__  # the warning points at the caller
    assert isinstance(derived, Chart) and derived is not original
    research = derived.state_map["research"]
    assert research.kind == "chart" and dict(research.exits) == {"ok": "write", "gave_up": "plan"}
    # outgoing edges (and the self-edge) are gone; incoming ones kept, caps and guards too
    assert labels(derived) == ["plan->research", "write->research", "write->done"]
    assert derived.edges[1].max_traversals == 1
    assert derived.children["research"].name == "team"
    assert derived.version != original.version
    assert (original.version, original.describe(), labels(original)) == before
    assert original.state_map["research"].kind == "model"


def test_exits_may_already_be_on_the_new_state() -> None:
    with pytest.warns(ChartWarning):
        derived = base().replace_state("research", sub_state(ok="write"), exits={"gave_up": "plan"})
    assert dict(derived.state_map["research"].exits) == {"ok": "write", "gave_up": "plan"}


def test_an_outgoing_edge_no_exit_covers_fails_naming_it() -> None:
    with pytest.raises(DerivationError) as caught:
        base().replace_state("research", sub_state(), exits={"gave_up": "plan"})
    message = str(caught.value)
    assert "edge research->write leaves 'research'" in message
    assert "exits={'ok': 'write'}" in message  # names an unmapped terminal of the sub-chart
    assert isinstance(caught.value, ChartError)


def test_every_uncovered_edge_is_named() -> None:
    chart = base().with_states(
        State("other", instructions="x"), edges=(Edge("research", "other"), Edge("other", "done"))
    )
    with pytest.raises(DerivationError, match=r"edges research->write, research->other leave"):
        chart.replace_state("research", sub_state(), exits={"gave_up": "done", "ok": "done"})


def test_exits_that_disagree_with_the_new_states_own_fail() -> None:
    with pytest.raises(DerivationError, match=r"maps 'ok' to 'plan'.*own exits to 'write'"):
        base().replace_state("research", sub_state(ok="write"), exits={"ok": "plan"})


def test_replace_state_errors_name_the_state_and_say_what_to_do() -> None:
    with pytest.raises(DerivationError, match=r"has no state 'reserch' \(its states: plan, "):
        base().replace_state("reserch", sub_state(), exits={"ok": "write"})
    with pytest.raises(DerivationError, match=r"new state is named 'dig'; give it the name"):
        base().replace_state("research", State("dig", instructions="x"))
    with pytest.raises(DerivationError, match=r"exits= maps a sub-chart's terminals"):
        base().replace_state("research", State("research", instructions="x"), exits={"ok": "x"})


def test_a_model_state_replaced_by_a_model_state_keeps_its_edges() -> None:
    derived = base().replace_state(
        "research", State("research", writes=("notes",), max_visits=2, instructions="Again.")
    )
    assert labels(derived) == labels(base())
    assert derived.edges[2].guard is has_notes  # guards on kept edges are the same objects
    assert derived.state_map["research"].instructions == "Again."


def test_a_chart_state_replaced_by_a_model_state_gets_an_edge_to_each_exit() -> None:
    with pytest.warns(ChartWarning):
        nested = base().replace_state(
            "research", sub_state(), exits={"ok": "write", "gave_up": "plan"}
        )
    flat = nested.replace_state(
        "research", State("research", writes=("notes",), max_visits=3, instructions="R.")
    )
    assert labels(flat) == [*labels(nested), "research->write", "research->plan"]
    assert flat.edges[-1].guard is None


def test_a_state_replaced_by_a_terminal_loses_its_outgoing_edges() -> None:
    chart = base().with_states(
        State("side", instructions="Side."), edges=(Edge("plan", "side"), Edge("side", "done"))
    )
    derived = chart.replace_state("side", State("side", kind="terminal", outcome="failure"))
    assert "side->done" not in labels(derived) and "plan->side" in labels(derived)


# with_states, with_edges, without_edges


def test_with_states_adds_states_and_the_edges_that_reach_them() -> None:
    derived = base().with_states(
        State("review", instructions="Review."),
        State("rejected", kind="terminal", outcome="failure"),
        edges=(Edge("write", "review"), Edge("review", "done"), Edge("review", "rejected")),
    )
    names = [s.name for s in derived.states]
    # added before the implicit terminals, as if written in the chart
    assert names == [
        "plan",
        "research",
        "write",
        "done",
        "review",
        "rejected",
        "escalated",
        "exhausted",
    ]
    assert labels(derived)[-3:] == ["write->review", "review->done", "review->rejected"]
    assert derived.version != base().version


def test_with_states_refuses_a_name_the_chart_has() -> None:
    with pytest.raises(
        DerivationError, match=r"already has a state 'write'; change it with replace_state"
    ):
        base().with_states(State("write", instructions="x"))


def test_a_state_added_with_no_edge_into_it_fails_validation_naming_it() -> None:
    with pytest.raises(UnreachableStateError, match="state 'island' cannot be reached"):
        base().with_states(State("island", instructions="x"), edges=(Edge("island", "done"),))


def test_with_edges_adds_and_replaces_by_source_and_target() -> None:
    derived = base().with_edges(Edge("plan", "write"), Edge("write", "research", max_traversals=2))
    assert labels(derived) == [*labels(base()), "plan->write"]
    assert derived.edges[3].max_traversals == 2  # replaced in place
    assert base().edges[3].max_traversals == 1
    with pytest.raises(DerivationError, match=r"edge plan->write is given twice"):
        base().with_edges(Edge("plan", "write"), Edge("plan", "write"))


def test_with_edges_are_validated() -> None:
    with pytest.raises(ChartError, match=r"edge plan->nowhere: 'nowhere' is not a state"):
        base().with_edges(Edge("plan", "nowhere"))


def test_without_edges_removes_by_label() -> None:
    derived = base().without_edges("research->research", "write->research")
    assert labels(derived) == ["plan->research", "research->write", "write->done"]
    with pytest.raises(
        DerivationError, match=r"has no edge plan->done; name edges as 'source->target'"
    ):
        base().without_edges("plan->done")


# with_tools, with_budget, with_name


def test_with_tools_sets_exactly_the_tools_and_keeps_caps_of_kept_ones() -> None:
    derived = base().with_tools("research", search)
    research = derived.state_map["research"]
    assert [t.name for t in research.tools] == ["search"]
    assert dict(research.max_calls) == {"search": 2}
    assert research.max_visits == 3 and labels(derived) == labels(base())
    assert [t.name for t in base().state_map["research"].tools] == ["search", "lookup"]
    with pytest.raises(DerivationError, match="has no state 'nope'"):
        base().with_tools("nope", search)
    with pytest.raises(ChartError, match="only model states offer tools"):
        base().with_tools("done", search)


def test_with_budget_and_with_name() -> None:
    original = base()
    budgeted = original.with_budget(Budget(max_steps=10, max_tool_calls=3))
    assert budgeted.budget == Budget(max_steps=10, max_tool_calls=3)
    assert budgeted.version != original.version and original.budget == Budget(max_steps=40)
    renamed = original.with_name("base_v2")
    assert renamed.name == "base_v2" and renamed.version != original.version
    assert renamed.with_name("base").version == original.version  # the structure is the same


def test_derivations_chain() -> None:
    derived = (
        base()
        .with_budget(Budget(max_steps=30))
        .with_tools("research", search)
        .without_edges("research->research")
        .with_name("chained")
    )
    assert (derived.name, derived.budget, labels(derived)[1]) == (
        "chained",
        Budget(max_steps=30),
        "research->write",
    )


# the derived chart runs


@pytest.mark.anyio
async def test_a_derived_chart_runs_through_its_sub_chart() -> None:
    with pytest.warns(ChartWarning):
        derived = base().replace_state(
            "research", sub_state(), exits={"ok": "write", "gave_up": "plan"}
        )
    model = ScriptedModel(
        [
            reply(call("next_state", target="research")),  # plan
            reply(call("search", q="refunds")),  # research.dig
            reply(call("next_state", target="check", notes="refunds in 5 days")),
            reply(call("next_state", target="ok")),  # research.check
            reply(call("next_state", target="done", answer="5 days")),  # write
        ]
    )
    store = MemoryStore()
    run = await start(derived, store=store, model=model)
    run = await run_to_end(derived, run, store=store, model=model)
    assert (run.state, run.context["answer"]) == ("done", "5 days")
    moves = [(e.source, e.target) for e in await store.events(run.run_id)]
    assert ("research.check.act", "write.think") in moves
    assert run.chart_version == derived.version
