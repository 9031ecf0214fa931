"""Random valid nested charts, for the hypothesis tests of compiling and of whole runs.

`charts(options)` builds a chart with sub-charts up to three levels deep; model,
code, approval and terminal states (chart states with or without history=); guarded
and capped edges; budgets on the root, on states and on sub-charts. What differs
between the tests that use it (which guards, tools and handlers a chart gets) comes in
through `ChartOptions`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel

from statechart import ESCALATED, EXHAUSTED, Budget, Chart, Edge, State
from statechart.chart.chart import Guard, Handler
from statechart.chart.tools import Tool


class Ctx(BaseModel):
    count: int = 0
    note: str = ""


FIELDS = tuple(Ctx.model_fields)


class Scoped(BaseModel):
    """The own context of a ported sub-chart: the same field names as `Ctx` (the drawn
    states read and write those), but another type and, at run time, another instance."""

    count: int = 0
    note: str = ""


def _into(ctx: Any) -> Scoped:
    return Scoped(count=ctx.count + 1, note=f"in:{ctx.note}"[:20])


def _back(ctx: Any) -> dict[str, Any]:
    return {"count": ctx.count * 2 % 7, "note": f"out:{ctx.note}"[:20]}


INPUTS: tuple[Any, ...] = (None, {"count": "count"}, {"note": "note", "count": "count"}, _into)
OUTPUTS: tuple[Any, ...] = (
    {"count": "count"},
    {"note": "note"},
    _back,
    {"count": "count", "note": "note"},
)


@dataclass(frozen=True)
class ChartOptions:
    """What a generated chart is made of, beyond its shape.

    - `guards`: draws an edge's guard (None for an unguarded edge).
    - `toolsets`: the tool sets a model state is offered, one drawn per state.
    - `handler`: makes a code state's handler from its targets and the fields it writes.
    - `approval_first`: whether a level may start on an approval state.
    """

    guards: st.SearchStrategy[Guard | None]
    toolsets: Sequence[tuple[Tool, ...]]
    handler: Callable[[Sequence[str], Sequence[str]], Handler]
    approval_first: bool = False
    strict: bool = False
    """Every budget is `strict=True` (its token and cost caps are hard)."""
    ports: bool = False
    """Chart states may run their sub-chart on a context of its own (random mappings)."""


@dataclass(frozen=True)
class Level:
    """A chart factory (sub-charts are built from factories) and its own terminals."""

    build: Callable[[], Chart]
    terminals: tuple[str, ...]


def _budget(draw: st.DrawFn, scale: int, strict: bool = False) -> Budget | None:
    if not draw(st.sampled_from([False, False, True])):
        return None

    def cap(high: int) -> int | None:
        some = draw(st.sampled_from([False, False, True]))
        return draw(st.integers(1, high * scale)) if some else None

    caps = {
        "max_steps": cap(6),
        "max_model_calls": cap(3),
        "max_tool_calls": cap(3),
        "max_tokens": cap(300),
        "max_output_tokens": cap(150),
        "max_cost_micros": cap(300),
    }
    if all(value is None for value in caps.values()):
        return None  # a budget that caps nothing is refused when built
    return Budget(**caps, strict=strict)


@st.composite
def levels(
    draw: st.DrawFn,
    options: ChartOptions,
    depth: int,
    name: str = "root",
    context: type[BaseModel] = Ctx,
) -> Level:
    """One chart level: s0..sN (model, code, approval, chart), then terminals.

    `s{i}` always has a way to `s{i+1}` (or `done`), so every state is reachable.
    Every other way out may go anywhere; a way back (to `s{j}`, j <= i) is capped
    by `max_traversals` on its edge or `max_visits` on its source. Only a spent
    budget's route (`on_exhausted` of a budgeted state, a sub-chart's
    `exhausted` exit) goes forward, since validation refuses routes that loop.
    """
    n = draw(st.integers(1, 3))
    names = [f"s{i}" for i in range(n)]
    terminals = ["done", *(["failed"] if draw(st.booleans()) else [])]
    kinds = ["model", "model", "model", "code", "approval"]
    if depth > 1:
        kinds += ["chart", "chart", "chart"]
    first_kinds = kinds if options.approval_first else [k for k in kinds if k != "approval"]
    states: list[State] = []
    edges: list[Edge] = []
    for i, sname in enumerate(names):
        kind = draw(st.sampled_from(kinds if i else first_kinds))
        nxt = names[i + 1] if i + 1 < n else "done"
        last = i + 1 == n
        ahead = [*names[i + 1 :], *terminals, ESCALATED, EXHAUSTED]
        anywhere = [*names, *terminals, ESCALATED, EXHAUSTED]
        visits: int | None = draw(st.sampled_from([None, None, None, 1, 2]))

        def outlet(pool: list[str] = anywhere, behind: list[str] = names[: i + 1]) -> str:
            """A drawn target; a way back caps the state's visits (validation needs a cap)."""
            nonlocal visits
            target: str = draw(st.sampled_from(pool))
            if target in behind and visits is None:
                visits = draw(st.integers(1, 2))
            return target

        extra: dict[str, Any] = {"budget": _budget(draw, 1, options.strict)}
        budgeted = extra["budget"] is not None or kind == "chart"
        on_exhausted = draw(st.sampled_from(ahead if budgeted else anywhere))
        if kind in ("model", "code"):
            targets = [nxt, *draw(st.lists(st.sampled_from(anywhere), max_size=2))]
            if last and "failed" in terminals:
                targets.append("failed")  # so `failed` is reachable
            targets = list(dict.fromkeys(targets))
            if not set(targets) - {ESCALATED, on_exhausted}:
                on_exhausted = ESCALATED  # keep a way out besides escalation
            for target in targets:
                cap = None
                if target in names[: i + 1] and visits is None:
                    cap = draw(st.integers(1, 2))
                guard = draw(options.guards)
                edges.append(Edge(sname, target, guard=guard, max_traversals=cap))
            extra["writes"] = draw(st.sampled_from([FIELDS, ("count",), ("note",), ()]))
            if kind == "model":
                tools = draw(st.sampled_from(options.toolsets))
                extra["tools"] = tuple(tools)
                extra["reads"] = draw(st.sampled_from([FIELDS, ("count",), ()]))
                extra["max_iterations"] = draw(st.integers(1, 4))
                extra["max_tokens"] = draw(st.none() | st.integers(1, 200))
                if tools and draw(st.booleans()):
                    capped = draw(st.sampled_from(tools)).name
                    extra["max_calls"] = {capped: draw(st.integers(0, 2))}
            else:
                extra["handler"] = options.handler(targets, extra["writes"])
        elif kind == "approval":
            extra["on_approve"] = nxt
            extra["on_reject"] = "failed" if last and "failed" in terminals else outlet()
        else:
            ported = options.ports and draw(st.booleans())
            inner: type[BaseModel] = Scoped if ported else context
            child = draw(levels(options, depth - 1, f"{name}_{sname}", inner))
            if ported:
                extra["input"] = draw(st.sampled_from(INPUTS))
                extra["output"] = draw(st.sampled_from(OUTPUTS))
            exits = {"done": nxt}
            for term in (*child.terminals[1:], ESCALATED, EXHAUSTED):
                if term in child.terminals or draw(st.booleans()):
                    exits[term] = outlet(ahead if term == EXHAUSTED else anywhere)
            if last and "failed" in terminals:
                exits[ESCALATED] = "failed"
            extra["chart"] = child.build
            extra["exits"] = exits
            extra["history"] = draw(st.sampled_from([None, None, "shallow", "deep"]))
        extra["on_exhausted"] = on_exhausted
        states.append(State(sname, kind=kind, max_visits=visits, **extra))
    states.extend(State(t, kind="terminal") for t in terminals)
    if depth == 3:
        root = _budget(draw, 4, options.strict)
        steps = draw(st.sampled_from([40, 30, 25, 20, 15, 10, 5, 3, 1]))
        budget: Budget | None = Budget(max_steps=steps, strict=options.strict).merged(root)
    else:
        budget = _budget(draw, 2, options.strict)
    on_exhausted = draw(st.sampled_from([*terminals, ESCALATED, EXHAUSTED]))

    def build() -> Chart:
        return Chart(
            name,
            states=tuple(states),
            edges=tuple(edges),
            context=context,
            budget=budget,
            on_exhausted=on_exhausted,
        )

    build()  # a chart that does not validate is a bug in this generator: fail loudly
    return Level(build, tuple(terminals))


def charts(options: ChartOptions, depth: int = 3) -> st.SearchStrategy[Chart]:
    """A random valid chart, `depth` levels deep at the most (the root counts as one)."""
    return levels(options, depth).map(lambda level: level.build())
