"""A replay keeps the record's time and failures: a retried model call at the start of a
visit, a run asleep until a retry (replayed without sleeping), an `after=` edge that fired
right after a slow call, a failure a `Retry(on=...)` matches, a resume's refresh that a
guard reads; and a divergence in one of a map's instances named in that instance."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

import statechart as sc
from statechart.rerun.cassette import failure

pytestmark = pytest.mark.anyio


@sc.tool(retry="safe", repeatable=True)
def search(query: str) -> str:
    """Search."""
    return f"found {query}"


class Flaky:
    """Fails its `fail`-th call (a connection error), leaves for `done` after one search."""

    spec = "flaky"

    def __init__(self, fail: int) -> None:
        self.n, self.fail = 0, fail

    async def complete(self, request: sc.Request) -> sc.Reply:
        self.n += 1
        if request.state == "intake":
            return sc.reply(sc.call("next_state", target="work"))
        if self.n == self.fail:
            raise ConnectionError("model down")
        if not any(m.role == "tool" for m in request.transcript):
            return sc.reply(sc.call("search", query="a"))
        return sc.reply(sc.call("next_state", target="done"))


def retrying(initial: float) -> sc.Chart:
    return sc.Chart(
        "retrying",
        budget=sc.Budget(max_steps=30),
        states=(
            sc.State("intake", instructions="Go to work."),
            sc.State(
                "work",
                tools=(search,),
                instructions="Search once.",
                retries=sc.Retry(attempts=3, initial=initial, jitter=0),
            ),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("intake", "work"), sc.Edge("work", "done")),
    )


async def recorded(chart: sc.Chart, model: Any, **start: Any) -> tuple[sc.MemoryStore, sc.Run]:
    store = sc.MemoryStore()
    run = await sc.start(chart, store=store, model=model, **start)
    return store, await sc.run_to_end(chart, run, store=store, model=model, max_sleep=5)


async def test_a_model_call_retried_at_the_start_of_a_visit_agrees() -> None:
    store, run = await recorded(retrying(0.01), Flaky(fail=2))
    assert run.state == "done"
    assert [e.trigger for e in await store.events(run.run_id)].count("wake") == 1
    assert (await sc.replay(retrying(0.01), store=store)).counts() == {"agree": 1}


async def test_sleeping_is_never_slept_on() -> None:
    store, run = await recorded(retrying(0.01), Flaky(fail=2))
    started = time.monotonic()
    with anyio.fail_after(10):
        (slower,) = (await sc.replay(retrying(3600), store=store)).verdicts
    assert slower.outcome == "agree"  # an hour between attempts changes no decision
    asleep, run = await recorded(retrying(600), Flaky(fail=2))
    assert run.status == "sleeping"  # the record stops asleep, its wake 10 minutes away
    with anyio.fail_after(10):
        (verdict,) = (await sc.replay(retrying(600), store=asleep)).verdicts
    assert verdict.outcome == "agree" and "unfinished" in verdict.detail
    assert time.monotonic() - started < 10


@sc.tool(retry="safe", repeatable=True)
async def slow(query: str) -> str:
    """A slow search."""
    await anyio.sleep(0.3)
    return f"found {query}"


def timed(after: float) -> sc.Chart:
    return sc.Chart(
        "timed",
        budget=sc.Budget(max_steps=30),
        states=(
            sc.State("work", tools=(slow,), instructions="Search."),
            sc.State("late", kind="terminal", outcome="failure"),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"), sc.Edge("work", "late", after=after)),
    )


def searching(request: sc.Request) -> sc.Reply:
    if not any(m.role == "tool" for m in request.transcript):
        return sc.reply(sc.call("slow", query="q"))
    return sc.reply(sc.call("next_state", target="done"))


async def test_a_timer_that_fired_after_a_slow_call_fires_there_again() -> None:
    store, run = await recorded(timed(0.2), sc.FunctionModel(searching, spec="p"))
    assert run.state == "late"  # the call took 0.3 s; the 0.2 s timer fired right after it
    assert (await sc.replay(timed(0.2), store=store)).counts() == {"agree": 1}
    (verdict,) = (await sc.replay(timed(60), store=store)).verdicts
    assert (verdict.outcome, verdict.seq) == ("diverge", 3)  # a minute: the model goes on


RETRY_ON = sc.Retry(attempts=3, initial=0.01, jitter=0, on=(ConnectionError,))
TRIES: list[str] = []


@sc.tool(retry="safe", repeatable=True, retries=RETRY_ON)
def fetch(query: str) -> str:
    """Fetch; the first call fails."""
    TRIES.append(query)
    if len(TRIES) == 1:
        raise ConnectionError("network down")
    return f"found {query}"


async def test_a_failure_keeps_its_class_so_retry_on_matches_it() -> None:
    chart = sc.Chart(
        "fetching",
        budget=sc.Budget(max_steps=30),
        states=(
            sc.State("work", tools=(fetch,), instructions="Fetch."),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"),),
    )

    def policy(request: sc.Request) -> sc.Reply:
        if not any(m.role == "tool" and "found" in m.content for m in request.transcript):
            return sc.reply(sc.call("fetch", query="q"))
        return sc.reply(sc.call("next_state", target="done"))

    TRIES.clear()
    store, run = await recorded(chart, sc.FunctionModel(policy, spec="p"))
    assert run.state == "done" and len(TRIES) == 2
    assert (await sc.replay(chart, store=store)).counts() == {"agree": 1}
    assert len(TRIES) == 2
    rebuilt = failure("ConnectionError: network down")
    assert isinstance(rebuilt, ConnectionError) and str(rebuilt) == "network down"
    timeout = failure("CallTimeoutError: cut off", 2.5)
    assert isinstance(timeout, sc.CallTimeoutError) and timeout.seconds == 2.5
    own = failure("BankDown: closed")
    assert type(own).__name__ == "BankDown" and str(own) == "closed"


class Rate(BaseModel):
    rate: int = 0


@sc.tool(retry="keyed", needs_approval=True)
def refund(order: str, amount: int, idempotency_key: str) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


async def test_a_resume_refresh_a_guard_reads_is_made_again() -> None:
    def refreshed(ctx: Any) -> dict[str, int]:
        return {"rate": 7}

    def rate_known(facts: sc.Facts) -> str | None:
        return None if facts.context.rate == 7 else "the rate was not refreshed"

    chart = sc.Chart(
        "refunds",
        context=Rate,
        budget=sc.Budget(max_steps=10),
        states=(
            sc.State(
                "resolve",
                tools=(refund,),
                writes=("rate",),
                on_resume=refreshed,
                instructions="Refund A-7.",
            ),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("resolve", "done", guard=rate_known),),
    )
    model = sc.ScriptedModel(
        [
            sc.reply(sc.call("refund", order="A-7", amount=20)),
            sc.reply(sc.call("next_state", target="done")),
        ]
    )
    store, run = await recorded(chart, model)
    await sc.approve(chart, run.run_id, store=store, by="dana")
    run = await sc.resume(chart, run.run_id, store=store, model=model)
    assert run.state == "done" and "resume" in [e.trigger for e in await store.events(run.run_id)]
    (verdict,) = (await sc.replay(chart, store=store)).verdicts
    assert verdict.outcome == "agree", verdict


class Batch(BaseModel):
    documents: list[str] = []
    reviews: list[str | None] = []


class Review(BaseModel):
    document: str = ""
    verdict: str | None = None


def batch(guard: Any = None) -> sc.Chart:
    reviewer = sc.Chart(
        "reviewer",
        context=Review,
        states=(
            sc.State("read", reads=("document",), writes=("verdict",), instructions="Read."),
            sc.State("ok", kind="terminal"),
        ),
        edges=(sc.Edge("read", "ok", guard=guard),),
    )
    return sc.Chart(
        "batch",
        context=Batch,
        budget=sc.Budget(max_steps=60),
        states=(
            sc.State(
                "review",
                kind="map",
                over="documents",
                item="document",
                chart=lambda: reviewer,
                output={"reviews": "verdict"},
                max_concurrency=3,
                exits={"done": "done"},
            ),
            sc.State("done", kind="terminal"),
        ),
    )


def reading(request: sc.Request) -> sc.Reply:
    doc = request.context["document"]
    return sc.reply(sc.call("next_state", target="ok", verdict=f"{doc}: ok"))


async def test_a_divergence_in_a_map_instance_is_named_in_that_instance() -> None:
    store, run = await recorded(
        batch(), sc.FunctionModel(reading, spec="p"), context={"documents": ["a", "b", "c"]}
    )
    assert run.state == "done"
    assert (await sc.replay(batch(), store=store)).counts() == {"agree": 1}

    def not_b(facts: sc.Facts) -> str | None:
        return "b is refused" if facts.context.document == "b" else None

    (verdict,) = (await sc.replay(batch(not_b), store=store)).verdicts
    assert (verdict.kind, verdict.state) == ("guard_refused", "review.1.read"), verdict.detail
    events = await store.events(run.run_id)
    assert verdict.seq == next(
        e.seq for e in events if e.source == "review.1.read.act" and e.trigger.startswith("go:")
    )
