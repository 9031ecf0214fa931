"""Hard caps (`Budget(strict=True)`): max_tokens lowered to what fits, calls that cannot
fit not made, breaches recorded; a property over random three-level charts."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from statechart import (
    Budget,
    Chart,
    Edge,
    Event,
    FunctionModel,
    MemoryStore,
    Reply,
    Request,
    Run,
    State,
    Usage,
    run_to_end,
    start,
)
from statechart.engine import compiled
from statechart.errors import UnpricedModelError
from statechart.records import estimate
from statechart.records.estimate import Price
from statechart.records.spent import spent_of
from tests.engine.test_properties import GUARDS, TOOLSETS, BoundedStore, World, event_bound
from tests.support.strategies import ChartOptions, charts

PRICE = Price(1_000_000, 2_000_000)
"""One and two micro-dollars per token in and out."""
TOKEN_KINDS = ("input_tokens", "output_tokens", "tokens", "cost_micros")


def one_state(budget: Budget) -> Chart:
    return Chart(
        "c",
        states=(
            State("work", instructions="Work, then finish.", max_iterations=8),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=budget,
    )


async def drive_with(
    chart: Chart, policy: Any, price: Price | None = PRICE
) -> tuple[Run, list[Event], FunctionModel]:
    store, model = MemoryStore(), FunctionModel(policy, price=price)
    run = await run_to_end(
        chart, await start(chart, store=store, model=model), store=store, model=model
    )
    return run, await store.events(run.run_id), model


def honest(request: Request) -> Reply:
    """Uses exactly its estimated input and all of max_tokens: the worst case, never more;
    never leaves, so only the budget ends the run."""
    tokens_in, tokens_out = estimate.input_tokens(request), request.max_tokens or 0
    used = Usage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_micros=PRICE.cost(tokens_in, tokens_out),
    )
    return Reply(content="thinking", usage=used)


@pytest.mark.anyio
async def test_max_tokens_is_lowered_so_the_worst_case_fits_and_no_call_passes_the_cap() -> None:
    cap = 2_000
    end, events, model = await drive_with(
        one_state(Budget(max_steps=40, max_tokens=cap, strict=True)), honest
    )
    spent = end.ledger["root"].tokens
    assert spent <= cap, spent
    first = model.requests[0]
    assert first.max_tokens == cap - estimate.input_tokens(first)
    assert end.state == "escalated" and events[-1].exhausted == "root:tokens"
    # the last call that was not made: its input alone would not have fitted what was left
    assert all(e.breach is None for e in events)


@pytest.mark.anyio
async def test_without_strict_the_same_model_overshoots_by_one_call() -> None:
    cap = 2_000
    end, _, _ = await drive_with(one_state(Budget(max_steps=40, max_tokens=cap)), honest)
    assert end.ledger["root"].tokens > cap


@pytest.mark.anyio
async def test_a_strict_cost_cap_prices_the_worst_case() -> None:
    cap = 3_000
    end, events, model = await drive_with(
        one_state(Budget(max_steps=40, max_cost_micros=cap, strict=True)), honest
    )
    assert end.ledger["root"].cost_micros <= cap
    for request in model.requests:
        assert request.max_tokens is not None
        assert PRICE.cost(estimate.input_tokens(request), request.max_tokens) <= cap
    assert events[-1].exhausted == "root:cost_micros"


@pytest.mark.anyio
async def test_a_strict_cost_cap_on_a_model_with_no_price_is_refused_at_start() -> None:
    chart = one_state(Budget(max_steps=40, max_cost_micros=100, strict=True))
    store = MemoryStore()
    with pytest.raises(
        UnpricedModelError, match=r"level 'root' of chart 'c' has a strict cost cap.*'function'"
    ):
        await start(chart, store=store, model=FunctionModel(honest))
    assert await store.runs() == []


@pytest.mark.anyio
async def test_a_reply_beyond_its_worst_case_is_a_breach_and_no_call_follows() -> None:
    def greedy(request: Request) -> Reply:
        used = Usage(input_tokens=estimate.input_tokens(request) + 50, output_tokens=1)
        return Reply(tool_calls=(), content="thinking", usage=used)

    end, events, model = await drive_with(
        one_state(Budget(max_steps=40, max_tokens=10_000, strict=True)), greedy
    )
    (breach,) = [e for e in events if e.breach is not None]
    assert breach.breach == "root:tokens" and "more than the worst case" in breach.reason
    assert len(model.requests) == 1 and end.breached == {"root": "tokens"}
    assert events[-1].exhausted == "root:tokens" and end.state == "escalated"


@pytest.mark.anyio
async def test_a_reply_without_usage_is_charged_an_estimate_and_marked() -> None:
    def silent(request: Request) -> Reply:
        return Reply(
            content="thinking",
            usage=Usage(input_tokens=7, output_tokens=3, missing=True),
        )

    end, events, _ = await drive_with(one_state(Budget(max_steps=3)), silent)
    assert events[0].usage_missing and events[0].usage.input_tokens == 7
    assert all(e.usage_missing == bool(e.usage.model_calls) for e in events)


# -- the property --------------------------------------------------------------------------------


class Usages:
    """Wraps a drawn reply with drawn usage: within the worst case, or sometimes beyond."""

    def __init__(self, world: World, beyond: bool) -> None:
        self.world, self.beyond = world, beyond
        self.worst: list[tuple[int, int | None, int]] = []

    def __call__(self, request: Request) -> Reply:
        drawn = self.world.reply(request)
        est_in = estimate.input_tokens(request)
        cap = request.max_tokens
        out_cap = cap if cap is not None else 300
        tokens_in = self.world.draw(st.integers(0, est_in), "input within the estimate")
        tokens_out = self.world.draw(st.integers(0, out_cap), "output within max_tokens")
        if self.beyond and self.world.draw(st.sampled_from([False, False, True]), "beyond?"):
            tokens_in += self.world.draw(st.integers(1, 50), "extra input")
        self.worst.append((est_in, cap, tokens_in))
        usage = Usage(
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_micros=PRICE.cost(tokens_in, tokens_out),
        )
        return replace(drawn, usage=usage)


def simulate(
    data: st.DataObject, *, strict: bool, beyond: bool, backend: str
) -> tuple[Chart, Run, list[Event], Usages]:
    world = World(data)
    options = ChartOptions(
        guards=st.sampled_from([None, *GUARDS.values()]),
        toolsets=TOOLSETS,
        handler=world.handler,
        strict=strict,
    )
    chart = data.draw(charts(options), "chart")
    note(chart.describe())
    usages = Usages(world, beyond)
    model = FunctionModel(usages, price=PRICE)
    store = BoundedStore(event_bound(compiled(chart)))

    async def main() -> tuple[Run, list[Event]]:
        run = await start(chart, store=store, model=model, clock=lambda: 0.0)
        end = await run_to_end(chart, run, store=store, model=model, clock=lambda: 0.0)
        return end, await store.events(run.run_id)

    end, events = anyio.run(main, backend=backend)
    note(", ".join(f"{e.trigger}:{e.source}->{e.target} {e.usage.tokens}t" for e in events))
    return chart, end, events, usages


def assert_ledgers_within(
    chart: Chart, snapshots: list[Run], *, slack: bool, events: list[Event]
) -> None:
    cc = compiled(chart)
    largest: dict[tuple[str, str], int] = {}
    for e in events:
        for level in cc.levels_of(e.source) if e.usage.model_calls else ():
            for kind in TOKEN_KINDS:
                key = (level.path, kind)
                largest[key] = max(largest.get(key, 0), spent_of(e.usage, kind))
    for run in snapshots:
        for level in cc.levels.values():
            spent = run.ledger.get(level.path)
            for kind, cap in level.caps.items():
                value = spent_of(spent, kind) if spent else 0
                if kind not in TOKEN_KINDS:
                    continue
                if slack:
                    assert value <= cap or value - largest.get((level.path, kind), 0) < cap
                else:
                    assert value <= cap, (level.path, kind, value, cap)


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@given(data=st.data())
@SETTINGS
def test_strict_levels_never_pass_a_cap(backend: str, data: st.DataObject) -> None:
    chart, end, events, _ = simulate(data, strict=True, beyond=False, backend=backend)
    runs = [end]
    assert all(e.breach is None for e in events)
    assert_ledgers_within(chart, runs, slack=False, events=events)
    replayed = compiled(chart)
    assert replayed is not None


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@given(data=st.data())
@SETTINGS
def test_without_strict_a_cap_is_passed_by_one_call_at_most(
    backend: str, data: st.DataObject
) -> None:
    chart, end, events, _ = simulate(data, strict=False, beyond=False, backend=backend)
    assert_ledgers_within(chart, [end], slack=True, events=events)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@given(data=st.data())
@SETTINGS
def test_usage_beyond_the_worst_case_is_a_breach_and_no_call_follows(
    backend: str, data: st.DataObject
) -> None:
    chart, end, events, usages = simulate(data, strict=True, beyond=True, backend=backend)
    cc = compiled(chart)
    calls = [e for e in events if e.usage.model_calls and e.error is None]  # not outages
    assert len(calls) == len(usages.worst)
    breached: set[str] = set()
    for e in events:
        levels = {level.path for level in cc.levels_of(e.source) if level.strict}
        if e.usage.model_calls or e.usage.tool_calls:
            assert not (levels & breached), f"event {e.seq} started a call in a breached level"
        if e.breach is not None:
            breached |= levels
    for e, (est_in, _cap, tokens_in) in zip(calls, usages.worst, strict=True):
        over = tokens_in > est_in
        has_strict = any(
            level.strict and set(level.caps) & set(TOKEN_KINDS) for level in cc.levels_of(e.source)
        )
        if has_strict:
            assert (e.breach is not None) == over, (e.seq, e.breach, tokens_in, est_in)
    assert set(end.breached) == breached or not breached
