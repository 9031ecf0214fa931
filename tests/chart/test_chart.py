"""Chart definitions: frozen data, sub-charts from factories, stable structure."""

from __future__ import annotations

import dataclasses

import pytest

from statechart import Budget, Chart, Edge, State
from statechart.engine import compiled


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
