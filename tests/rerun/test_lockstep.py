"""A replay meets the run's whole record: a person's decisions (approve, reject, cancel)
made again, a record that stops unfinished, parallel regions matched region by region;
and says when it cannot replay a run (a fork)."""

from __future__ import annotations

import contextlib

import pytest
from pydantic import BaseModel

import statechart as sc
from statechart.rerun.lockstep import lane_of

pytestmark = pytest.mark.anyio


class Desk(BaseModel):
    question: str = ""
    notes: str | None = None
    a: str | None = None
    b: str | None = None


@sc.tool(retry="keyed", needs_approval=True, name="pay")
def pay(amount: int, idempotency_key: str) -> str:
    """Pay out."""
    return f"paid {amount}"


@sc.tool(retry="safe", name="search", repeatable=True)
def search(query: str) -> str:
    """Search."""
    return f"found {query}"


PAYING = sc.Chart(
    "paying",
    context=Desk,
    budget=sc.Budget(max_steps=20),
    states=(
        sc.State("work", tools=(pay,), writes=("notes",), instructions="Pay 5."),
        sc.State("done", kind="terminal"),
    ),
    edges=(sc.Edge("work", "done"),),
)


def paying_policy(request: sc.Request) -> sc.Reply:
    said = [m for m in request.transcript if m.role == "tool"]
    if not said:
        return sc.reply(sc.call("pay", amount=5))
    return sc.reply(sc.call("next_state", target="done", notes=said[-1].content))


def region(name: str) -> sc.State:
    inner = sc.Chart(
        name,
        context=Desk,
        states=(
            sc.State(
                "look",
                tools=(search,),
                reads=("question",),
                writes=("notes",),
                instructions="Search twice.",
            ),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("look", "done"),),
    )
    return sc.State(
        name,
        kind="chart",
        chart=lambda: inner,
        input={"question": "question"},
        output={name: "notes"},
    )


SEARCHING = region("one").chart().with_budget(sc.Budget(max_steps=20))  # type: ignore[misc]

PARALLEL = sc.Chart(
    "both",
    context=Desk,
    budget=sc.Budget(max_steps=40),
    states=(
        sc.State(
            "gather", kind="parallel", regions=(region("a"), region("b")), exits={"done": "done"}
        ),
        sc.State("done", kind="terminal"),
    ),
)


def searching_policy(request: sc.Request) -> sc.Reply:
    made = sum(1 for m in request.transcript if m.role == "tool")
    if made < 2:
        return sc.reply(sc.call("search", query=f"{request.state} {made}"))
    return sc.reply(sc.call("next_state", target="done", notes=f"{request.state}: {made}"))


async def test_approve_reject_and_cancel_are_made_again() -> None:
    store = sc.MemoryStore()
    model = sc.FunctionModel(paying_policy, spec="paying")
    ids = []
    for decide in ("approve", "reject", "cancel"):
        run = await sc.run_to_end(
            PAYING, await sc.start(PAYING, store=store, model=model), store=store, model=model
        )
        assert run.status == "waiting"
        if decide == "approve":
            await sc.approve(
                PAYING, run.run_id, store=store, by="ann", note="ok", edits={"amount": 4}
            )
        elif decide == "reject":
            await sc.reject(PAYING, run.run_id, store=store, by="bob", reason="too much")
        else:
            await sc.cancel(PAYING, run.run_id, store=store, reason="customer left", by="cy")
        if decide != "cancel":
            run = await sc.resume(PAYING, run.run_id, store=store, model=model)
            assert run.state == "done"
        ids.append(run.run_id)
    report = await sc.replay(PAYING, store=store)
    assert report.counts() == {"agree": 3}, report.table()
    without_approval = PAYING.with_tools("work", sc.tool(retry="keyed", name="pay")(pay.fn))
    changed = await sc.replay(without_approval, ids[:1], store=store)
    (verdict,) = changed.verdicts
    # the call now runs without asking, where the record has it wait for a person
    assert (verdict.outcome, verdict.kind, verdict.seq) == ("diverge", "changed", 2)


