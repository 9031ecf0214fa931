"""Chart definitions: frozen data, sub-charts from factories, stable structure, and a version
that changes with every part of it a stored run depends on."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from statechart import Budget, Chart, Edge, State, tool
from statechart.engine import compiled
from tests.support.durable import DONE, pay_chart


def child() -> Chart:
    return Chart(
        "child", states=(State("x"), State("ok", kind="terminal")), edges=(Edge("x", "ok"),)
    )


def parent() -> Chart:
    return Chart(
        "parent",
        states=(
            State("a", kind="chart", chart=child, exits={"ok": "b"}),
            State("b", kind="chart", chart=child, exits={"ok": "done"}),
            State("done", kind="terminal"),
        ),
        budget=Budget(max_steps=10),
    )


def test_sub_charts_are_built_per_parent_state_never_shared() -> None:
    p = parent()
    assert p.children["a"] is not p.children["b"]
    assert p.children["a"].version == p.children["b"].version
    paths = set(compiled(p).nodes)
    assert {"a.x.think", "b.x.think", "a.ok", "b.ok"} <= paths


def test_charts_and_states_are_frozen() -> None:
    p = parent()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.states[0].kind = "code"  # type: ignore[misc]


def test_lists_are_accepted_and_stored_as_tuples() -> None:
    s = State("a", reads=["x"], writes=[])  # type: ignore[arg-type]
    assert s.reads == ("x",) and s.writes == ()
    assert s.max_iterations == 10


def test_the_machine_uses_dot_paths() -> None:
    m = compiled(parent()).machine
    assert "a.x.think" in m.get_nested_state_names()
    assert compiled(parent()).initial_leaf == "a.x.think"


# -- the version covers every part of the structure a stored run depends on -----------------


def test_the_chart_version_covers_approval_targets() -> None:
    """`on_approve`/`on_reject` imply edges, so swapping them changes the chart version."""
    both = (State("done", kind="terminal"), State("undo", kind="terminal"))

    def with_targets(yes: str, no: str) -> Chart:
        return Chart(
            "signoff",
            budget=Budget(max_steps=10),
            states=(State("check", kind="approval", on_approve=yes, on_reject=no), *both),
        )

    assert with_targets("done", "undo").version != with_targets("undo", "done").version


def test_the_chart_version_covers_the_context_type() -> None:
    """A new required field in the context type changes the chart version, so resume asks
    for a migration instead of failing later."""

    class Before(BaseModel):
        tier: str = "basic"

    class After(BaseModel):
        tier: str = "basic"
        account: int

    def with_context(ctx: type[BaseModel]) -> Chart:
        return Chart(
            "ctx",
            context=ctx,
            budget=Budget(max_steps=10),
            states=(State("s", reads=("tier",)), DONE),
            edges=(Edge("s", "done"),),
        )

    assert with_context(Before).version != with_context(After).version


def test_the_chart_version_covers_tool_arguments() -> None:
    """Changing a tool's argument schema changes the chart version (a stored pending call
    is validated against that schema when it runs)."""

    @tool(retry="keyed")
    async def refund(order: str, idempotency_key: str | None = None) -> str:
        """Refund."""
        return "ok"

    @tool(retry="keyed", name="refund")
    async def refund_cents(order: str, cents: int, idempotency_key: str | None = None) -> str:
        """Refund."""
        return "ok"

    assert pay_chart(refund).version != pay_chart(refund_cents).version
