"""Deep composition: a workflow whose exploration state hosts a sub-chart, which hosts
another with its own ReAct loop and its own approval; budgets flow across all three.

    workflow            (budget: 80 steps, 20,000 tokens)
    ├── scope           model: writes the question
    ├── explore         chart: investigation (budget: 40 steps, 8 tool calls)
    │   ├── survey      model, ReAct loop: search
    │   ├── sources     chart: acquisition (budget: 3 tool calls)
    │   │   ├── fetch   model, ReAct loop: read_archive, buy_report [needs approval]
    │   │   └── done
    │   └── done
    ├── report          model: writes the answer
    └── done

The model is a deterministic offline stand-in (`demo_model`); pass `--model` for a
real one.

    statechart run agents/deep_research.py:chart --input '{"topic": "refund abuse"}'
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


class Notes(BaseModel):
    topic: str = ""
    question: str | None = None
    findings: str | None = None
    sources: str | None = None
    answer: str | None = None


@tool(retry="safe", repeatable=True)
def search(query: str) -> str:
    """Search the open web index."""
    return f"3 hits for '{query}': two blog posts and an industry report (paywalled)"


@tool(retry="safe")
def read_archive(document: str) -> str:
    """Read a document from the free archive."""
    return f"{document}: refund abuse rose 12% year on year (archive summary)"


@tool(retry="keyed", needs_approval=True)
def buy_report(report: str, idempotency_key: str) -> str:
    """Buy a paywalled report (costs money: a person approves it)."""
    return f"purchased '{report}' (order {idempotency_key[:8]}): full dataset attached"


def acquisition() -> Chart:
    return Chart(
        "acquisition",
        context=Notes,
        budget=Budget(max_tool_calls=3),
        states=(
            State(
                "fetch",
                tools=(read_archive, buy_report),
                reads=("question",),
                writes=("sources",),
                max_iterations=6,
                instructions="Get the primary sources; buy a report only if needed.",
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("fetch", "done"),),
    )


def investigation() -> Chart:
    return Chart(
        "investigation",
        context=Notes,
        budget=Budget(max_steps=40, max_tool_calls=8),
        states=(
            State(
                "survey",
                tools=(search,),
                reads=("question",),
                writes=("findings",),
                max_iterations=5,
                max_calls={"search": 3},
                instructions="Survey what is known; note the findings.",
            ),
            State("sources", kind="chart", chart=acquisition, exits={"done": "done"}),
            State("done", kind="terminal"),
        ),
        edges=(Edge("survey", "sources"),),
    )


chart = Chart(
    "deep_research",
    context=Notes,
    budget=Budget(max_steps=80, max_tokens=20_000),
    states=(
        State(
            "scope",
            reads=("topic",),
            writes=("question",),
            instructions="Turn the topic into one answerable question.",
        ),
        State(
            "explore",
            kind="chart",
            chart=investigation,
            exits={"done": "report"},
            on_exhausted="report",
        ),
        State(
            "report",
            reads=("question", "findings", "sources"),
            writes=("answer",),
            instructions="Answer the question from the findings and sources.",
        ),
        State("done", kind="terminal"),
    ),
    edges=(Edge("scope", "explore"), Edge("report", "done")),
)

USAGE = Usage(input_tokens=200, output_tokens=50, cost_micros=80)


def demo_policy(request: Request) -> Reply:
    """A stand-in for a model: what a sensible one would do in each state."""
    done = {m.tool_call_id for m in request.transcript if m.role == "tool"}
    state = request.state.rsplit(".", 1)[-1]
    if state == "scope":
        topic = request.context.get("topic", "the topic")
        return reply(
            call("next_state", target="explore", question=f"How common is {topic}?"), usage=USAGE
        )
    if state == "survey":
        if "s1" not in done:
            return reply(
                call("search", "s1", query=str(request.context.get("question"))), usage=USAGE
            )
        return reply(
            call("next_state", target="sources", findings="rising, per a report"), usage=USAGE
        )
    if state == "fetch":
        if "a1" not in done:
            return reply(call("read_archive", "a1", document="industry-report-2026"), usage=USAGE)
        if "b1" not in done:
            return reply(call("buy_report", "b1", report="industry-report-2026"), usage=USAGE)
        return reply(
            call("next_state", target="done", sources="archive + purchased report"), usage=USAGE
        )
    return reply(
        call("next_state", target="done", answer="Up 12% a year, per the report."), usage=USAGE
    )


def demo_model(spec: str = "demo:deep_research") -> FunctionModel:
    """The offline stand-in model; registered so `resume` can rebuild it from a run."""
    return FunctionModel(demo_policy, spec=spec)


register("demo:deep_research", demo_model)
