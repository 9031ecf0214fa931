"""Build-time validation: each broken chart raises its own error naming what to fix."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from statechart import (
    Budget,
    Chart,
    ChartError,
    Decision,
    DuplicateStateError,
    Edge,
    FieldTypeError,
    MalformedStateNameError,
    MissingBudgetError,
    NoExitError,
    NoTerminalStateError,
    State,
    UncappedCycleError,
    UndeclaredFieldError,
    UnknownTargetError,
    UnreachableStateError,
)
from statechart.engine import compiled
from tests.support.typed import TicketCtx

DONE = State("done", kind="terminal")
B = Budget(max_steps=10)


async def _go(ctx: BaseModel) -> Decision:
    return Decision("done")


def test_unknown_target_names_the_edge() -> None:
    with pytest.raises(UnknownTargetError, match=r"edge a->nowhere: 'nowhere'"):
        Chart("c", states=(State("a"), DONE), edges=(Edge("a", "nowhere"),))


@pytest.mark.parametrize("name", ["", "a.b", "1st", "has space", "think"])
def test_malformed_state_name(name: str) -> None:
    with pytest.raises(MalformedStateNameError, match="state name"):
        Chart("c", states=(State(name), DONE), edges=())


def test_duplicate_state() -> None:
    with pytest.raises(DuplicateStateError, match="state 'a' is defined twice"):
        Chart("c", states=(State("a"), State("a"), DONE), edges=(Edge("a", "done"),))


def test_unreachable_state() -> None:
    with pytest.raises(UnreachableStateError, match="state 'island' cannot be reached from 'a'"):
        Chart(
            "c",
            states=(State("a"), State("island"), DONE),
            edges=(Edge("a", "done"), Edge("island", "done")),
        )


def test_non_terminal_state_without_exit() -> None:
    with pytest.raises(NoExitError, match="state 'b' has no exit"):
        Chart("c", states=(State("a"), State("b"), DONE), edges=(Edge("a", "b"), Edge("a", "done")))


def test_uncapped_cycle_names_the_cycle() -> None:
    with pytest.raises(UncappedCycleError, match="cycle a -> b -> a"):
        Chart(
            "c",
            states=(State("a"), State("b"), DONE),
            edges=(Edge("a", "b"), Edge("b", "a"), Edge("b", "done")),
        )


def test_uncapped_self_loop() -> None:
    with pytest.raises(UncappedCycleError, match="cycle a -> a"):
        Chart("c", states=(State("a"), DONE), edges=(Edge("a", "a"), Edge("a", "done")))


def test_cycle_capped_by_state_or_edge_is_fine() -> None:
    Chart("c", states=(State("a", max_visits=2), DONE), edges=(Edge("a", "a"), Edge("a", "done")))
    Chart(
        "c",
        states=(State("a"), State("b"), DONE),
        edges=(Edge("a", "b"), Edge("b", "a", max_traversals=1), Edge("b", "done")),
    )


def test_cycle_inside_a_sub_chart_is_checked() -> None:
    def child() -> Chart:
        return Chart(
            "child",
            states=(State("x"), State("y"), DONE),
            edges=(Edge("x", "y"), Edge("y", "x"), Edge("y", "done")),
        )

    with pytest.raises(UncappedCycleError, match="chart 'child': cycle x -> y -> x"):
        Chart("c", states=(State("sub", kind="chart", chart=child, exits={"done": "done"}), DONE))


class Ctx(BaseModel):
    ticket: str = ""


def test_written_field_the_context_does_not_declare() -> None:
    with pytest.raises(UndeclaredFieldError, match=r"state 'a' writes 'reply'.*Ctx"):
        Chart(
            "c",
            states=(State("a", writes=("reply",)), DONE),
            edges=(Edge("a", "done"),),
            context=Ctx,
        )


def test_read_field_the_context_does_not_declare() -> None:
    with pytest.raises(UndeclaredFieldError, match="reads 'account'"):
        Chart(
            "c",
            states=(State("a", reads=("account",)), DONE),
            edges=(Edge("a", "done"),),
            context=Ctx,
        )


def test_no_terminal_state() -> None:
    with pytest.raises(NoTerminalStateError, match="chart 'c' has no terminal state"):
        Chart("c", states=(State("a", max_visits=1),), edges=(Edge("a", "a"),))


def test_root_without_max_steps_cannot_compile() -> None:
    c = Chart("c", states=(State("a"), DONE), edges=(Edge("a", "done"),))
    with pytest.raises(MissingBudgetError, match="root chart 'c' has no max_steps"):
        _ = compiled(c)


def test_chart_state_must_map_every_sub_chart_terminal() -> None:
    def child() -> Chart:
        return Chart(
            "child",
            states=(State("x"), State("ok", kind="terminal"), State("bad", kind="terminal")),
            edges=(Edge("x", "ok"), Edge("x", "bad")),
        )

    with pytest.raises(ChartError, match=r"terminal\(s\) bad have no exit"):
        Chart(
            "c",
            states=(State("sub", kind="chart", chart=child, exits={"ok": "done"}), DONE),
            budget=B,
        )


def test_chart_state_leaves_only_through_exits() -> None:
    def child() -> Chart:
        return Chart("child", states=(State("x"), DONE), edges=(Edge("x", "done"),))

    with pytest.raises(ChartError, match="map them with exits="):
        Chart(
            "c",
            states=(State("sub", kind="chart", chart=child, exits={"done": "done"}), DONE),
            edges=(Edge("sub", "done"),),
        )


def test_code_state_needs_a_handler_and_approval_its_outcomes() -> None:
    with pytest.raises(ChartError, match="code state needs handler="):
        Chart("c", states=(State("a", kind="code"), DONE), edges=(Edge("a", "done"),))
    with pytest.raises(ChartError, match="approval state needs on_approve="):
        Chart("c", states=(State("a", kind="approval"), DONE), edges=(Edge("a", "done"),))


def test_escalated_and_exhausted_are_implicit_terminals() -> None:
    c = Chart(
        "c",
        states=(State("a", kind="code", handler=_go), DONE),
        edges=(Edge("a", "done"),),
        budget=B,
    )
    kinds = {s.name: s.kind for s in c.states}
    assert kinds["escalated"] == "terminal" and kinds["exhausted"] == "terminal"
    assert compiled(c).resolve("a", "go:escalated") is not None


def test_version_is_stable_and_changes_with_structure() -> None:
    def make(cap: int) -> Chart:
        return Chart(
            "c",
            states=(State("a", max_visits=cap), DONE),
            edges=(Edge("a", "a"), Edge("a", "done")),
            budget=B,
        )

    assert make(2).version == make(2).version
    assert make(2).version != make(3).version


def test_exhaustion_targets_cannot_loop_between_spent_budgets() -> None:
    spent = Budget(max_model_calls=1)
    with pytest.raises(ChartError, match="on_exhausted pointing at itself"):
        Chart(
            "c",
            states=(State("a", budget=spent, on_exhausted="a"), DONE),
            edges=(Edge("a", "done"),),
        )
    with pytest.raises(ChartError, match="exhaustion targets form a cycle a -> b -> a"):
        Chart(
            "c",
            states=(
                State("a", budget=spent, on_exhausted="b"),
                State("b", budget=spent, on_exhausted="a"),
                DONE,
            ),
            edges=(Edge("a", "b"), Edge("b", "done")),
        )


def test_sub_chart_context_fields_must_exist_on_the_root_context() -> None:
    class Inner(BaseModel):
        ticket: str = ""
        draft: str = ""

    def child() -> Chart:
        return Chart(
            "inner",
            states=(State("x", writes=("draft",)), DONE),
            edges=(Edge("x", "done"),),
            context=Inner,
        )

    c = Chart(
        "c",
        states=(State("sub", kind="chart", chart=child, exits={"done": "done"}), DONE),
        context=Ctx,
        budget=B,
    )
    with pytest.raises(UndeclaredFieldError, match="uses context field\\(s\\) draft"):
        _ = compiled(c)


def test_initial_state_cannot_be_terminal() -> None:
    with pytest.raises(ChartError, match="initial state 'done' is terminal"):
        Chart("c", states=(DONE, State("a")), edges=(Edge("a", "done"),))


def test_caps_must_be_positive() -> None:
    with pytest.raises(ChartError, match="max_iterations=0; a cap must be at least 1"):
        Chart("c", states=(State("a", max_iterations=0), DONE), edges=(Edge("a", "done"),))
    with pytest.raises(ChartError, match="max_traversals must be >= 1"):
        Chart("c", states=(State("a"), DONE), edges=(Edge("a", "done", max_traversals=0),))


def test_reserved_names_and_targets() -> None:
    with pytest.raises(MalformedStateNameError, match="'escalated' is reserved for a terminal"):
        Chart(
            "c",
            states=(State("a"), State("escalated"), DONE),
            edges=(Edge("a", "done"), Edge("escalated", "done")),
        )
    with pytest.raises(MalformedStateNameError, match="'cancelled' is reserved"):
        Chart(
            "c",
            states=(State("a"), State("cancelled", kind="terminal")),
            edges=(Edge("a", "cancelled"),),
        )
    with pytest.raises(UnknownTargetError, match="on_approve='nowhere' is not a state"):
        Chart(
            "c", states=(State("a", kind="approval", on_approve="nowhere", on_reject="done"), DONE)
        )


def test_a_tool_cannot_be_named_next_state() -> None:
    from statechart import ToolDefinitionError, tool

    @tool(retry="safe", name="next_state")
    def sneaky(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="may not be named 'next_state'"):
        Chart("c", states=(State("a", tools=(sneaky,)), DONE), edges=(Edge("a", "done"),))


def test_chart_state_needs_a_factory_not_an_instance() -> None:
    inner = Chart("inner", states=(State("x"), DONE), edges=(Edge("x", "done"),))
    with pytest.raises(ChartError, match="needs chart= a factory"):
        Chart(
            "c",
            states=(
                State("sub", kind="chart", chart=inner, exits={"done": "done"}),  # type: ignore[arg-type]
                DONE,
            ),
        )


def test_a_state_cannot_be_named_like_the_charts_budget_level() -> None:
    """`root` is a reserved state name: the chart's own budget level is written
    `statechart.budget.root.*`, so a state of that name could not share those attributes."""
    with pytest.raises(MalformedStateNameError, match="'root' is reserved"):
        Chart(
            "c",
            budget=Budget(max_steps=20),
            states=(State("root", budget=Budget(max_steps=3)), State("done", kind="terminal")),
            edges=(Edge("root", "done"),),
        )


def test_sub_chart_fields_must_be_typed_like_the_root() -> None:
    """A sub-chart whose context types a field differently from the root context is
    refused at compile time, naming the field."""

    class Loose(BaseModel):
        ticket_id: int = 0

    def child() -> Chart:
        return Chart(
            "inner",
            context=Loose,
            states=(State("x", writes=("ticket_id",)), DONE),
            edges=(Edge("x", "done"),),
        )

    c = Chart(
        "c",
        context=TicketCtx,
        budget=Budget(max_steps=5),
        states=(State("sub", kind="chart", chart=child, exits={"done": "done"}), DONE),
    )
    with pytest.raises(
        FieldTypeError,
        match="types context field 'ticket_id' as int, the context around it as str;",
    ):
        _ = compiled(c)


def test_context_fields_may_not_have_aliases() -> None:
    """A context field with a pydantic alias is refused when the chart is built."""

    class Aliased(BaseModel):
        n: int = Field(default=0, alias="N")

    with pytest.raises(UndeclaredFieldError, match="has alias 'N'"):
        Chart(
            "c",
            context=Aliased,
            states=(State("s", writes=("n",)), DONE),
            edges=(Edge("s", "done"),),
        )


def test_only_terminals_declare_an_outcome() -> None:
    with pytest.raises(ChartError, match="state 'a': outcome='failure' is for terminal states"):
        Chart("c", states=(State("a", outcome="failure"), DONE), edges=(Edge("a", "done"),))
    c = Chart(
        "c",
        states=(State("a"), DONE, State("failed", kind="terminal", outcome="failure")),
        edges=(Edge("a", "done"), Edge("a", "failed")),
    )
    assert c.state_map["failed"].outcome == "failure" and c.state_map["done"].outcome == "success"
    assert c.state_map["escalated"].outcome == "failure"


def test_a_chart_with_no_states_says_so() -> None:
    with pytest.raises(ChartError, match="chart 'c' has no states"):
        Chart("c", states=())