async def test_a_record_that_stops_unfinished_agrees_as_far_as_it_goes() -> None:
    store = sc.MemoryStore()
    model = sc.FunctionModel(searching_policy, spec="search")
    run = await sc.start(SEARCHING, store=store, model=model, context={"question": "tides"})
    steps = sc.drive(SEARCHING, run, store=store, model=model)
    async with contextlib.aclosing(steps):
        async for record in steps:
            if record.event.seq >= 3:
                break
    (verdict,) = (await sc.replay(SEARCHING, store=store)).verdicts
    assert verdict.outcome == "agree" and verdict.agreed == 3, verdict
    assert "still unfinished" in verdict.detail


async def test_parallel_regions_are_matched_region_by_region() -> None:
    store = sc.MemoryStore()
    model = sc.FunctionModel(searching_policy, spec="search")
    for _ in range(3):
        run = await sc.start(PARALLEL, store=store, model=model, context={"question": "tides"})
        run = await sc.run_to_end(PARALLEL, run, store=store, model=model)
        assert run.state == "done" and run.context["a"] == "gather.a.look: 2"
    report = await sc.replay(PARALLEL, store=store)
    assert report.counts() == {"agree": 3}, report.table()
    capped = PARALLEL.with_budget(sc.Budget(max_steps=40, max_tool_calls=3))
    kinds = {v.kind for v in (await sc.replay(capped, store=store)).verdicts}
    assert kinds == {"budget_exhausted"}
    assert lane_of("gather.a.look.think", ("gather",)) == "gather.a"
    assert lane_of("done", ("gather",)) is None


async def test_a_fork_cannot_be_said_and_its_parent_agrees() -> None:
    store = sc.MemoryStore()
    model = sc.FunctionModel(searching_policy, spec="search")
    run = await sc.start(PARALLEL, store=store, model=model, context={"question": "q"})
    run = await sc.run_to_end(PARALLEL, run, store=store, model=model)
    forked = await sc.fork(PARALLEL, run.run_id, 2, store=store)
    report = await sc.replay(PARALLEL, store=store)
    outcome = {v.run_id: (v.outcome, v.detail) for v in report.verdicts}
    assert outcome[run.run_id][0] == "agree"
    assert outcome[forked.run_id][0] == "cannot_say"
    assert "fork" in outcome[forked.run_id][1] and report.ok
    assert report.counts() == {"agree": 1, "cannot_say": 1}


FLAKY: list[str] = []


@sc.tool(
    retry="safe", repeatable=True, name="flaky", retries=sc.Retry(attempts=2, initial=0, jitter=0)
)
def flaky(query: str) -> str:
    """Fails the first time it is called, whoever calls it."""
    FLAKY.append(query)
    if len(FLAKY) == 1:
        raise ConnectionError("first call fails")
    return f"found {query}"


def same_call(name: str) -> sc.State:
    inner = sc.Chart(
        name,
        context=Desk,
        states=(
            sc.State("look", tools=(flaky,), writes=("notes",), instructions="Look once."),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("look", "done"),),
    )
    return sc.State(name, kind="chart", chart=lambda: inner, input={}, output={name: "notes"})


def same_policy(request: sc.Request) -> sc.Reply:
    if not any(m.role == "tool" and "found" in m.content for m in request.transcript):
        return sc.reply(sc.call("flaky", query="tides"))  # both regions: the same call
    return sc.reply(sc.call("next_state", target="done", notes=request.state))


async def test_two_regions_making_the_same_call_get_their_own_results() -> None:
    chart = sc.Chart(
        "same",
        context=Desk,
        budget=sc.Budget(max_steps=40),
        states=(
            sc.State(
                "gather",
                kind="parallel",
                regions=(same_call("a"), same_call("b")),
                exits={"done": "done"},
            ),
            sc.State("done", kind="terminal"),
        ),
    )
    store = sc.MemoryStore()
    model = sc.FunctionModel(same_policy, spec="same")
    for _ in range(3):
        FLAKY.clear()
        run = await sc.start(chart, store=store, model=model)
        run = await sc.run_to_end(chart, run, store=store, model=model, max_sleep=5)
        assert run.state == "done" and len(FLAKY) == 3  # one region's call failed once
    FLAKY.clear()
    report = await sc.replay(chart, store=store)
    assert report.counts() == {"agree": 3}, report.table()
    assert FLAKY == []
