"""The driver: code states, step(), drive() with the store, run_sync, conflicts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    ConflictError,
    Decision,
    Edge,
    EventLoopRunningError,
    Facts,
    LeaseHeldError,
    LeaseLostError,
    MemoryStore,
    ScriptedModel,
    Session,
    SQLiteStore,
    State,
    Store,
    StoreError,
    call,
    drive,
    reply,
    run_sync,
    run_to_end,
    start,
    step,
    tool,
)
from tests.support.durable import FINISH, never_refund, pay_chart, refund_tool
from tests.support.helpers import run_script

pytestmark = pytest.mark.anyio


class Ctx(BaseModel):
    score: int = 0
    verdict: str | None = None


async def review(ctx: Ctx) -> Decision:
    if ctx.score >= 5:
        return Decision("send", {"verdict": "pass"}, reason="score ok")
    return Decision("redo", {"verdict": "fail"})


def passed(f: Facts) -> str | None:
    return None if getattr(f.context, "verdict", None) == "pass" else "review did not pass"


def chart(handler=review, guard=passed) -> Chart:  # type: ignore[no-untyped-def]
    return Chart(
        "c",
        states=(
            State("review", kind="code", handler=handler, writes=("verdict",)),
            State("send", kind="terminal"),
            State("redo", kind="terminal"),
        ),
        edges=(Edge("review", "send", guard=guard), Edge("review", "redo")),
        context=Ctx,
        budget=Budget(max_steps=10),
    )


async def test_code_state_moves_and_patches() -> None:
    end, steps, _, _ = await run_script(chart(), [], {"score": 7})
    assert end.state == "send" and end.context["verdict"] == "pass"
    ev = steps[0].event
    assert ev.actor == "code" and ev.reason == "score ok" and ev.patch == {"verdict": "pass"}
    end, _, _, _ = await run_script(chart(), [], {"score": 1})
    assert end.state == "redo"


async def test_code_state_guard_refusal_escalates_with_the_reason() -> None:
    end, steps, _, _ = await run_script(chart(guard=lambda f: "policy says no"), [], {"score": 9})
    assert end.state == "escalated"
    assert steps[0].event.refused == "edge review->send refused: policy says no"
    assert end.context["verdict"] is None  # the refused patch is not applied


async def test_code_state_errors_escalate_and_keep_the_context() -> None:
    async def boom(ctx: Ctx) -> Decision:
        raise ValueError("db gone")

    async def undeclared(ctx: Ctx) -> Decision:
        return Decision("redo", {"score": 3})

    async def nowhere(ctx: Ctx) -> str:
        return "mars"

    for handler, why in (
        (boom, "raised ValueError: db gone"),
        (undeclared, "wrote score, which it does not declare"),
        (nowhere, "'review' has no edge to 'mars'"),
    ):
        end, steps, _, _ = await run_script(chart(handler=handler), [], {"score": 4})
        assert end.state == "escalated" and why in steps[0].event.reason
        assert end.context == {"score": 4, "verdict": None}


async def test_step_advances_exactly_one_transition_without_storing() -> None:
    c = Chart(
        "s",
        states=(State("a", tools=()), State("done", kind="terminal")),
        edges=(Edge("a", "done"),),
        budget=Budget(max_steps=5),
    )
    store = MemoryStore()
    model = ScriptedModel([reply(call("next_state", target="done"))])
    run = await start(c, store=store, model=model)
    session = Session()
    first = await step(c, run, model=model, session=session)
    assert first is not None and first.run.state == "a.act" and first.run.seq == 1
    assert await store.events(run.run_id) == []
    second = await step(c, first.run, model=model, session=session)
    assert second is not None and second.run.status == "ended"
    assert await step(c, second.run, model=model, session=session) is None


async def test_store_fences_a_stale_writer() -> None:
    c = chart()
    store = MemoryStore()
    model = ScriptedModel([])
    run = await start(c, store=store, model=model, context={"score": 6})
    rec = await step(c, run, model=model, session=Session())
    assert rec is not None
    await store.append(rec)
    with pytest.raises(ConflictError, match="already has event 1"):
        await store.append(rec)
    with pytest.raises(ConflictError, match="already exists"):
        await store.create(run)


def test_run_sync_from_plain_code() -> None:
    end = run_sync(chart(), store=MemoryStore(), model=ScriptedModel([]), context={"score": 8})
    assert end.state == "send"


async def test_run_sync_inside_a_running_loop_says_to_await_instead() -> None:
    store = MemoryStore()
    with pytest.raises(EventLoopRunningError, match=r"chart 'c'.*await run_to_end\("):
        run_sync(chart(), store=store, model=ScriptedModel([]), context={"score": 8})
    assert await store.runs() == []


async def test_run_to_end_returns_the_stored_run_when_nothing_was_left_to_do(db: Path) -> None:
    """`run_to_end` on a run that already ended answers with the stored run, not with the
    caller's stale snapshot."""
    c = pay_chart(never_refund())
    store = SQLiteStore(db)
    model = ScriptedModel([FINISH])
    run = await start(c, store=store, model=model, run_id="r1")
    assert (await run_to_end(c, run, store=store, model=model)).state == "done"
    again = await run_to_end(c, run, store=store, model=ScriptedModel([]))
    assert again == (await store.load("r1")).snapshot, (
        f"run_to_end said the run is {again.status} in '{again.state}'; it ended in 'done'"
    )


