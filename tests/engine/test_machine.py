"""Compiling charts: the transition tables agree with the `transitions` machine they come from.

`CompiledChart.fire()` answers from tables read out of the machine;
`CompiledChart.machine_fire()` asks the machine itself. A hypothesis test
builds random valid charts (`tests/support/strategies.py`: sub-charts three levels deep,
every state kind, guarded and capped edges) and checks that both agree on every
(leaf, trigger, guard outcome). Plain examples pin down what compiling means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from statechart import (
    ESCALATED,
    Budget,
    Chart,
    ChartError,
    Decision,
    Edge,
    Facts,
    State,
    tool,
)
from statechart.engine import compiled
from statechart.engine.machine import EXIT
from statechart.engine.tables import CompiledChart, Move, Transition
from statechart.errors import IllegalTransitionError as MachineError
from tests.support.strategies import ChartOptions, Ctx, charts


@tool(retry="safe")
async def lookup(query: str) -> str:
    """Look something up."""
    return query


async def handler(ctx: Any) -> Decision:
    return Decision("done")


def allow_guard(facts: Facts) -> bool:
    return True


# -- random valid charts (tests/support/strategies.py) -----------------------------------


OPTIONS = ChartOptions(
    guards=st.sampled_from([None, allow_guard]),
    toolsets=((lookup,), ()),
    handler=lambda targets, writes: handler,
    approval_first=True,
)


def leaves(cc: CompiledChart) -> list[str]:
    """Node paths with no nested node below them."""
    return [p for p in cc.nodes if not any(q.startswith(p + ".") for q in cc.nodes)]


ILLEGAL = ("bogus", "go:nowhere", "go:s0.nowhere", "exhaust:nowhere", "think")


# -- the differential test ----------------------------------------------------------------------


def _outcome(
    fire: Callable[[str, str, Callable[[Transition], bool]], Any],
    leaf: str,
    trigger: str,
    allowed: bool,
) -> tuple[str | None, list[tuple[str, str, str]]]:
    """What one firing did: the new leaf, None (refused) or "illegal"; and the guards asked."""
    asked: list[tuple[str, str, str]] = []

    def allow(t: Transition) -> bool:
        asked.append((t.trigger, t.source, t.dest))
        return allowed

    try:
        result = fire(leaf, trigger, allow)
    except MachineError:
        return "illegal", asked
    if isinstance(result, Move):
        return result.leaf, asked
    assert result is None or isinstance(result, str), result
    return result, asked


@given(charts(OPTIONS))
@settings(max_examples=60, deadline=None)
def test_tables_and_machine_agree_on_every_leaf_trigger_and_guard_outcome(chart: Chart) -> None:
    cc = compiled(chart)
    note(chart.describe())
    triggers = sorted({t.trigger for t in cc.transitions}) + list(ILLEGAL)
    for leaf in leaves(cc):
        for trigger in triggers:
            for allowed in (True, False):
                table = _outcome(cc.fire, leaf, trigger, allowed)
                machine = _outcome(cc.machine_fire, leaf, trigger, allowed)
                assert table == machine, (leaf, trigger, allowed)
                if table[0] not in (None, "illegal"):
                    _same_exits_and_entries(cc, leaf, trigger)


def _same_exits_and_entries(cc: CompiledChart, leaf: str, trigger: str) -> None:
    """The states a move exits and enters are the machine's, less the sub-chart terminals it
    passes through (entered and exited again in the same move)."""
    trace: list[tuple[str, str]] = []
    cc.machine_fire(leaf, trigger, lambda _t: True, trace)
    move = cc.fire(leaf, trigger, lambda _t: True)
    assert move is not None
    exited = [
        p for i, (w, p) in enumerate(trace) if w == "exited" and ("entered", p) not in trace[:i]
    ]
    entered = [
        p
        for i, (w, p) in enumerate(trace)
        if w == "entered" and ("exited", p) not in trace[i + 1 :]
    ]
    assert (list(move.exited), list(move.entered)) == (exited, entered), (leaf, trigger, trace)


@given(charts(OPTIONS))
@settings(max_examples=60, deadline=None)
def test_every_compiled_move_lands_on_a_resting_leaf(chart: Chart) -> None:
    """A move never stops on a compound state or a sub-chart terminal that has an exit."""
    cc = compiled(chart)
    resting = set(leaves(cc))
    assert cc.initial_leaf in resting
    for t in cc.transitions:
        for leaf in leaves(cc):
            if leaf != t.source and not leaf.startswith(t.source + "."):
                continue
            if cc.resolve(leaf, t.trigger) is not t:
                continue  # shadowed by a nearer transition with the same trigger
            move = cc.fire(leaf, t.trigger, lambda _t: True)
            assert move is not None
            assert move.leaf in resting, (leaf, t)
            assert EXIT not in cc.table.get(move.leaf, {}), (leaf, t, move.leaf)
            assert move.exited[0] == leaf and move.entered[-1] == move.leaf


@given(charts(OPTIONS))
@settings(max_examples=60, deadline=None)
def test_escalated_is_reachable_from_every_nonterminal_state(chart: Chart) -> None:
    cc = compiled(chart)
    for path, node in cc.nodes.items():
        if node.state is None or node.state.kind == "terminal" or path == "cancelled":
            continue
        prefix = node.prefix
        t = cc.table.get(path, {}).get(f"go:{prefix}{ESCALATED}")
        assert t is not None, path
        assert t.dest == prefix + ESCALATED
        for leaf in leaves(cc):
            if leaf == path or leaf.startswith(path + "."):
                move = cc.fire(leaf, t.trigger, lambda _t: True)
                assert move is not None
                # Straight to this level's `escalated`, or through it when it is a
                # sub-chart terminal that maps on to the parent.
                assert move.leaf == prefix + ESCALATED or (
                    EXIT in cc.table[prefix + ESCALATED] and path in move.exited
                ), (leaf, move)


# -- examples --------------------------------------------------------------------------------------


def _sub() -> Chart:
    return Chart(
        "sub",
        states=(
            State("search", tools=(lookup,)),
            State("check", kind="code", handler=handler),
            State("found", kind="terminal"),
            State("lost", kind="terminal"),
        ),
        edges=(Edge("search", "check"), Edge("check", "found"), Edge("check", "lost")),
        context=Ctx,
    )


def _deep() -> Chart:
    return Chart(
        "deep",
        states=(
            State("explore", kind="chart", chart=_sub, exits={"found": "done", "lost": "done"}),
            State("done", kind="terminal"),
        ),
        context=Ctx,
    )


def example() -> Chart:
    return Chart(
        "example",
        states=(
            State("intake", tools=(lookup,)),
            State("explore", kind="chart", chart=_sub, exits={"found": "write", "lost": "gate"}),
            State("gate", kind="approval", on_approve="write", on_reject="failed"),
            State("write"),
            State("nest", kind="chart", chart=_deep, exits={"done": "done"}),
            State("done", kind="terminal"),
            State("failed", kind="terminal"),
        ),
        edges=(
            Edge("intake", "explore"),
            Edge("write", "nest"),
            Edge("write", "done", guard=allow_guard),
        ),
        context=Ctx,
        budget=Budget(max_steps=50),
    )


def test_initial_leaf_of_a_model_state_is_its_think_substate() -> None:
    cc = compiled(example())
    assert cc.initial_leaf == "intake.think"
    assert cc.descend("write") == "write.think"
    assert cc.descend("gate") == "gate"


def test_entering_a_chart_state_descends_into_its_initial_substate() -> None:
    cc = compiled(example())
    move = cc.fire("intake.act", "go:explore", lambda _t: True)
    assert move is not None
    assert move.leaf == "explore.search.think"
    assert move.exited == ("intake.act", "intake")
    assert move.entered == ("explore", "explore.search", "explore.search.think")
    assert cc.machine_fire("intake.act", "go:explore", lambda _t: True) == move.leaf
    deeper = cc.fire("write.act", "go:nest", lambda _t: True)
    assert deeper is not None and deeper.leaf == "nest.explore.search.think"


def test_a_subchart_terminal_maps_through_exits_to_the_parent_target_in_one_move() -> None:
    cc = compiled(example())
    found = cc.fire("explore.check", "go:explore.found", lambda _t: True)
    assert found is not None
    assert found.leaf == "write.think"
    # the terminal passed through is never occupied: only the source and its host are left
    assert found.exited == ("explore.check", "explore")
    assert found.entered == ("write", "write.think")
    lost = cc.fire("explore.check", "go:explore.lost", lambda _t: True)
    assert lost is not None and lost.leaf == "gate"
    # Two levels up in one move: nest.explore.found -> nest.done -> done.
    deep = cc.fire("nest.explore.check", "go:nest.explore.found", lambda _t: True)
    assert deep is not None and deep.leaf == "done"
    assert deep.exited == ("nest.explore.check", "nest.explore", "nest")
    assert deep.entered == ("done",)
    for leaf, trigger in (
        ("explore.check", "go:explore.found"),
        ("nest.explore.check", "go:nest.explore.found"),
    ):
        assert (
            cc.machine_fire(leaf, trigger, lambda _t: True)
            == cc.fire(leaf, trigger, lambda _t: True).leaf
        )  # type: ignore[union-attr]


def test_escalated_is_reachable_from_every_nonterminal_state_of_the_example() -> None:
    cc = compiled(example())
    for leaf in (
        "intake.think",
        "intake.act",
        "intake.approve",
        "gate",
        "write.act",
        "explore.search.think",
        "explore.check",
        "nest.explore.check",
    ):
        prefix, _ = cc.owner_state(leaf)
        level = cc.nodes[prefix].prefix
        move = cc.fire(leaf, f"go:{level}{ESCALATED}", lambda _t: True)
        assert move is not None
        # A sub-chart's escalated maps (by default) to its parent's escalated.
        assert move.leaf == ESCALATED, (leaf, move.leaf)


def test_a_guard_refusal_leaves_the_state_and_an_unknown_trigger_is_illegal() -> None:
    cc = compiled(example())
    assert cc.fire("write.act", "go:done", lambda _t: False) is None
    assert cc.machine_fire("write.act", "go:done", lambda _t: False) is None
    moved = cc.fire("write.act", "go:done", lambda _t: True)
    assert moved is not None and moved.leaf == "done"
    for fire in (cc.fire, cc.machine_fire):
        with pytest.raises(MachineError):
            fire("write.act", "go:explore", lambda _t: True)
        with pytest.raises(MachineError):
            fire("done", "go:done", lambda _t: True)


def _only_terminals() -> Chart:
    return Chart("finished", states=(State("done", kind="terminal"),), context=Ctx)


def test_a_subchart_that_starts_finished_is_refused_or_passed_through() -> None:
    try:
        chart = Chart(
            "host",
            states=(
                State("c", kind="chart", chart=_only_terminals, exits={"done": "done"}),
                State("done", kind="terminal"),
            ),
            context=Ctx,
            budget=Budget(max_steps=5),
        )
    except ChartError:
        return  # refusing it at build time is a fine answer
    cc = compiled(chart)
    assert EXIT not in cc.table.get(cc.initial_leaf, {}), cc.initial_leaf
