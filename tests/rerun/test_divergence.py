"""Each kind of divergence, produced by a small change to a chart and reported with the
right kind, at the right step, in the right state."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, BaseModel

import statechart as sc

pytestmark = pytest.mark.anyio

CALLS: list[str] = []


class Ticket(BaseModel):
    ticket_id: str = ""
    summary: str | None = None
    checked: bool = False


@sc.tool(retry="safe", name="lookup")
def lookup(ticket_id: str) -> str:
    """Look a ticket up."""
    CALLS.append(ticket_id)
    return f"ticket {ticket_id}: double charge"


@sc.tool(retry="safe", name="lookup")
def lookup_v2(ticket_id: Annotated[str, AfterValidator(str.lower)]) -> str:
    """Look a ticket up (a new version that normalises its argument)."""
    CALLS.append(ticket_id)
    return f"ticket {ticket_id}"


@sc.tool(retry="safe", name="lookup")
def lookup_numbered(ticket_id: int) -> str:
    """Look a ticket up by number (the argument's type changed)."""
    CALLS.append(str(ticket_id))
    return "ticket"


async def check(ctx: Ticket) -> sc.Decision:
    return sc.Decision("done", {"checked": True}, reason="fine")


async def check_again(ctx: Ticket) -> sc.Decision:
    return sc.Decision("intake", {"checked": False}, reason="look again")


def chart(**changes: Any) -> sc.Chart:
    """The chart the runs were recorded with; `changes` swap parts of it."""
    intake = sc.State(
        changes.get("intake_name", "intake"),
        tools=(changes.get("tool", lookup),),
        reads=("ticket_id",),
        writes=("summary",),
        max_calls=changes.get("max_calls", {}),
        instructions="Look the ticket up, then summarise it.",
    )
    review = changes.get("review") or sc.State(
        "review", kind="code", handler=check, writes=("checked",)
    )
    name = intake.name
    return sc.Chart(
        "tickets",
        context=changes.get("context", Ticket),
        budget=changes.get("budget", sc.Budget(max_steps=20)),
        states=(intake, review, sc.State("done", kind="terminal")),
        edges=(
            sc.Edge(name, "review", guard=changes.get("guard")),
            sc.Edge("review", "done"),
            sc.Edge("review", name, max_traversals=1),
        ),
    )


def policy(request: sc.Request) -> sc.Reply:
    if not any(m.role == "tool" for m in request.transcript):
        return sc.reply(sc.call("lookup", ticket_id=request.context["ticket_id"]))
    return sc.reply(sc.call("next_state", target="review", summary="double charge"))


async def recorded() -> tuple[sc.MemoryStore, str]:
    """A store holding one run of the original chart, through intake and review to done."""
    store, original = sc.MemoryStore(), chart()
    model = sc.FunctionModel(policy, spec="policy")
    run = await sc.start(original, store=store, model=model, context={"ticket_id": "T-1"})
    run = await sc.run_to_end(original, run, store=store, model=model)
    assert run.state == "done" and run.seq == 5
    return store, run.run_id


def refuse(facts: sc.Facts) -> str | None:
    return "a second reviewer must sign first"


class Stricter(Ticket):
    customer: str


CHANGES: dict[str, tuple[dict[str, Any], str, int | None, str | None]] = {
    # change: (what changes, the kind reported, the seq and the state where it diverges)
    "tool dropped": (
        {"tool": sc.tool(retry="safe", name="other")(lambda: "x")},
        "call_not_allowed",
        2,
        "intake",
    ),
    "argument type changed": ({"tool": lookup_numbered}, "arguments_refused", 2, "intake"),
    "edge guarded": ({"guard": refuse}, "guard_refused", 4, "intake"),
    "fewer steps": ({"budget": sc.Budget(max_steps=3)}, "budget_exhausted", 4, "intake"),
    "call capped": ({"max_calls": {"lookup": 0}}, "budget_exhausted", 2, "intake"),
    "state renamed": ({"intake_name": "triage"}, "state_missing", 1, "triage"),
    "tool normalises its arguments": ({"tool": lookup_v2}, "needs_tool", 2, "intake"),
    "context grew a field": ({"context": Stricter}, "context_refused", 0, "intake"),
    "code state became a model state": (
        {
            "review": sc.State(
                "review", reads=("summary",), writes=("checked",), instructions="Check."
            )
        },
        "needs_model",
        5,
        "review",
    ),
}


async def test_a_run_replayed_against_its_own_chart_agrees_and_calls_no_tool() -> None:
    store, run_id = await recorded()
    CALLS.clear()
    report = await sc.replay(chart(), store=store)
    assert report.ok and report.counts() == {"agree": 1}
    (verdict,) = report.verdicts
    assert (verdict.run_id, verdict.outcome, verdict.agreed) == (run_id, "agree", 5)
    assert CALLS == []


@pytest.mark.parametrize("change", list(CHANGES))
async def test_each_change_is_reported_with_its_kind_and_step(change: str) -> None:
    store, run_id = await recorded()
    what, kind, seq, state = CHANGES[change]
    CALLS.clear()
    report = await sc.replay(chart(**what), store=store)
    (verdict,) = report.verdicts
    assert (verdict.outcome, verdict.kind, verdict.seq, verdict.state) == (
        "diverge",
        kind,
        seq,
        state,
    ), verdict.detail
    assert verdict.run_id == run_id and not report.ok
    assert verdict.agreed == (seq - 1 if seq else 0)
    assert report.counts() == {f"diverge:{kind}": 1}
    assert CALLS == []  # no tool ran, whatever the chart


async def test_a_changed_handler_diverges_only_when_handlers_run_again() -> None:
    store, _ = await recorded()
    review = sc.State("review", kind="code", handler=check_again, writes=("checked",))
    changed = chart(review=review)
    (served,) = (await sc.replay(changed, store=store)).verdicts
    assert served.outcome == "agree"  # its recorded decision is served: the handler never ran
    (ran,) = (await sc.replay(changed, store=store, run_handlers=True)).verdicts
    assert (ran.outcome, ran.kind, ran.seq, ran.state) == ("diverge", "changed", 5, "review")
    assert "review -> intake.think" in ran.detail and "review -> done" in ran.detail


async def test_a_rename_given_as_a_mapping_agrees() -> None:
    store, _ = await recorded()
    renamed = chart(intake_name="triage")
    (missing,) = (await sc.replay(renamed, store=store)).verdicts
    assert "'intake'" in missing.detail and "renames=" in missing.detail
    report = await sc.replay(renamed, store=store, renames={"intake": "triage"})
    assert report.counts() == {"agree": 1}


async def test_the_report_reads_as_a_table_and_as_json() -> None:
    store, run_id = await recorded()
    report = await sc.replay(chart(guard=refuse), store=store)
    table = report.table()
    assert "diverge:guard_refused" in table and run_id in table
    assert "a second reviewer must sign first" in table
    import json

    doc = json.loads(report.json())
    assert doc["ok"] is False and doc["counts"] == {"diverge:guard_refused": 1}
    assert doc["verdicts"][0]["seq"] == 4 and doc["verdicts"][0]["kind"] == "guard_refused"