# -- the lease heartbeat -------------------------------------------------------------------


@tool(retry="safe")
async def slow_lookup(q: str) -> str:
    """A lookup that takes three times the lease's TTL."""
    await anyio.sleep(0.9)
    return f"found {q}"


def slow_chart() -> Chart:
    return Chart(
        "slow",
        states=(State("work", tools=(slow_lookup,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )


async def test_a_call_longer_than_the_lease_keeps_it_held_by_the_heartbeat(db: Path) -> None:
    """A tool call lasting 3x the 0.3 s TTL: the heartbeat renews the lease meanwhile, so a
    second driver on another connection to the same file is refused the whole time and
    the run finishes with no takeover; once it ended, the lease is free. A drive whose
    lease another process took stops with LeaseLostError at its next renewal or append."""
    store, other = SQLiteStore(db), SQLiteStore(db)

    def steal(run_id: str) -> None:
        other._db.execute("UPDATE runs SET lease_holder='intruder' WHERE run_id=?", (run_id,))

    await heartbeat_holds(store, other, steal)
    store.close()
    other.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # psycopg's async API: asyncio only
async def test_the_heartbeat_holds_the_lease_on_postgres_too(anyio_backend: str) -> None:
    """The same on one PostgreSQL database shared by two stores (two pools)."""
    import psycopg

    from statechart.store.postgres import PostgresStore
    from tests.support.postgres import fresh_database

    with fresh_database() as dsn:
        store, other = PostgresStore(dsn), PostgresStore(dsn)

        def steal(run_id: str) -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("UPDATE runs SET lease_holder='intruder' WHERE run_id=%s", (run_id,))

        await heartbeat_holds(store, other, steal)
        await store.close()
        await other.close()


async def heartbeat_holds(store: Store, other: Store, steal: Callable[[str], None]) -> None:
    """The heartbeat test on `store`, with `other` a second driver's store on the same
    database and `steal` another process writing itself in as a run's lease holder."""
    c = slow_chart()
    model = ScriptedModel([reply(call("slow_lookup", "s1", q="a")), FINISH])
    run = await start(c, store=store, model=model, run_id="r1")
    refused = 0
    ended = anyio.Event()

    async def knock() -> None:
        nonlocal refused
        while not ended.is_set():
            with pytest.raises(LeaseHeldError):
                await other.acquire("r1", "intruder", ttl=0.3)
            refused += 1
            await anyio.sleep(0.1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(knock)
        end = await run_to_end(c, run, store=store, model=model, lease_ttl=0.3)
        ended.set()
    assert end.state == "done" and refused >= 8
    assert "takeover" not in [e.trigger for e in await store.events("r1")]
    lease = await other.acquire("r1", "after", ttl=0.3)  # released at the end
    await other.release(lease)

    model = ScriptedModel([reply(call("slow_lookup", "s2", q="b")), FINISH])
    run = await start(c, store=store, model=model, run_id="r2")
    with pytest.raises(LeaseLostError):
        async with contextlib.aclosing(
            drive(c, run, store=store, model=model, lease_ttl=0.3)
        ) as steps:
            async for record in steps:
                if record.event.trigger == "propose":  # another process takes the run over
                    steal("r2")
    assert [e.trigger for e in await store.events("r2")] == ["propose"]  # nothing after


async def test_a_renewal_that_fails_is_tried_again_and_never_fails_the_drive() -> None:
    """The first renewals raise StoreError (a busy database): the heartbeat tries again a
    little later, the lease stays held through the long call, and the run finishes."""

    class Busy(MemoryStore):
        renewals: ClassVar[list[str]] = []

        async def renew(self, lease: Any) -> None:
            self.renewals.append("busy" if len(self.renewals) < 2 else "ok")
            if self.renewals[-1] == "busy":
                raise StoreError("database is locked")
            await super().renew(lease)

    store, c = Busy(), slow_chart()
    model = ScriptedModel([reply(call("slow_lookup", "s1", q="a")), FINISH])
    run = await start(c, store=store, model=model, run_id="r1")
    end = await run_to_end(c, run, store=store, model=model, lease_ttl=0.3)
    assert end.state == "done"
    assert Busy.renewals[:3] == ["busy", "busy", "ok"]


async def test_drive_to_end_treats_each_raising_as_a_stop_not_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As when iterating `drive()` and leaving the loop by an exception: the run's spans
    close without the drive's failure, and the lease is released clean (resumable at once)."""
    from opentelemetry.sdk.trace import TracerProvider

    from statechart import tracing
    from statechart.runtime.driver import drive_to_end
    from statechart.tracing import spans

    closed: list[tuple[bool, BaseException | None]] = []
    close = tracing.RunTrace.close

    def spy(self: Any, run: Any, failure: BaseException | None) -> None:
        closed.append((self.on, failure))
        close(self, run, failure)

    monkeypatch.setattr(tracing.RunTrace, "close", spy)
    recording = TracerProvider().get_tracer("test")  # records, exports nowhere, not global
    monkeypatch.setattr(spans, "tracer", lambda: recording)
    store, the_chart = MemoryStore(), pay_chart(refund_tool("safe"))
    model = ScriptedModel([reply(call("refund", "c1", order="A")), FINISH])
    run = await start(the_chart, store=store, model=model)

    def stop(record: Any) -> bool:
        raise BrokenPipeError("the listener went away")

    with pytest.raises(BrokenPipeError):
        await drive_to_end(the_chart, run.run_id, store=store, model=model, each=stop)
    assert closed == [(True, None)]  # a recording drive's spans, closed without a failure
    again = await drive_to_end(the_chart, run.run_id, store=store, model=model)
    assert again is not None and again.status == "ended"


class _Loose:
    """A model whose replies are built loosely, as a hand-written adapter might build them."""

    spec = "loose"

    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies

    async def complete(self, request: Any) -> Any:
        return self.replies.pop(0)


async def test_a_loosely_built_reply_is_checked_and_coerced_where_the_model_hands_it_over(
    tmp_path: Path,
) -> None:
    """A `Reply` whose fields a model filled loosely (dicts for calls, lists, numeric text,
    whole floats) is coerced as 0.1's pydantic records coerced it; one that does not fit
    (no content, a call without an id) is a failed model call: the run escalates with the
    field named, and everything stored reads back."""
    from statechart import Reply, ToolCall, Usage
    from tests.engine.test_advance import chart as research_chart
    from tests.engine.test_advance import finish

    loose = Reply(
        tool_calls=[{"id": "c1", "name": "search_kb", "arguments": {"query": "q"}}],  # type: ignore[list-item]
        usage=Usage(input_tokens="12", output_tokens=3.0, cost_micros=5.0),  # type: ignore[arg-type]
    )
    store = SQLiteStore(tmp_path / "runs.db")
    c = research_chart()
    model = _Loose([loose, *finish()])
    run = await start(c, store=store, model=model, context={"ticket": "T-1"})
    end = await run_to_end(c, run, store=store, model=model)
    assert end.state == "done"
    first = (await store.events(run.run_id))[0]
    assert first.calls == (ToolCall(id="c1", name="search_kb", arguments={"query": "q"}),)
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.cost_micros) == (
        12,
        3,
        5,
    )
    for bad, field in (
        (Reply(content=None), "content"),  # type: ignore[arg-type]
        (Reply(tool_calls=(ToolCall(id=None, name="search_kb"),)), "id"),  # type: ignore[arg-type]
    ):
        model = _Loose([bad])
        run = await start(c, store=store, model=model, context={"ticket": "T-1"})
        end = await run_to_end(c, run, store=store, model=model)
        assert end.state == "escalated"
        failed = (await store.events(run.run_id))[-1]
        assert failed.error is not None and field in failed.error
        assert (await store.load(run.run_id)).snapshot.state == "escalated"
    store.close()
