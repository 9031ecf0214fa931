"""The run queue of the PostgreSQL store: what a claim takes, what it skips, what it logs."""

from __future__ import annotations

import anyio
import pytest

from statechart import (
    Budget,
    Chart,
    Edge,
    ScriptedModel,
    State,
    approve,
    call,
    reply,
    run_to_end,
    start,
    tool,
)
from statechart.store.postgres import PostgresStore
from statechart.store.queue import RunQueue, listening

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API runs on asyncio only


def _chart(name: str = "queued") -> Chart:
    return Chart(
        name,
        budget=Budget(max_steps=10),
        states=(State("work", instructions="Work."), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
    )


async def _submitted(pg_store: PostgresStore, chart: Chart, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        run = await start(chart, store=pg_store, model=ScriptedModel([]))
        assert await RunQueue(pg_store).enqueue(run.run_id)
        ids.append(run.run_id)
    return ids


async def test_a_claim_takes_ready_runs_of_the_versions_given_once(pg_store: PostgresStore) -> None:
    chart, other = _chart(), _chart("other")
    ids = await _submitted(pg_store, chart, 3)
    await _submitted(pg_store, other, 1)
    not_ready = await start(chart, store=pg_store, model=ScriptedModel([]))  # `run`, not submit
    queue = RunQueue(pg_store)
    assert await queue.pending_versions() == {chart.version, other.version}
    leases = [c.lease for c in await queue.claim("w1", [chart.version], limit=2, ttl=30)]
    assert [lease.run_id for lease in leases] == ids[:2]  # oldest first, up to the limit
    assert all(lease.holder.startswith("w1#") and not lease.took_over for lease in leases)
    rest = [c.lease for c in await queue.claim("w2", [chart.version], limit=10, ttl=30)]
    assert [lease.run_id for lease in rest] == ids[2:]  # never the claimed, nor the not ready
    assert await queue.claim("w3", [chart.version], limit=10, ttl=30) == []
    assert not_ready.run_id not in {lease.run_id for lease in leases + rest}
    # a claim is a lease like acquire's: a second driver is refused, the lease log has it
    from statechart import LeaseHeldError

    with pytest.raises(LeaseHeldError):
        await pg_store.acquire(ids[0], "cli")
    (held,) = await queue.leases(ids[0])
    assert held.holder == leases[0].holder and held.released is None


async def test_an_expired_lease_is_claimed_as_a_takeover(pg_store: PostgresStore) -> None:
    chart = _chart()
    (run_id,) = await _submitted(pg_store, chart, 1)
    queue = RunQueue(pg_store)
    (first,) = [c.lease for c in await queue.claim("w1", [chart.version], limit=1, ttl=0.2)]
    assert await queue.claim("w2", [chart.version], limit=1, ttl=30) == []  # still live
    await anyio.sleep(0.3)
    (second,) = [c.lease for c in await queue.claim("w2", [chart.version], limit=1, ttl=30)]
    assert second.took_over and second.previous == first.holder and second.previous_seq == 0
    assert [h.took_over_from for h in await queue.leases(run_id)] == [None, first.holder]


async def test_concurrent_claims_split_the_queue(pg_store: PostgresStore) -> None:
    chart = _chart()
    ids = await _submitted(pg_store, chart, 40)
    stores = [PostgresStore(pg_store.dsn) for _ in range(4)]
    got: list[list[str]] = [[] for _ in stores]

    async def claimer(i: int) -> None:
        queue = RunQueue(stores[i])
        while found := await queue.claim(f"w{i}", [chart.version], limit=3, ttl=30):
            got[i] += [c.lease.run_id for c in found]

    async with anyio.create_task_group() as tg:
        for i in range(len(stores)):
            tg.start_soon(claimer, i)
    for s in stores:
        await s.close()
    claimed = [run_id for each in got for run_id in each]
    assert sorted(claimed) == sorted(ids)  # every run once: none twice, none left


async def test_a_claim_skips_a_row_another_transaction_holds(pg_store: PostgresStore) -> None:
    import psycopg

    chart = _chart()
    ids = await _submitted(pg_store, chart, 3)
    async with await psycopg.AsyncConnection.connect(pg_store.dsn) as other:
        await other.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (ids[0],))
        with anyio.fail_after(5):  # not waiting for the other transaction to end
            found = await RunQueue(pg_store).claim("w", [chart.version], limit=3, ttl=30)
        assert [c.lease.run_id for c in found] == ids[1:]
        await other.rollback()
    (last,) = await RunQueue(pg_store).claim("w", [chart.version], limit=3, ttl=30)
    assert last.lease.run_id == ids[0]


async def test_a_takeover_claim_starts_from_the_log_not_the_snapshot(
    pg_store: PostgresStore,
) -> None:
    """A holder appends one step (its snapshot stays behind), then dies: the claim that
    takes over knows the run is at seq 1, so the takeover is judged from there."""
    from statechart.engine import Session
    from statechart.runtime.driver import step

    model = ScriptedModel([reply(call("next_state", target="done"))])
    chart = _chart()
    run = await start(chart, store=pg_store, model=model)
    queue = RunQueue(pg_store)
    await queue.enqueue(run.run_id)
    (first,) = await queue.claim("w1", [chart.version], limit=1, ttl=0.2)
    record = await step(chart, run, model=model, session=Session())
    assert record is not None
    await pg_store.append(record, first.lease)  # one fenced row; the snapshot is behind
    assert (await pg_store.load(run.run_id)).snapshot.seq == 0
    await anyio.sleep(0.3)  # w1 never releases: its lease expires
    (second,) = await queue.claim("w2", [chart.version], limit=1, ttl=30)
    assert second.lease.took_over and second.lease.previous == first.lease.holder
    assert second.lease.previous_seq == 1
    held = await queue.leases(run.run_id)
    assert [(h.holder, h.seq, h.took_over_from) for h in held] == [
        (first.lease.holder, 0, None),
        (second.lease.holder, 1, first.lease.holder),
    ]


async def test_a_decision_notifies_and_readies_the_run(pg_store: PostgresStore) -> None:
    @tool(retry="keyed", needs_approval=True)
    def pay(amount: int, idempotency_key: str) -> str:
        """Pay."""
        return "paid"

    chart = Chart(
        "payer",
        budget=Budget(max_steps=10),
        states=(State("work", tools=(pay,), instructions="Pay."), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
    )
    model = ScriptedModel([reply(call("pay", "p1", amount=3))])
    run = await start(chart, store=pg_store, model=model)
    run = await run_to_end(chart, run, store=pg_store, model=model)
    assert run.status == "waiting"
    queue = RunQueue(pg_store)
    assert not await queue.enqueue(run.run_id)  # waiting: nothing for a worker
    heard: list[str] = []
    async with listening(pg_store.dsn) as conn:
        await approve(chart, run.run_id, store=pg_store, by="dana")
        async for note in conn.notifies(timeout=5, stop_after=1):
            heard.append(note.payload)
    assert heard == [run.run_id]
    (claim,) = await queue.claim("w", [chart.version], limit=5, ttl=30)
    assert claim.lease.run_id == run.run_id and claim.tries == 0
    holders = await queue.holders(run.run_id)
    assert holders[-1] == (run.seq + 1, None)  # the person's event: no lease wrote it
    assert {h for _, h in holders[:-1]} == {(await queue.leases(run.run_id))[0].holder}


async def test_failed_loads_back_off_then_block(pg_store: PostgresStore) -> None:
    chart = _chart()
    (run_id,) = await _submitted(pg_store, chart, 1)
    queue = RunQueue(pg_store)
    assert await queue.defer(chart.version, "LoadError: gone", max_tries=2, backoff=0.3) == []
    tries, problem, blocked = await queue.blocked(run_id)
    assert (tries, problem, blocked) == (1, "LoadError: gone", False)
    assert await queue.pending_versions() == set()  # not due during its backoff
    assert await queue.defer(chart.version, "again", max_tries=2, backoff=0.3) == []
    assert (await queue.blocked(run_id))[:2] == (1, "LoadError: gone")  # not due: untouched
    await anyio.sleep(0.35)
    assert await queue.pending_versions() == {chart.version}
    assert await queue.defer(chart.version, "LoadError: still", max_tries=2, backoff=0.3) == [
        run_id
    ]
    await anyio.sleep(0.7)
    assert await queue.pending_versions() == set()  # blocked: never due again
    (summary,) = await pg_store.summaries()
    assert summary.blocked == "LoadError: still" and summary.status == "running"
    assert await queue.unblock(run_id)
    assert (await queue.blocked(run_id))[2] is False
    (claim,) = await queue.claim("w", [chart.version], limit=1, ttl=30)
    assert claim.lease.run_id == run_id and claim.tries == 0


async def test_a_failed_drive_is_held_back_before_anyone_claims_it_again(
    pg_store: PostgresStore,
) -> None:
    """A worker's release of a run whose drive failed readies it only after a pause (so the
    failure and its backoff are recorded first), and wakes nobody."""
    chart = _chart()
    (run_id,) = await _submitted(pg_store, chart, 1)
    queue = RunQueue(pg_store)
    pg_store.requeue = True
    (claim,) = await queue.claim("w1", [chart.version], limit=1, ttl=30)
    async with listening(pg_store.dsn) as conn:
        await pg_store.release(claim.lease, failed=True)
        heard = [n async for n in conn.notifies(timeout=0.3)]
    assert heard == []
    assert await queue.claim("w2", [chart.version], limit=1, ttl=30) == []  # held back
    assert await queue.retry_later(run_id, "ModelError: x", max_tries=3, backoff=0.1) is False
    assert (await queue.blocked(run_id))[:2] == (1, "ModelError: x")
    await anyio.sleep(0.15)  # the recorded backoff, not the release's pause, now decides
    (again,) = await queue.claim("w3", [chart.version], limit=1, ttl=30)
    assert again.lease.run_id == run_id and again.tries == 1
