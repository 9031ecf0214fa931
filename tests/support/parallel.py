"""A research desk with a parallel state: regions that each look a topic up and take
notes on their own context, joined before the answer is written; and a model policy
that walks it, told per region what to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    FunctionModel,
    Reply,
    Request,
    State,
    Tool,
    Usage,
    call,
    reply,
    tool,
)


class Topic(BaseModel):
    """One region's own context."""

    topic: str = ""
    notes: str | None = None


class Desk(BaseModel):
    """The desk's context: the question, each region's notes, the answer."""

    question: str = "tides"
    web: str | None = None
    papers: str | None = None
    people: str | None = None
    answer: str = ""


LOOKED_UP: list[str] = []
"""Every lookup that ran, in order (a test clears it)."""


@tool(retry="safe", repeatable=True)
def lookup(query: str) -> str:
    """Look a query up."""
    LOOKED_UP.append(query)
    return f"facts about {query}"


def reader(
    name: str, budget: Budget | None = None, tools: tuple[Tool, ...] = (lookup,)
) -> Callable[[], Chart]:
    """A region's chart: look the topic up, then end in `found` or `gave_up` (a failure)."""

    def make() -> Chart:
        return Chart(
            name,
            states=(
                State(
                    "search",
                    instructions=f"Research the topic on the {name}.",
                    tools=tools,
                    reads=("topic",),
                    writes=("notes",),
                    max_iterations=6,
                ),
                State("found", kind="terminal"),
                State("gave_up", kind="terminal", outcome="failure"),
            ),
            edges=(Edge("search", "found"), Edge("search", "gave_up")),
            context=Topic,
            budget=budget,
        )

    return make


def region(name: str, budget: Budget | None = None, tools: tuple[Tool, ...] = (lookup,)) -> State:
    return State(
        name,
        kind="chart",
        chart=reader(name, budget, tools),
        input={"topic": "question"},
        output={name: "notes"},
    )


def desk(
    join: str = "all",
    names: tuple[str, ...] = ("web", "papers"),
    budget: Budget | None = None,
    region_budget: Budget | None = None,
    gather_budget: Budget | None = None,
    tools: tuple[Tool, ...] = (lookup,),
) -> Chart:
    return Chart(
        "desk",
        states=(
            State(
                "gather",
                kind="parallel",
                regions=tuple(region(n, region_budget, tools) for n in names),
                join=join,  # type: ignore[arg-type]
                exits={"done": "write"},
                on_region_failure="failed",
                budget=gather_budget,
            ),
            State("write", instructions="Write the answer.", reads=names, writes=("answer",)),
            State("done", kind="terminal"),
            State("failed", kind="terminal", outcome="failure"),
        ),
        edges=(Edge("write", "done"),),
        context=Desk,
        budget=budget or Budget(max_steps=200),
    )


def policy(
    lookups: int = 1,
    give_up: frozenset[str] = frozenset(),
    usage: Usage | None = None,
    before: Callable[[Request], Any] | None = None,
) -> FunctionModel:
    """Each region looks its topic up `lookups` times, then leaves for `found` with notes
    (or for `gave_up`, the regions in `give_up`); `write` writes what the regions found."""

    def decide(request: Request) -> Reply:
        if before is not None:
            before(request)
        if request.state == "write":
            found = ", ".join(f"{k}={v}" for k, v in sorted(request.context.items()))
            return reply(call("next_state", target="done", answer=found), usage=usage)
        name = request.state.split(".")[1]
        done = sum(1 for m in request.transcript if m.role == "tool")
        if done < lookups:
            query = f"{request.context['topic']} {name} {done}"
            return reply(call("lookup", query=query), usage=usage)
        if name in give_up:
            leave = call("next_state", target="gave_up", notes=f"{name}: partial")
        else:
            leave = call("next_state", target="found", notes=f"{name}: {done} facts")
        return reply(leave, usage=usage)

    return FunctionModel(decide, spec="desk-policy")
