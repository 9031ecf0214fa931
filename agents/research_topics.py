"""Parallel regions: one question researched from three angles at once, then answered.

    research_topics        (budget: 60 steps)
    ├── scope              model: sharpens the question
    ├── research           parallel, join="all" (budget: 9 tool calls across its regions)
    │   ├── history        chart: angle (own context), ReAct loop: search
    │   ├── economics      chart: angle
    │   └── ecology        chart: angle
    ├── report             model: answers from the three regions' notes
    └── done

Each region runs the same small sub-chart on a context of its own (`input=`/`output=`
ports): its searches run concurrently with the other regions', its notes are written
back when the regions join. A region that gives up (`gave_up`, a failure) routes the
run to `report` anyway, with what the others found. The model is a deterministic
offline stand-in (`demo_model`); pass `--model` for a real one.

    statechart run agents/research_topics.py:chart --input '{"question": "tides"}'
"""

from __future__ import annotations

from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    FunctionModel,
    Reply,
    Request,
    State,
    Usage,
    call,
    reply,
    tool,
)
from statechart.models import register

ANGLES = ("history", "economics", "ecology")


class Desk(BaseModel):
    question: str = ""
    history: str | None = None
    economics: str | None = None
    ecology: str | None = None
    answer: str | None = None


class Angle(BaseModel):
    """A region's own context: the question and what it found."""

    question: str = ""
    notes: str | None = None


@tool(retry="safe", repeatable=True)
def search(query: str) -> str:
    """Search the open web index."""
    return f"3 sources on '{query}'"


def angle(name: str) -> State:
    """The region researching the question from one angle."""

    def make() -> Chart:
        return Chart(
            name,
            context=Angle,
            states=(
                State(
                    "survey",
                    tools=(search,),
                    reads=("question",),
                    writes=("notes",),
                    max_iterations=4,
                    max_calls={"search": 2},
                    instructions=f"Research the question from the {name} angle; take notes.",
                ),
                State("found", kind="terminal"),
                State("gave_up", kind="terminal", outcome="failure"),
            ),
            edges=(Edge("survey", "found"), Edge("survey", "gave_up")),
        )

    return State(
        name, kind="chart", chart=make, input={"question": "question"}, output={name: "notes"}
    )


chart = Chart(
    "research_topics",
    context=Desk,
    budget=Budget(max_steps=60),
    states=(
        State(
            "scope",
            reads=("question",),
            writes=("question",),
            instructions="Restate the question so that it can be researched.",
        ),
        State(
            "research",
            kind="parallel",
            regions=tuple(angle(a) for a in ANGLES),
            join="all",
            exits={"done": "report"},
            on_region_failure="report",
            budget=Budget(max_tool_calls=9),
            on_exhausted="report",
        ),
        State(
            "report",
            reads=("question", *ANGLES),
            writes=("answer",),
            instructions="Answer the question from the notes of each angle.",
        ),
        State("done", kind="terminal"),
    ),
    edges=(Edge("scope", "research"), Edge("report", "done")),
)

USAGE = Usage(input_tokens=150, output_tokens=40, cost_micros=60)


def demo_policy(request: Request) -> Reply:
    """A stand-in for a model: what a sensible one would do in each state."""
    state = request.state.rsplit(".", 1)[-1]
    question = str(request.context.get("question") or "the question")
    if state == "scope":
        return reply(call("next_state", target="research", question=question), usage=USAGE)
    if state == "survey":
        region = request.state.split(".")[1]
        if not any(m.role == "tool" for m in request.transcript):
            return reply(call("search", query=f"{question} {region}"), usage=USAGE)
        notes = f"{region}: {request.transcript[-1].content}"
        return reply(call("next_state", target="found", notes=notes), usage=USAGE)
    found = "; ".join(str(request.context.get(a)) for a in ANGLES)
    return reply(
        call("next_state", target="done", answer=f"From three angles: {found}"), usage=USAGE
    )


def demo_model(spec: str = "demo:research_topics") -> FunctionModel:
    """The offline stand-in model; registered so `resume` can rebuild it from a run."""
    return FunctionModel(demo_policy, spec=spec)


register("demo:research_topics", demo_model)
