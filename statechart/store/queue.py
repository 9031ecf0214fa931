"""The run queue in a PostgreSQL store: which runs a worker may drive, claimed with leases.

A run is claimable when it is `running`, not blocked, due (past its chart-loading
backoff), of a chart version the worker can load, and either ready with no holder
(submitted, approved, rejected, or put back by a draining worker) or held by a lease that
expired (its worker died: no notification comes for that, the poll finds it); or when it
is `sleeping` or `waiting` and its timer is due (a backoff's end, an `after=` edge), with
no live holder. One
transaction claims a batch: `SELECT ... FOR UPDATE SKIP LOCKED` (concurrent workers skip
each other's rows instead of waiting on them), then an `UPDATE` that takes the leases,
like `Store.acquire`, each logged in `leases`. Lease times are the server's clock. See
docs/decisions.md for why plain SQL, not a job queue library.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from statechart.store.base import Lease
from statechart.store.postgres import CHANNEL, NOW, PostgresStore
from statechart.store.process import identity, known_dead
from statechart.store.rows import SEQ_BITS, SEQ_MASK

WAKE = "(snapshot->>'wake')::float8"
"""When a sleeping run's timer is due (the `runs_waking` index is on it)."""
_RUNNABLE = (
    f"((status = 'running' AND NOT blocked AND next_try <= {NOW} AND "
    f"((lease_holder IS NULL AND ready) OR (lease_holder IS NOT NULL AND lease_expires < {NOW})))"
    f" OR (status IN ('sleeping', 'waiting') AND NOT blocked AND next_try <= {NOW} "
    f"AND {WAKE} <= {NOW} AND "
    f"(lease_holder IS NULL OR lease_expires < {NOW})))"
)
_LIVE_SEQ = (
    "GREATEST(r.seq, coalesce((SELECT max(id) FROM event_rows WHERE id BETWEEN "
    f"r.num << {SEQ_BITS} AND (r.num << {SEQ_BITS}) + {SEQ_MASK}) & {SEQ_MASK}, 0))"
)
_PICK = f"""
SELECT num, lease_holder, lease_seq, tries FROM runs
WHERE {_RUNNABLE} AND chart_version = ANY(%(versions)s)
ORDER BY num LIMIT %(limit)s FOR UPDATE SKIP LOCKED
"""
_TAKE = f"""
WITH u AS (
    UPDATE runs r SET
        lease_holder = %(name)s || '#' || substr(md5(random()::text || r.num), 1, 8),
        lease_expires = {NOW} + %(ttl)s, lease_seq = {_LIVE_SEQ},
        lease_process = %(process)s, ready = FALSE
    WHERE r.num = ANY(%(nums)s)
    RETURNING r.run_id, r.lease_holder, r.lease_seq, r.num, r.status, r.seq
), logged AS (
    INSERT INTO leases (run_id, holder, acquired, seq, took_over_from)
    SELECT u.run_id, u.lease_holder, {NOW}, u.lease_seq, p.prev
    FROM u JOIN unnest(%(nums)s::bigint[], %(prevs)s::text[]) AS p(num, prev) ON p.num = u.num
)
SELECT * FROM u
"""
"""Run in the transaction that locked the rows (`_PICK`), as a second statement: under READ
COMMITTED it reads the log afresh, so an append the previous holder committed while the
rows were being picked counts in the seq the lease starts from."""


@dataclass(frozen=True)
class Claim:
    """A lease a worker claimed, and how many times driving its run has failed in a row."""

    lease: Lease
    tries: int


@dataclass(frozen=True)
class Held:
    """A lease on the lease log: who held a run from which seq, and how it ended."""

    holder: str
    acquired: float
    seq: int
    took_over_from: str | None
    released: float | None
    clean: bool | None


