"""Map states: one instance of a sub-chart per item of a context list, at most
`max_concurrency` running at once, outputs gathered in item order; an empty list, a list
too long, an item that does not fit and a failing instance are each handled, and the log
folds to the run."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    ChartError,
    Edge,
    FunctionModel,
    MemoryStore,
    Reply,
    Request,
    State,
    UndeclaredFieldError,
    call,
    drive,
    reply,
    run_to_end,
    start,
)
from statechart.engine import compiled, replay

pytestmark = pytest.mark.anyio


class Doc(BaseModel):
    document: str
    rubric: str = ""
    verdict: str | None = None


class Desk(BaseModel):
    rubric: str = "be fair"
    documents: list[str] = []
    reviews: list[str | None] = []


def reviewer() -> Chart:
    return Chart(
        "reviewer",
        context=Doc,
        states=(
            State(
                "read", reads=("document", "rubric"), writes=("verdict",), instructions="Review."
            ),
            State("ok", kind="terminal"),
            State("unreadable", kind="terminal", outcome="failure"),
        ),
        edges=(Edge("read", "ok"), Edge("read", "unreadable")),
    )


def desk(
    concurrency: int | None = 2,
    max_items: int = 8,
    first: bool = False,
    join: str = "all",
    budget: Budget | None = None,
) -> Chart:
    review = State(
        "review",
        kind="map",
        over="documents",
        item="document",
        chart=reviewer,
        input={"rubric": "rubric"},
        output={"reviews": "verdict"},
        max_concurrency=concurrency,
        max_items=max_items,
        exits={"done": "done"},
        on_region_failure="failed",
        join=join,  # type: ignore[arg-type]
        budget=budget,
    )
    intake = State("intake", writes=("documents",), instructions="List the documents.")
    return Chart(
        "desk",
        context=Desk,
        budget=Budget(max_steps=200),
        states=(
            *((review,) if first else (intake, review)),
            State("done", kind="terminal"),
            State("failed", kind="terminal", outcome="failure"),
        ),
        edges=() if first else (Edge("intake", "review"),),
    )


def policy(lists: list[list[Any]], bad: str = "") -> FunctionModel:
    """`intake` proposes the lists in turn (a refused one is followed by the next); each
    instance reviews its document (ending `unreadable` for `bad`)."""
    proposals = iter(lists)

    def decide(request: Request) -> Reply:
        if request.state == "intake":
            return reply(call("next_state", target="review", documents=next(proposals)))
        doc = request.context["document"]
        if doc == bad:
            return reply(call("next_state", target="unreadable"))
        verdict = f"{doc}: fine ({request.context['rubric']})"
        return reply(call("next_state", target="ok", verdict=verdict))

    return FunctionModel(decide, spec="reviewers")


async def walk(chart: Chart, model: Any, **context: Any) -> tuple[Any, list[Any], Any]:
    store = MemoryStore()
    first = await start(chart, store=store, model=model, context=context or None)
    end = await run_to_end(chart, first, store=store, model=model)
    events = await store.events(first.run_id)
    assert replay(compiled(chart), first, events) == end  # the log folds to the run
    return end, events, first


class Overlapping:
    """`inner` with each call taking `delay` seconds, counting the calls in flight at once."""

    def __init__(self, inner: FunctionModel, delay: float = 0.02) -> None:
        self.inner, self.spec, self.delay = inner, inner.spec, delay
        self.active = self.most = 0

    async def complete(self, request: Request) -> Reply:
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            await anyio.sleep(self.delay)
            return await self.inner.complete(request)
        finally:
            self.active -= 1


@pytest.mark.parametrize("concurrency", [1, 2, None])
async def test_each_item_is_reviewed_and_gathered_in_order(concurrency: int | None) -> None:
    docs = ["a", "b", "c", "d", "e"]
    model = Overlapping(policy([docs]))
    end, events, _ = await walk(desk(concurrency), model)
    assert end.state == "done"
    assert end.context["reviews"] == [f"{d}: fine (be fair)" for d in docs]
    entered = next(e for e in events if e.target == "review")
    assert sorted(entered.inputs) == [f"review.{i}" for i in range(5)]  # five items, five
    assert entered.inputs["review.3"] == {"document": "d", "rubric": "be fair", "verdict": None}
    assert model.most == (concurrency or 5)  # never more, and all of them used
    assert end.contexts == {} and end.regions == {}


async def test_an_empty_list_joins_at_once_with_nothing_gathered() -> None:
    end, events, _ = await walk(desk(), policy([[]]))
    assert end.state == "done" and end.context["reviews"] == []
    (join,) = [e for e in events if e.trigger == "join"]
    assert join.reason == "no items to map over"


async def test_a_list_too_long_or_of_the_wrong_items_is_refused_to_the_model() -> None:
    too_long = [str(i) for i in range(9)]
    end, events, _ = await walk(desk(max_items=8), policy([too_long, [{"x": 1}], ["a"]]))
    refusals = [e.refused for e in events if e.refused]
    assert "takes at most max_items=8 items; 'documents' holds 9" in refusals[0]
    assert "documents.0: Input should be a valid string" in refusals[1]  # the list's type
    assert end.state == "done" and end.context["reviews"] == ["a: fine (be fair)"]


async def test_a_failing_instance_routes_the_state_and_keeps_what_was_gathered() -> None:
    end, events, _ = await walk(desk(concurrency=1), policy([["a", "b", "c"]], bad="b"))
    assert end.state == "failed"
    (route,) = [e for e in events if e.source == "review"]
    assert route.trigger == "region_failed" and "region 'review.1'" in route.reason
    assert "cancelled: 'review.2'" in route.reason
    assert end.context["reviews"] == ["a: fine (be fair)", None, None]  # in item order


async def test_a_run_may_start_in_a_map_state() -> None:
    end, _, first = await walk(desk(first=True), policy([]), documents=["x", "y"])
    assert set(first.regions) == {"review.0", "review.1"}
    assert end.context["reviews"] == ["x: fine (be fair)", "y: fine (be fair)"]


def test_a_map_state_names_its_list_its_item_and_its_gathering() -> None:
    def chart(**kw: Any) -> Chart:
        base: dict[str, Any] = {
            "kind": "map",
            "over": "documents",
            "item": "document",
            "chart": reviewer,
            "exits": {"done": "done"},
        }
        return Chart(
            "c",
            context=Desk,
            states=(State("review", **{**base, **kw}), State("done", kind="terminal")),
        )

    assert chart().version != chart(max_concurrency=3).version
    with pytest.raises(UndeclaredFieldError, match="over='papers' must name a list field"):
        chart(over="papers")
    with pytest.raises(UndeclaredFieldError, match="item='doc' must name the field of Doc"):
        chart(item="doc")
    with pytest.raises(UndeclaredFieldError, match="output maps 'verdicts' <- 'verdict'"):
        chart(output={"verdicts": "verdict"})
    with pytest.raises(ChartError, match="max_items and max_concurrency must be >= 1"):
        chart(max_concurrency=0)
    with pytest.raises(ChartError, match="leaves by exits="):
        chart(exits={})

    class Strict(BaseModel):
        document: str
        owner: str

    def strict() -> Chart:
        return Chart(
            "strict",
            context=Strict,
            states=(State("read", reads=("document", "owner")), State("ok", kind="terminal")),
            edges=(Edge("read", "ok"),),
        )

    with pytest.raises(UndeclaredFieldError, match=r"requires Strict\.owner"):
        chart(chart=strict)


@given(
    n=st.integers(0, 6),
    concurrency=st.one_of(st.none(), st.integers(1, 4)),
    bad=st.sets(st.integers(0, 5), max_size=2),
    join=st.sampled_from(["all", "first"]),
    calls=st.one_of(st.none(), st.integers(1, 8)),
)
@settings(max_examples=40, deadline=None)
def test_random_maps_never_pass_a_cap_nor_misplace_an_output(
    n: int, concurrency: int | None, bad: set[int], join: str, calls: int | None
) -> None:
    """Random lists, widths, failing items, joins and a model-call cap on the map state:
    no stored step passes the cap, every instance that ended `ok` before the state was
    left has its verdict at its item's index (None elsewhere), and the log folds to the run."""
    docs = [f"d{i}" for i in range(n)]
    failing = {f"d{i}" for i in bad}
    budget = Budget(max_model_calls=calls) if calls is not None else None
    chart = desk(concurrency, first=True, join=join, budget=budget)
    model = Overlapping(_failing(failing), delay=0.002)

    async def go() -> tuple[Any, list[Any], list[Any]]:
        store = MemoryStore()
        first = await start(chart, store=store, model=model, context={"documents": docs})
        steps = [s async for s in drive(chart, first, store=store, model=model)]
        return first, steps, await store.events(first.run_id)

    first, steps, events = anyio.run(go)
    end = steps[-1].run
    assert end.status == "ended", end.reason
    for s in steps:
        spent = s.run.ledger.get("review")
        assert calls is None or spent is None or spent.model_calls <= calls
    leaving = [e for e in events if e.source == "review"]
    if leaving:
        (out,) = leaving
        expected = [
            f"{d}: fine (be fair)" if f"review.{i}.ok" in out.exited else None
            for i, d in enumerate(docs)
        ]
        assert end.context["reviews"] == expected, out  # joined, failed or routed out
    assert replay(compiled(chart), first, events) == end


def _failing(failing: set[str]) -> FunctionModel:
    """Each instance reviews its document, `failing` ones ending `unreadable`."""

    def decide(request: Request) -> Reply:
        doc = request.context["document"]
        if doc in failing:
            return reply(call("next_state", target="unreadable"))
        return reply(call("next_state", target="ok", verdict=f"{doc}: fine (be fair)"))

    return FunctionModel(decide, spec="reviewers")
