"""Parallel states driven: the regions' calls really overlap, caps around them hold with
calls in flight (strict ones too), an approval waits in one region while the others go
on, cancel ends every region, and a driver that dies is taken over region by region."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statechart import (
    Budget,
    MemoryStore,
    NotWaitingError,
    Request,
    RunError,
    SQLiteStore,
    Usage,
    approve,
    cancel,
    drive,
    reject,
    resume,
    run_to_end,
    start,
    tool,
)
from statechart.engine import compiled, replay
from statechart.records.estimate import input_tokens
from tests.support.parallel import desk, policy

pytestmark = pytest.mark.anyio


async def test_the_regions_calls_run_at_the_same_time() -> None:
    """Three regions' lookups meet at a barrier only three concurrent calls can pass."""
    barrier = threading.Barrier(3, timeout=20)
    met: list[int] = []

    @tool(retry="safe", name="lookup", repeatable=True)
    def lookup_together(query: str) -> str:
        """Look a query up."""
        met.append(barrier.wait())
        return "met"

    chart = desk(names=("web", "papers", "people"), tools=(lookup_together,))
    store, model = MemoryStore(), policy(lookups=1)
    run = await start(chart, store=store, model=model)
    end = await run_to_end(chart, run, store=store, model=model)
    assert sorted(met) == [0, 1, 2]  # a barrier broken by calls one at a time raises
    assert end.state == "done"
    assert [end.context[n] for n in ("web", "papers", "people")] == [
        "web: 1 facts",
        "papers: 1 facts",
        "people: 1 facts",
    ]


def regions_outcome(
    names: tuple[str, ...], exited: tuple[str, ...], lookups: int
) -> dict[str, Any]:
    """What each region must have written once the run left the parallel state through a
    move that exited `exited`: a region that ended kept its notes, the others none."""
    out: dict[str, Any] = {}
    for name in names:
        if f"gather.{name}.found" in exited:
            out[name] = f"{name}: {lookups} facts"
        elif f"gather.{name}.gave_up" in exited:
            out[name] = f"{name}: partial"
        else:
            out[name] = None
    return out


caps = st.one_of(st.none(), st.integers(1, 8))