class RunQueue:
    """The queue operations of one `PostgresStore` (the workers' side of the store)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def _execute(self, sql: str, args: Any = None) -> list[Any]:
        async with await self.store._connection() as conn:
            cur = await conn.execute(sql, args)
            return list(await cur.fetchall()) if cur.description else []

    async def enqueue(self, run_id: str) -> bool:
        """Mark a running run ready for a worker and wake the workers; False if it is not
        running (waiting or ended: nothing to drive)."""
        found = await self._execute(
            "WITH u AS (UPDATE runs SET ready = TRUE WHERE run_id = %s AND status = 'running' "
            "RETURNING run_id) SELECT pg_notify(%s, run_id) FROM u",
            (run_id, CHANNEL),
        )
        return bool(found)

    async def next_wake(self) -> float | None:
        """When the first timer of a sleeping or waiting run is due (epoch seconds), if one
        is armed: one query on the `runs_waking` index."""
        found = await self._execute(
            f"SELECT min({WAKE}) FROM runs WHERE status IN ('sleeping', 'waiting') AND NOT blocked"
        )
        return float(found[0][0]) if found and found[0][0] is not None else None

    async def pending_versions(self) -> set[str]:
        """The chart versions of claimable runs (whatever chart a worker can load)."""
        rows = await self._execute(f"SELECT DISTINCT chart_version FROM runs WHERE {_RUNNABLE}")
        return {version for (version,) in rows if version is not None}

    async def claim(
        self, name: str, versions: Sequence[str], *, limit: int, ttl: float
    ) -> list[Claim]:
        """Lease up to `limit` claimable runs of `versions`, oldest first, in one
        transaction: lock them (skipping rows other claimers hold), then take them."""
        if limit < 1 or not versions:
            return []
        async with await self.store._connection() as conn, conn.transaction():
            picked = await (
                await conn.execute(_PICK, {"versions": list(versions), "limit": limit})
            ).fetchall()
            if not picked:
                return []
            rows = await (
                await conn.execute(
                    _TAKE,
                    {
                        "nums": [num for num, *_ in picked],
                        "prevs": [prev for _, prev, *_ in picked],
                        "name": name,
                        "ttl": ttl,
                        "process": identity(),
                    },
                )
            ).fetchall()
        before = {num: (prev, mark, tries) for num, prev, mark, tries in picked}
        claims = []
        for run_id, holder, seq, num, status, snapshot_seq in rows:
            previous, mark, tries = before[num]
            self.store._known[run_id] = (num, status, snapshot_seq)
            lease = Lease(
                run_id,
                holder,
                ttl,
                took_over=previous is not None,
                previous=previous,
                previous_seq=seq if previous is not None and mark != -1 else None,
            )
            claims.append(Claim(lease, tries))
        return claims

    async def succeeded(self, run_id: str) -> None:
        """Forget a run's failed tries: a drive of it went through."""
        await self._execute(
            "UPDATE runs SET tries = 0, problem = NULL WHERE run_id = %s AND tries > 0", (run_id,)
        )

    async def abandoned_here(self, versions: Sequence[str]) -> list[str]:
        """Runs of `versions` whose lease is still live but whose holder is a process on
        this machine that is surely dead (taken over at once by `Store.acquire`)."""
        if not versions or not self.store.same_host_takeover:
            return []
        rows = await self._execute(
            "SELECT run_id, lease_process FROM runs WHERE status = 'running' AND NOT blocked "
            f"AND lease_holder IS NOT NULL AND lease_expires >= {NOW} AND chart_version = ANY(%s)",
            (list(versions),),
        )
        return [run_id for run_id, process in rows if known_dead(process)]

    async def defer(
        self, version: str, problem: str, *, max_tries: int, backoff: float
    ) -> list[str]:
        """Record that the chart of `version` failed to load for its due runs: each is tried
        again after `backoff * 2**tries` seconds (at most an hour) and blocked, with the
        error, at its `max_tries`-th failure. The runs blocked by this call."""
        rows = await self._execute(
            f"UPDATE runs SET tries = tries + 1, problem = %(problem)s, "
            f"next_try = {NOW} + least(%(backoff)s * power(2, tries), 3600), "
            f"blocked = tries + 1 >= %(max)s WHERE {_RUNNABLE} AND chart_version = %(version)s "
            "RETURNING run_id, blocked",
            {
                "problem": problem,
                "backoff": backoff,
                "max": max_tries,
                "version": version,
            },
        )
        return [run_id for run_id, blocked in rows if blocked]

    async def retry_later(
        self, run_id: str, problem: str, *, max_tries: int, backoff: float
    ) -> bool:
        """Record that driving a run failed (its model did not build, its resume was
        refused, the store failed): ready again after the backoff, blocked at its
        `max_tries`-th failure in a row. True if this blocked it."""
        rows = await self._execute(
            "UPDATE runs SET tries = tries + 1, problem = %(problem)s, "
            "ready = (status = 'running'), "
            f"next_try = {NOW} + least(%(backoff)s * power(2, tries), 3600), "
            "blocked = tries + 1 >= %(max)s WHERE run_id = %(run)s "
            "AND status IN ('running', 'sleeping', 'waiting') RETURNING blocked",
            {
                "problem": problem,
                "backoff": backoff,
                "max": max_tries,
                "run": run_id,
            },
        )
        return bool(rows and rows[0][0])

    async def unblock(self, run_id: str) -> bool:
        """Clear a run's tries and block and make it ready again (after its chart is fixed)."""
        found = await self._execute(
            "WITH u AS (UPDATE runs SET blocked = FALSE, tries = 0, next_try = 0, "
            "problem = NULL, ready = (status = 'running') WHERE run_id = %s "
            "AND status IN ('running', 'sleeping', 'waiting') "
            "RETURNING run_id) SELECT pg_notify(%s, run_id) FROM u",
            (run_id, CHANNEL),
        )
        return bool(found)

    async def blocked(self, run_id: str) -> tuple[int, str | None, bool]:
        """(tries, last chart-loading error, blocked) of a run."""
        rows = await self._execute(
            "SELECT tries, problem, blocked FROM runs WHERE run_id = %s", (run_id,)
        )
        return (int(rows[0][0]), rows[0][1], bool(rows[0][2])) if rows else (0, None, False)

    async def holders(self, run_id: str) -> list[tuple[int, str | None]]:
        """(seq, lease holder that wrote it) of every event of a run; None for a person's."""
        num = await self.store._num(run_id)
        return [
            (int(seq), holder)
            for seq, holder in await self._execute(
                f"SELECT id & {SEQ_MASK}, holder FROM event_rows WHERE id BETWEEN %s AND %s "
                "ORDER BY id",
                (num << SEQ_BITS, (num << SEQ_BITS) + SEQ_MASK),
            )
        ]

    async def leases(self, run_id: str) -> list[Held]:
        """Every lease taken on a run, in the order taken."""
        rows = await self._execute(
            "SELECT holder, acquired, seq, took_over_from, released, clean FROM leases "
            "WHERE run_id = %s ORDER BY n",
            (run_id,),
        )
        return [Held(*row) for row in rows]


@asynccontextmanager
async def listening(dsn: str, *, name: str = "statechart-worker") -> AsyncIterator[Any]:
    """A dedicated autocommit connection that LISTENs on the queue's channel (use its
    `notifies(timeout=...)`); `application_name` says whose it is."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, application_name=f"{name}-listen"
    )
    try:
        await conn.execute(f"LISTEN {CHANNEL}")
        yield conn
    finally:
        await conn.close()
