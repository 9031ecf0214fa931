"""Both stores keep the Store contract: events, snapshots, transcripts, intents, leases."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from msgspec.structs import replace

from statechart import (
    ConflictError,
    LeaseHeldError,
    LeaseLostError,
    MemoryStore,
    Run,
    RunNotFoundError,
    ScriptedModel,
    SQLiteStore,
    Step,
    Store,
    call,
    reply,
    start,
)
from statechart.engine import compiled
from statechart.engine.replay import replay
from tests.engine.test_advance import chart, finish
from tests.engine.test_human import chart as approval_chart
from tests.support.helpers import run_script
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "memory_objects", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param.startswith("memory"):
        yield MemoryStore(encode=request.param == "memory")
        return
    if request.param == "postgres":
        from statechart.store.postgres import PostgresStore

        if request.getfixturevalue("anyio_backend") != "asyncio":
            pytest.skip("PostgresStore runs on asyncio only (psycopg's async API)")

        with fresh_database() as dsn:
            postgres = PostgresStore(dsn)
            yield postgres
            await postgres.close()
        return
    sqlite = SQLiteStore(tmp_path / "runs.db")
    yield sqlite
    sqlite.close()


async def test_both_stores_are_stores(store: Store) -> None:
    assert isinstance(store, Store)


async def test_transcripts_are_stored_per_visit_and_fingerprints_per_run(store: Store) -> None:
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    research = await store.transcript(end.run_id, 0)
    assert [m.role for m in research] == ["assistant", "tool", "assistant", "tool"]
    assert research[1].content == "kb:q"
    draft_visit = next(s.event.seq for s in steps if s.event.target == "draft.think")
    assert [m.role for m in await store.transcript(end.run_id, draft_visit)] == [
        "assistant",
        "tool",
    ]
    assert len(await store.fingerprints(end.run_id)) == 1
    events = await store.events(end.run_id, after=2)
    assert [e.seq for e in events] == list(range(3, end.seq + 1))
    assert await store.runs(status="ended") == [end]
    assert await store.runs(chart="other") == []
    assert (await store.load(end.run_id)).snapshot == end


async def test_events_round_trip_exactly(store: Store) -> None:
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    assert await store.events(end.run_id) == [s.event for s in steps]
    base = await store.base(end.run_id)
    assert base.seq == 0
    assert replay(compiled(chart()), base, await store.events(end.run_id)) == end


async def test_intents_are_open_until_their_call_completes(store: Store) -> None:
    end, steps, _, _ = await run_script(
        approval_chart(), [reply(call("send_reply", "s1", text="hi"))], store=store
    )
    open_ = await store.intents(end.run_id)
    assert [(i.call.id, i.completed) for i in open_] == [("s1", False)]
    recorded = [s.event for s in steps if s.event.intent is not None]
    assert [(e.intent, e.key) for e in recorded] == [("s1", open_[0].key)]
    assert end.pending[0].key == open_[0].key


async def test_intents_complete_with_the_seq_that_completed_them(store: Store) -> None:
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    (intent,) = await store.intents(end.run_id)
    ran = next(s.event for s in steps if s.event.call is not None and s.event.call.id == "c1")
    assert intent.completed and intent.completed_seq == ran.seq
    assert intent.seq == ran.seq - 1 and intent.state == "research"


async def test_unknown_run_is_a_clear_error(store: Store) -> None:
    with pytest.raises(RunNotFoundError, match="no run missing"):
        await store.load("missing")
    with pytest.raises(RunNotFoundError):
        await store.events("missing")
    with pytest.raises(RunNotFoundError):
        await store.acquire("missing", "me")


async def test_a_stale_append_conflicts_and_changes_nothing(store: Store) -> None:
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    with pytest.raises(ConflictError, match=f"run {end.run_id}"):
        await store.append(steps[2])
    assert (await store.load(end.run_id)).snapshot == end
    assert len(await store.events(end.run_id)) == end.seq


async def test_a_live_lease_excludes_other_holders_until_released(store: Store) -> None:
    end, _, _, _ = await run_script(chart(), [], store=store)
    first = await store.acquire(end.run_id, "a", ttl=30)
    assert not first.took_over
    with pytest.raises(LeaseHeldError, match=f"being driven by {first.holder}"):
        await store.acquire(end.run_id, "b", ttl=30)
    await store.release(first)
    second = await store.acquire(end.run_id, "b", ttl=30)
    assert not second.took_over  # released cleanly: nothing was in flight


async def test_an_unclean_release_or_expiry_is_a_takeover(store: Store) -> None:
    end, _, _, _ = await run_script(chart(), [], store=store)
    first = await store.acquire(end.run_id, "a", ttl=30)
    await store.release(first, clean=False)
    second = await store.acquire(end.run_id, "b", ttl=0.0)  # expires at once
    assert second.took_over and second.previous == first.holder
    assert first.holder.startswith("a#")
    third = await store.acquire(end.run_id, "c", ttl=30)
    assert third.took_over and third.previous == second.holder


async def test_one_name_is_not_one_holder(store: Store) -> None:
    """A restarted worker under its old name must wait like anyone else, then takes over."""
    end, _, _, _ = await run_script(chart(), [], store=store)
    first = await store.acquire(end.run_id, "worker", ttl=30)
    with pytest.raises(LeaseHeldError, match=f"being driven by {first.holder}"):
        await store.acquire(end.run_id, "worker", ttl=30)


async def test_appending_under_a_lost_lease_is_refused(store: Store) -> None:
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    fresh = await start(chart(), store=store, model=ScriptedModel([]))
    mine = await store.acquire(fresh.run_id, "a", ttl=0.0)
    await store.acquire(fresh.run_id, "b", ttl=30)
    model_step = steps[0]
    moved = Step(
        run=replace(model_step.run, run_id=fresh.run_id),
        event=replace(model_step.event, run_id=fresh.run_id),
    )
    with pytest.raises(LeaseLostError, match="lost the lease"):
        await store.append(moved, mine)
    assert (await store.load(fresh.run_id)).snapshot == fresh
    assert await store.events(fresh.run_id) == []


async def test_chart_descriptions_are_kept_per_version(store: Store) -> None:
    c = chart()
    await run_script(c, [], store=store)
    assert await store.chart_description(c.version) == c.describe()
    assert await store.chart_description("nope") is None


def test_memory_store_keeps_runs_as_a_database_would() -> None:
    """MemoryStore keeps run snapshots as JSON, like events and transcripts: a context
    holding a datetime or a tuple loads back as the string and list SQLite would return."""
    at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    run = Run(
        run_id="m",
        chart="c",
        chart_version="v",
        model="scripted",
        state="look.think",
        context={"at": at, "ids": (1, 2)},
    )
    store = MemoryStore()
    anyio.run(store.create, run)
    loaded = anyio.run(store.load, "m").snapshot
    assert loaded.context == {"at": "2024-01-01T00:00:00Z", "ids": [1, 2]}


async def test_a_refused_release_keeps_the_new_holders_snapshot_behind(store: Store) -> None:
    """Driver A's lease expires and B takes the run over and appends (its snapshot held
    behind); A's late release is refused and leaves what B holds alone, so once B
    releases, the run is at rest: its snapshot is the run, with no tail."""
    scratch = MemoryStore()
    _, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=scratch
    )
    run_id = steps[0].event.run_id
    await store.create(await scratch.base(run_id))
    a = await store.acquire(run_id, "a", ttl=0.0)  # expires at once
    await store.append(steps[0], a)
    b = await store.acquire(run_id, "b", ttl=30)
    assert b.took_over
    for step in steps[1:-1]:  # the last one ends the run (a status change writes it)
        await store.append(step, b)
    await store.release(a)  # refused: B holds the lease
    await store.release(b)
    loaded = await store.load(run_id)
    assert loaded.tail == () and loaded.snapshot == steps[-2].run


async def test_a_released_lease_cannot_be_renewed(store: Store) -> None:
    """A lease given back, even uncleanly, stays given back: renewing it is refused (else
    a late renewal would keep out the driver that should take over)."""
    end, _, _, _ = await run_script(chart(), [], store=store)
    lease = await store.acquire(end.run_id, "a", ttl=30)
    await store.renew(lease)
    await store.release(lease, clean=False)
    with pytest.raises(LeaseLostError):
        await store.renew(lease)
    taker = await store.acquire(end.run_id, "b", ttl=30)
    assert taker.took_over and taker.previous == lease.holder


async def test_a_page_lists_runs_newest_first_filtered_with_the_total(store: Store) -> None:
    """The listing a UI pages through: newest first, by status, chart and part of the id,
    each line live from the run's last event (its snapshot may be written behind)."""
    from statechart import Budget, Chart, Edge, ScriptedModel, State, run_to_end, start

    def one(name: str) -> Chart:
        return Chart(
            name,
            budget=Budget(max_steps=5),
            states=(State("work"), State("done", kind="terminal")),
            edges=(Edge("work", "done"),),
        )

    a, b = one("alpha"), one("beta")
    ids = []
    for i in range(7):
        chart_ = a if i % 2 == 0 else b
        run = await start(chart_, store=store, model=ScriptedModel([]), run_id=f"run-{i:02d}")
        ids.append(run.run_id)
        if i in (1, 4):  # two runs driven to the end, one of each chart
            model = ScriptedModel([reply(call("next_state", target="done"))])
            await run_to_end(chart_, run, store=store, model=model)
    everything = await store.page(limit=3)
    assert [s.run_id for s in everything.rows] == ids[::-1][:3] and everything.total == 7
    second = await store.page(limit=3, offset=3)
    assert [s.run_id for s in second.rows] == ids[::-1][3:6]
    assert [s.run_id for s in (await store.page(limit=3, offset=6)).rows] == ["run-00"]
    ended = await store.page(status="ended")
    assert [(s.run_id, s.state, s.seq) for s in ended.rows] == [
        ("run-04", "done", 2),
        ("run-01", "done", 2),
    ]
    assert ended.rows[0].spent.steps == 2 and ended.rows[0].updated_at is not None
    alphas = await store.page(chart="alpha", status="running")
    assert [s.run_id for s in alphas.rows] == ["run-06", "run-02", "run-00"] and alphas.total == 3
    found = await store.page(search="-0")
    assert found.total == 7
    assert [s.run_id for s in (await store.page(search="n-05")).rows] == ["run-05"]
    nothing = await store.page(search="zzz")
    assert nothing.rows == () and nothing.total == 0
    # each line is the summaries() line of the same run
    by_id = {s.run_id: s for s in await store.summaries()}
    assert all(by_id[s.run_id] == s for s in everything.rows + ended.rows)
    from statechart import fork

    child = await fork(b, "run-01", 1, store=store)
    forks = await store.page(parent="run-01")
    assert [s.run_id for s in forks.rows] == [child.run_id] and forks.total == 1
    assert forks.rows[0].parent_run == "run-01"
    assert (await store.page(parent="run-04")).total == 0