@given(
    names=st.sampled_from([("web", "papers"), ("web", "papers", "people")]),
    lookups=st.integers(0, 3),
    give_up=st.sets(st.sampled_from(["web", "papers", "people"]), max_size=2),
    join=st.sampled_from(["all", "first"]),
    tool_calls=caps,
    model_calls=caps,
    steps=st.one_of(st.none(), st.integers(2, 25)),
    output_tokens=st.one_of(st.none(), st.integers(40, 600)),
    pause=st.floats(0, 0.003),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_concurrent_regions_never_pass_a_cap_nor_lose_an_output(
    names: tuple[str, ...],
    lookups: int,
    give_up: set[str],
    join: str,
    tool_calls: int | None,
    model_calls: int | None,
    steps: int | None,
    output_tokens: int | None,
    pause: float,
) -> None:
    """Random regions, outcomes and caps around them (the output-token one strict): every
    stored step's ledger stays within each cap, the run ends, what every region wrote
    before the state was left is in the context, and the log folds to the run."""
    capped = (tool_calls, model_calls, steps, output_tokens) != (None,) * 4
    gather = (
        Budget(
            max_tool_calls=tool_calls,
            max_model_calls=model_calls,
            max_steps=steps,
            max_output_tokens=output_tokens,
            strict=output_tokens is not None,
        )
        if capped
        else None
    )

    @tool(retry="safe", name="lookup", repeatable=True)
    def slow_lookup(query: str) -> str:
        """Look a query up."""
        time.sleep(pause)
        return "found"

    def worst_case(request: Request) -> Usage:
        return Usage(input_tokens=input_tokens(request), output_tokens=request.max_tokens or 90)

    chart = desk(join=join, names=names, gather_budget=gather, tools=(slow_lookup,))
    uses: list[Request] = []
    model = policy(lookups=lookups, give_up=frozenset(give_up), before=uses.append)
    priced = _UsageModel(model, worst_case)

    async def go() -> tuple[Any, list[Any], list[Any]]:
        store = MemoryStore()
        first = await start(chart, store=store, model=priced)
        stepped = [s async for s in drive(chart, first, store=store, model=priced)]
        return first, stepped, await store.events(first.run_id)

    first, stepped, events = anyio.run(go)
    end = stepped[-1].run
    assert end.status == "ended", end.reason
    for s in stepped:
        spent = s.run.ledger.get("gather")
        if spent is None:
            continue
        for cap, used in (
            (tool_calls, spent.tool_calls),
            (model_calls, spent.model_calls),
            (steps, spent.steps),
            (output_tokens, spent.output_tokens),
        ):
            assert cap is None or used <= cap, (s.event.seq, spent, gather)
    assert not end.breached
    (leaving,) = [e for e in events if e.source == "gather"]
    for name, wrote in regions_outcome(names, leaving.exited, lookups).items():
        assert end.context[name] == wrote, (name, leaving)
    assert replay(compiled(chart), first, events) == end


class _UsageModel:
    """A model that reports `usage(request)` on every reply of `inner`."""

    def __init__(self, inner: Any, usage: Any) -> None:
        self.inner, self.usage, self.spec = inner, usage, inner.spec

    async def complete(self, request: Request) -> Any:
        from msgspec.structs import replace

        got = await self.inner.complete(request)
        return replace(got, usage=self.usage(request))


async def test_an_approval_waits_in_its_region_while_the_others_go_on(tmp_path: Any) -> None:
    banked: list[str] = []

    @tool(retry="keyed", name="lookup", needs_approval=True)
    def paid_lookup(query: str, idempotency_key: str) -> str:
        """Look a query up in a paid index."""
        banked.append(query)
        return "paid facts"

    chart = desk(names=("web", "papers"), tools=(paid_lookup,))
    store, model = SQLiteStore(tmp_path / "runs.db"), policy(lookups=1)
    first = await start(chart, store=store, model=model)
    run = await run_to_end(chart, first, store=store, model=model)
    assert run.status == "waiting" and run.state == "gather"
    assert {r.status for r in run.regions.values()} == {"waiting"}
    with pytest.raises(RunError, match=r"waits in 2 regions \(gather.web, gather.papers\)"):
        await approve(chart, run.run_id, store=store, by="dana")
    with pytest.raises(NotWaitingError, match=r"region 'gather\.nowhere' is not waiting"):
        await approve(chart, run.run_id, store=store, by="dana", region="gather.nowhere")
    done = await approve(chart, run.run_id, store=store, by="dana", region="gather.web")
    assert done.event.source == "gather.web.search.approve" and done.event.actor == "human"
    assert done.run.regions["gather.web"].status == "running"
    assert done.run.regions["gather.papers"].status == "waiting"
    run = await resume(chart, run.run_id, store=store, model=model)
    assert banked == ["tides web 0"] and run.status == "waiting"  # papers still waits
    assert run.regions["gather.web"].status == "ended"
    await reject(chart, run.run_id, store=store, by="dana", reason="too dear")
    run = await resume(chart, run.run_id, store=store, model=model)
    assert banked == ["tides web 0"]
    assert run.state == "done" and run.context["papers"] == "papers: 1 facts"
    papers = [r for r in model.requests if r.state == "gather.papers.search"]
    assert "too dear" in papers[-1].transcript[-1].content  # the model read why
    shown = [str(m) for m in papers[-1].transcript]
    assert len(shown) == 2 and not any("web" in m for m in shown)  # its own visit alone
    assert replay(compiled(chart), first, await store.events(run.run_id)) == run
    store.close()


async def test_cancel_ends_every_region_and_closes_their_calls() -> None:
    release = threading.Event()
    store = MemoryStore()

    @tool(retry="safe", name="lookup", repeatable=True)
    def stuck(query: str) -> str:
        """Look a query up, slowly."""
        release.wait(10)
        return "late"

    chart = desk(names=("web", "papers"), tools=(stuck,))
    model = policy(lookups=1)
    run = await start(chart, store=store, model=model)
    seen: list[Any] = []

    async def driving() -> None:
        async for s in drive(chart, run, store=store, model=model):
            seen.append(s)

    async with anyio.create_task_group() as tg:
        tg.start_soon(driving)
        for _ in range(200):
            now = (await store.load(run.run_id)).snapshot
            if sum(1 for r in now.regions.values() if r.state.endswith(".act")) == 2:
                break
            await anyio.sleep(0.01)
        record = await cancel(chart, run.run_id, store=store, reason="not needed")
        release.set()
    assert record.run.state == "cancelled" and record.run.regions == {}
    assert {"gather.web.search.act", "gather.papers.search.act"} <= set(record.event.exited)
    events = await store.events(run.run_id)
    assert events[-1].trigger == "cancel"  # the late results were not stored after it


async def test_watched_regions_still_call_at_once_and_every_call_is_told() -> None:
    """With `on=` (the CLI's live view, `watch`), the regions' calls still overlap; each
    call is told as it starts and each step as it is stored."""
    from statechart.records.live import CallStarted

    barrier = threading.Barrier(3, timeout=20)

    @tool(retry="safe", name="lookup", repeatable=True)
    def lookup_together(query: str) -> str:
        """Look a query up."""
        barrier.wait()
        return "met"

    chart = desk(names=("web", "papers", "people"), tools=(lookup_together,))
    store, model = MemoryStore(), policy(lookups=1)
    seen: list[Any] = []
    run = await start(chart, store=store, model=model)
    end = await run_to_end(chart, run, store=store, model=model, on=seen.append)
    assert end.state == "done" and not barrier.broken
    started = [e for e in seen if isinstance(e, CallStarted)]
    assert sorted(e.path for e in started if e.call == "tool") == [
        "gather.papers.search.act",
        "gather.people.search.act",
        "gather.web.search.act",
    ]
    stored = [e for e in seen if hasattr(e, "event")]
    assert [s.event.seq for s in stored] == list(range(1, end.seq + 1))


async def test_the_parallel_states_own_after_edge_interrupts_its_regions() -> None:
    """Both regions wait for an approval nobody gives; an hour later the parallel state's
    own `after=` edge takes the run on, exiting both regions and closing their calls."""
    from statechart import Chart, Edge, State
    from tests.support.parallel import Desk, region

    @tool(retry="keyed", name="lookup", needs_approval=True)
    def paid(query: str, idempotency_key: str) -> str:
        """Look a query up in a paid index."""
        return "paid facts"

    now = [1000.0]
    chart = Chart(
        "late_desk",
        context=Desk,
        budget=Budget(max_steps=40),
        states=(
            State(
                "gather",
                kind="parallel",
                regions=(region("web", tools=(paid,)), region("papers", tools=(paid,))),
                exits={"done": "done"},
            ),
            State("too_late", kind="terminal", outcome="failure"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("gather", "too_late", after=600),),
    )
    store, model = MemoryStore(), policy(lookups=1)
    run = await start(chart, store=store, model=model, clock=lambda: now[0])
    run = await run_to_end(chart, run, store=store, model=model, clock=lambda: now[0])
    assert run.status == "waiting" and run.timers
    now[0] += 3600
    end = await resume(chart, run.run_id, store=store, model=model, clock=lambda: now[0])
    assert end.state == "too_late"
    last = (await store.events(run.run_id))[-1]
    assert last.trigger == "go:too_late" and last.actor == "system"
    assert {"gather.web.search.approve", "gather.papers.search.approve"} <= set(last.exited)
