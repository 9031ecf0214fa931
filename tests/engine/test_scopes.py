"""Sub-charts with their own context: input and output ports, the same child twice, at two
levels of two agents, what a failing child hands back, and replay without mappings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    FieldTypeError,
    MemoryStore,
    Run,
    ScriptedModel,
    State,
    UndeclaredFieldError,
    call,
    reply,
    run_to_end,
    start,
)
from statechart.engine import compiled, replay

pytestmark = pytest.mark.anyio


class Inquiry(BaseModel):
    """The research child's own context: shares no field with any parent below."""

    topic: str
    findings: str | None = None
    sources: int = 0


def research() -> Chart:
    return Chart(
        "research",
        states=(
            State(
                "dig",
                reads=("topic",),
                writes=("findings", "sources"),
                instructions="Research the topic.",
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("dig", "done"),),
        context=Inquiry,
        budget=Budget(max_steps=10),
    )


class Ticket(BaseModel):
    ticket_id: str
    customer: str = ""
    about_customer: str | None = None
    about_order: str | None = None
    source_count: int = 0


def support() -> Chart:
    """The research child twice in one parent, with two mappings."""
    return Chart(
        "support",
        states=(
            State(
                "research_customer",
                kind="chart",
                chart=research,
                input={"topic": "customer"},
                output={"about_customer": "findings", "source_count": "sources"},
                exits={"done": "research_order"},
            ),
            State(
                "research_order",
                kind="chart",
                chart=research,
                input={"topic": "ticket_id"},
                output={"about_order": "findings"},
                exits={"done": "done"},
            ),
            State("done", kind="terminal"),
        ),
        context=Ticket,
        budget=Budget(max_steps=30),
    )


def ported(name: str = "look", child: Callable[[], Chart] = research, **ports: Any) -> Chart:
    """A `Ticket` parent hosting `child` in state `name` with `ports`, then `done`."""
    return Chart(
        "parent",
        states=(
            State(name, kind="chart", chart=child, exits={"done": "done"}, **ports),
            State("done", kind="terminal"),
        ),
        context=Ticket,
        budget=Budget(max_steps=10),
    )


def finding(text: str, sources: int = 1) -> Any:
    return reply(call("next_state", target="done", findings=text, sources=sources))


async def drive(
    chart: Chart, replies: list[Any], context: dict[str, Any]
) -> tuple[Run, list[Any], ScriptedModel, MemoryStore]:
    store, model = MemoryStore(), ScriptedModel(replies)
    run = await start(chart, store=store, model=model, context=context)
    end = await run_to_end(chart, run, store=store, model=model)
    return end, await store.events(end.run_id), model, store


async def test_the_same_child_twice_in_one_parent_with_two_mappings() -> None:
    end, events, model, store = await drive(
        support(),
        [finding("a loyal customer", 3), finding("order shipped late")],
        {"ticket_id": "T-9", "customer": "Ada"},
    )
    assert end.state == "done"
    assert end.context == {
        "ticket_id": "T-9",
        "customer": "Ada",
        "about_customer": "a loyal customer",
        "about_order": "order shipped late",
        "source_count": 3,
    }
    assert end.contexts == {}
    first, second = model.requests
    assert (first.state, first.context) == ("research_customer.dig", {"topic": "Ada"})
    assert (second.state, second.context) == ("research_order.dig", {"topic": "T-9"})
    assert end.visits["research_customer.dig"] == 1 and end.visits["research_order.dig"] == 1
    customer, order = end.ledger["research_customer"], end.ledger["research_order"]
    assert customer.model_calls == order.model_calls == 1  # one budget level each
    assert end.ledger["root"].model_calls == 2
    visits = {e.visit for e in events if e.delta}
    assert len(visits) == 2  # two transcripts, one per visit of each research state
    entered = [e for e in events if e.inputs]
    assert [e.inputs for e in entered] == [
        {"research_order": {"topic": "T-9", "findings": None, "sources": 0}}
    ]
    left = [e for e in events if e.outputs]
    assert [e.outputs for e in left] == [
        {"research_customer": {"about_customer": "a loyal customer", "source_count": 3}},
        {"research_order": {"about_order": "order shipped late"}},
    ]
    patched = [e for e in events if e.patch]
    assert [e.scope for e in patched] == ["research_customer", "research_order"]
    cc = compiled(support())
    assert replay(cc, await store.base(end.run_id), events) == end


async def test_while_inside_the_child_the_snapshot_holds_its_own_context() -> None:
    chart = support()
    store, model = MemoryStore(), ScriptedModel([finding("x")])
    run = await start(
        chart, store=store, model=model, context={"ticket_id": "T-1", "customer": "Bo"}
    )
    assert run.contexts == {"research_customer": {"topic": "Bo", "findings": None, "sources": 0}}
    assert "topic" not in run.context


class Case(BaseModel):
    case_id: str
    verdict: str | None = None


class Review(BaseModel):
    """A middle level with its own context, hosting research two levels down."""

    subject: str
    evidence: str | None = None


def review() -> Chart:
    return Chart(
        "review",
        states=(
            State(
                "investigate",
                kind="chart",
                chart=research,
                input={"topic": "subject"},
                output={"evidence": "findings"},
                exits={"done": "decide"},
            ),
            State("decide", kind="code", handler=decide, writes=("evidence",)),
            State("done", kind="terminal"),
        ),
        edges=(Edge("decide", "done"),),
        context=Review,
    )


async def decide(ctx: Review) -> Decision:
    return Decision("done", patch={"evidence": f"{ctx.evidence} (checked)"})


def casework() -> Chart:
    """Another agent: research nested at the second level, under a ported review."""
    return Chart(
        "casework",
        states=(
            State(
                "review",
                kind="chart",
                chart=review,
                input={"subject": "case_id"},
                output={"verdict": "evidence"},
                exits={"done": "done"},
            ),
            State("done", kind="terminal"),
        ),
        context=Case,
        budget=Budget(max_steps=30),
    )


async def test_the_child_nested_two_levels_down_in_another_agent() -> None:
    end, events, model, store = await drive(casework(), [finding("fraud ring")], {"case_id": "C-3"})
    assert end.state == "done"
    assert end.context == {"case_id": "C-3", "verdict": "fraud ring (checked)"}
    (request,) = model.requests
    assert (request.state, request.context) == ("review.investigate.dig", {"topic": "C-3"})
    assert [e.inputs for e in events if e.inputs] == []  # both ported levels entered at start
    assert [list(e.outputs) for e in events if e.outputs] == [["review.investigate"], ["review"]]
    assert replay(compiled(casework()), await store.base(end.run_id), events) == end


async def test_a_child_that_escalates_hands_back_only_what_it_holds() -> None:
    async def give_up(ctx: Inquiry) -> Decision:
        return Decision("escalated", patch={"findings": "partial lead"})

    def flaky() -> Chart:
        return Chart(
            "flaky",
            states=(
                State("try", kind="code", handler=give_up, writes=("findings",)),
                State("done", kind="terminal"),
            ),
            edges=(Edge("try", "done"),),
            context=Inquiry,
        )

    chart = ported(
        "ask",
        flaky,
        input={"topic": "ticket_id"},
        output={"about_order": "findings", "customer": "topic", "source_count": "sources"},
    )
    end, events, _, _ = await drive(
        chart, [], {"ticket_id": "T-5", "customer": "Cy", "source_count": 7}
    )
    assert end.state == "escalated"
    # gathered values come back (findings, topic, sources 0 is a value, not None)
    assert end.context["about_order"] == "partial lead" and end.context["customer"] == "T-5"
    assert end.context["source_count"] == 0
    assert [e.outputs for e in events if e.outputs] == [
        {"ask": {"about_order": "partial lead", "customer": "T-5", "source_count": 0}}
    ]


async def test_a_failing_output_function_refuses_the_move_out_and_loses_nothing() -> None:
    """The move that would leave the child is refused back to the model with the reason;
    when the run then escalates, the exit records the error and writes nothing."""

    def broken(ctx: Inquiry) -> dict[str, Any]:
        raise RuntimeError("mapping broke")

    chart = ported(input={"topic": "ticket_id"}, output=broken)
    end, events, _, _ = await drive(chart, [finding("x")], {"ticket_id": "T-1"})
    why = "the output function of sub-chart state 'look' raised RuntimeError: mapping broke"
    assert [e.refused for e in events if e.refused] == [why]
    assert end.state == "escalated" and end.context["about_order"] is None
    assert str(events[-1].error).endswith(f"; PortError: {why}") and end.contexts == {}
    assert str(events[-1].error).startswith("ModelError")  # why it escalated is kept


async def test_function_ports_convert_between_types() -> None:
    def into(t: Ticket) -> Inquiry:
        return Inquiry(topic=f"{t.customer}/{t.ticket_id}")

    def back(i: Inquiry) -> dict[str, Any]:
        return {"about_customer": (i.findings or "").upper(), "source_count": i.sources * 10}

    chart = ported(input=into, output=back)
    end, _, model, _ = await drive(
        chart, [finding("ok", 2)], {"ticket_id": "T-2", "customer": "Di"}
    )
    assert model.requests[0].context == {"topic": "Di/T-2"}
    assert (end.context["about_customer"], end.context["source_count"]) == ("OK", 20)


@pytest.mark.parametrize(
    ("ports", "message"),
    [
        (
            {"input": {"topic": "nope"}},
            r"state 'look': input maps 'topic' <- 'nope', but Ticket has no field 'nope'",
        ),
        (
            {"input": {"subject": "customer"}},
            r"input maps 'subject' <- 'customer', but Inquiry has no field 'subject'",
        ),
        (
            {"input": {"topic": "source_count"}},
            r"input maps Inquiry.topic \(str\) <- Ticket.source_count \(int\); the types differ",
        ),
        (
            {"input": {"topic": "customer"}, "output": {"source_count": "findings"}},
            r"output maps Ticket.source_count \(int\) <- Inquiry.findings",
        ),
        (
            {"output": {"about_order": "findings"}},
            r"requires Inquiry.topic, which input= does not fill",
        ),
    ],
)
def test_ports_that_do_not_fit_fail_when_the_chart_is_built(
    ports: dict[str, Any], message: str
) -> None:
    error = FieldTypeError if "the types differ" in message or "output maps" in message else None
    with pytest.raises(error or UndeclaredFieldError, match=message):
        ported(**ports)


def test_a_port_type_mismatch_names_both_types_as_written() -> None:
    """A `Literal` (or an optional) is shown as written, not as "Optional"."""

    class Source(BaseModel):
        level: Literal["low", "high"] | None = None

    class Target(BaseModel):
        level: str = ""

    def child() -> Chart:
        return Chart(
            "child",
            context=Target,
            states=(State("x", writes=("level",)), State("done", kind="terminal")),
            edges=(Edge("x", "done"),),
        )

    with pytest.raises(FieldTypeError) as found:
        Chart(
            "parent",
            context=Source,
            budget=Budget(max_steps=5),
            states=(
                State(
                    "sub",
                    kind="chart",
                    chart=child,
                    input={"level": "level"},
                    exits={"done": "done"},
                ),
                State("done", kind="terminal"),
            ),
        )
    assert "Target.level (str) <- Source.level (Optional[Literal['low', 'high']])" in str(
        found.value
    )


def test_a_shared_context_child_still_needs_the_fields_of_the_level_around_it() -> None:
    """Without ports a child shares the context around it; inside a ported child that is
    the ported child's own context, not the root's."""

    class Notes(BaseModel):
        findings: str | None = None

    def notes() -> Chart:
        return Chart(
            "notes",
            states=(
                State("write", writes=("findings",), instructions="Write."),
                State("done", kind="terminal"),
            ),
            edges=(Edge("write", "done"),),
            context=Notes,
        )

    def middle() -> Chart:
        return Chart(
            "middle",
            states=(
                State("n", kind="chart", chart=notes, exits={"done": "done"}),
                State("done", kind="terminal"),
            ),
            context=Inquiry,
        )

    chart = Chart(
        "top",
        states=(
            State(
                "m",
                kind="chart",
                chart=middle,
                input={"topic": "ticket_id"},
                output={"about_order": "findings"},
                exits={"done": "done"},
            ),
            State("done", kind="terminal"),
        ),
        context=Ticket,
        budget=Budget(max_steps=10),
    )
    assert compiled(chart).nodes["m.n.write"].scope == "m"


async def test_fork_inside_a_ported_child_copies_its_context_and_show_prints_every_level() -> None:
    from statechart import fork
    from statechart.io.audit import render

    chart = support()
    end, events, _, store = await drive(
        chart,
        [finding("a loyal customer", 3), finding("late")],
        {"ticket_id": "T-9", "customer": "Ada"},
    )
    inside = next(e.seq for e in events if e.target == "research_order.dig.think")
    child = await fork(chart, end.run_id, inside, store=store)
    assert child.state == "research_order.dig.think"
    assert child.contexts == {"research_order": {"topic": "T-9", "findings": None, "sources": 0}}
    assert child.context["about_customer"] == "a loyal customer"
    shown = render(child, [])
    assert 'context of research_order: {"findings": null, "sources": 0, "topic": "T-9"}' in shown
    assert '"about_customer": "a loyal customer"' in shown.splitlines()[-2]
    model = ScriptedModel([finding("on time")])
    done = await run_to_end(chart, child, store=store, model=model)
    assert (done.state, done.context["about_order"], done.contexts) == ("done", "on time", {})


async def test_each_mapping_runs_once_per_crossing() -> None:
    """The move the model chose was checked (mappings run) before it was taken; taking it
    reuses that result instead of calling the mappings again."""
    calls = {"in": 0, "out": 0}

    def into(t: Ticket) -> Inquiry:
        calls["in"] += 1
        return Inquiry(topic=t.ticket_id)

    def back(i: Inquiry) -> dict[str, Any]:
        calls["out"] += 1
        return {"about_order": i.findings}

    def parent() -> Chart:
        return Chart(
            "parent",
            states=(
                State("first", instructions="Go.", writes=("customer",)),
                State(
                    "look",
                    kind="chart",
                    chart=research,
                    input=into,
                    output=back,
                    exits={"done": "done"},
                ),
                State("done", kind="terminal"),
            ),
            edges=(Edge("first", "look"),),
            context=Ticket,
            budget=Budget(max_steps=20),
        )

    end, events, _, store = await drive(
        parent(),
        [reply(call("next_state", target="look", customer="Ed")), finding("x")],
        {"ticket_id": "T-4"},
    )
    assert end.context["about_order"] == "x" and calls == {"in": 1, "out": 1}
    before = dict(calls)
    assert replay(compiled(parent()), await store.base(end.run_id), events) == end
    assert calls == before  # replay calls no mapping