async def test_a_seq_a_person_took_refuses_the_holders_append_and_keeps_theirs(
    store: Store,
) -> None:
    """The holder's common append (fenced by its lease alone) is refused when a lease-less
    writer (a person's decision) already took its seq; the person's event stays."""
    source = MemoryStore(encode=False)
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=source
    )
    await store.create(await source.base(end.run_id))
    lease = await store.acquire(end.run_id, "driver", ttl=30)
    await store.append(steps[0], lease)  # the slow path: the store learns the run
    await store.append(steps[1], lease)  # the common append
    theirs = replace(steps[2], event=replace(steps[2].event, reason="a person's decision"))
    await store.append(theirs)  # no lease: a person's event
    with pytest.raises(ConflictError, match=f"run {end.run_id}"):
        await store.append(steps[2], lease)
    events = await store.events(end.run_id)
    assert [e.seq for e in events] == [1, 2, 3]
    assert events[2].reason == "a person's decision"
    await store.append(steps[3], lease)  # the store is not wedged: the next seq goes in
    assert len(await store.events(end.run_id)) == 4


async def test_an_append_that_skips_a_seq_is_refused(store: Store) -> None:
    """The holder's append of a seq past the next one is refused on every store: the log
    stays gapless (the SQLite common append sends only the seq after its last)."""
    source = MemoryStore(encode=False)
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=source
    )
    await store.create(await source.base(end.run_id))
    lease = await store.acquire(end.run_id, "driver", ttl=30)
    await store.append(steps[0], lease)
    await store.append(steps[1], lease)
    with pytest.raises(ConflictError, match="not 3"):
        await store.append(steps[3], lease)
    assert [e.seq for e in await store.events(end.run_id)] == [1, 2]
    await store.append(steps[2], lease)
    assert [e.seq for e in await store.events(end.run_id)] == [1, 2, 3]
