"""The shared durable store: PostgreSQL through psycopg 3 (async) and a psycopg_pool pool.

The same shape as the SQLite store: one row per transition in `event_rows` (keyed
`(run number << 32) | seq`, the same codec as `rows.py`, bodies in JSONB), the runs row
(snapshot, status, lease) written behind, whole snapshots in `bases`. Isolation: READ
COMMITTED, PostgreSQL's default, is enough because every write that must not interleave
locks the run's row first (`SELECT ... FOR UPDATE`): an append, a renewal, an acquisition
and a release of one run are serialised on that row, and the primary key on the event id
fences two appends of one seq. See docs/persistence.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from msgspec.structs import replace

from statechart import failpoints
from statechart.errors import (
    CorruptRowError,
    RunNotFoundError,
    StoreError,
)
from statechart.records.codec import encode
from statechart.records.messages import Message
from statechart.records.run import Event, Intent, Run, Status, Step
from statechart.records.summary import RunPage, RunSummary
from statechart.store.base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_SNAPSHOT_EVERY,
    Lease,
    Loaded,
    lease_holder,
)
from statechart.store.pg_schema import migrate
from statechart.store.process import identity, known_dead
from statechart.store.rows import (
    COLUMNS,
    LAST_EVENT,
    LAST_EVENT_JOIN,
    READ,
    SEQ_MASK,
    event_of,
    event_row,
    intents_of,
    key_of,
    messages_of,
    parse,
    summary_row,
)
from statechart.store.rules import (
    event_exists,
    lease_held,
    lease_lost,
    not_next,
    run_exists,
    written_behind,
)

Params = Sequence[Any] | Mapping[str, Any]
NOW = "extract(epoch FROM clock_timestamp())::float8"
"""The server's clock, in seconds: every lease time is read and written by it, so workers
on machines whose clocks disagree still agree on when a lease expires."""
FAILED_PAUSE = 2.0
"""Seconds a worker's run whose drive failed is held back at release, so the worker can
record the failure (and its backoff) before anyone claims the run again."""
CHANNEL = "statechart_runs"
"""The LISTEN/NOTIFY channel: a run id is sent on it when the run becomes ready to drive
(submitted, approved, rejected) or a person ended it (cancelled)."""
CONNECT_TIMEOUT = 5.0
"""Seconds the first connection of a store (or a worker) may take before it is an error."""
_JSONB = {"messages", "body"}
_COLUMNS = [*(c.strip() for c in COLUMNS.split(",")), "holder"]
_VALUES = ", ".join("%s::jsonb" if c in _JSONB else "%s" for c in _COLUMNS)
_INSERT_EVENT = f"INSERT INTO event_rows ({', '.join(_COLUMNS)}) VALUES ({_VALUES})"
_INSERT_IF_HELD = (
    f"INSERT INTO event_rows ({', '.join(_COLUMNS)}) SELECT {_VALUES} "
    "WHERE EXISTS (SELECT 1 FROM runs WHERE num = %s AND lease_holder = %s FOR SHARE) "
    "AND coalesce((SELECT max(id) FROM event_rows WHERE id BETWEEN %s AND %s), %s) = %s"
)
"""`_INSERT_EVENT` as one statement in its own transaction, when the lease is held (its
row locked against a takeover until the insert commits) and the run's last event is the
one before (values: the row, then number, holder, the run's key range, its snapshot's
key and the previous event's key)."""
_READ = READ.replace("messages, body", "messages::text, body::text")


_SUMMARY = (
    "SELECT r.run_id, r.chart, r.status, r.state, r.seq, r.snapshot->>'reason', "
    "(r.snapshot->>'created_at')::float8, r.snapshot->>'parent_run', "
    "(r.snapshot->'ledger'->'root')::text, (r.snapshot->>'wake')::float8, "
    f"{LAST_EVENT}, "
    "CASE WHEN r.blocked THEN coalesce(r.problem, 'blocked') END "
    f"FROM {{source}} r {LAST_EVENT_JOIN}"
)
"""A listing line per runs row of `source` (its columns, its last event's, why it is
blocked if it is)."""


class PostgresStore:
    """Runs in one PostgreSQL database, shared by every process that opens it.

    Each transition is one transaction appending one event row; the runs row (snapshot,
    status, state) is written behind it: on a status change, every `snapshot_every`
    events and when the lease is released, as in `SQLiteStore`. Call `await close()`
    when done. Needs the `postgres` extra (`pip install 'statechart-agents[postgres]'`) and
    an asyncio event loop (psycopg's async API runs on asyncio only).
    """

    def __init__(
        self,
        dsn: str,
        *,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
        max_connections: int = 4,
        same_host_takeover: bool = True,
    ) -> None:
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError:
            raise StoreError(
                "PostgresStore needs the postgres extra: pip install 'statechart-agents[postgres]'"
            ) from None
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every={snapshot_every}; use 1 or more")
        self.dsn = dsn
        self.snapshot_every = snapshot_every
        self.same_host_takeover = same_host_takeover
        """Take a lease over at once when its holder is a dead process on this machine
        (False: wait for its time-to-live to pass, as from another machine)."""
        self.requeue = False
        """A worker's store: releasing a lease on a run still `running` (a drain, a
        cancelled drive) makes it ready for another worker, in the same transaction."""
        self.queue_created = False
        """`statechart submit`'s store: a new run is ready for a worker when created (and
        the workers are told, in the same transaction)."""
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=max_connections,
            open=False,
            kwargs={"autocommit": True},  # one statement is one transaction; blocks are explicit
        )
        self._opened = False
        self._opening = anyio.Lock()
        self._behind: dict[str, Run] = {}
        """run id -> the run after its last append, when its snapshot was not written"""
        self._known: dict[str, tuple[int, str, int]] = {}
        """run id -> (number, status, snapshot seq) as this store last saw them: the common
        append skips reading the runs row (its WHERE still checks lease and seq)"""

    async def _connection(self) -> Any:
        """A pooled connection's context; the first call opens the pool and migrates."""
        if not self._opened:
            await self.open()
        return self._pool.connection()

    async def open(self) -> None:
        """Connect, open the pool and migrate the schema (the first use does it anyway).

        An unreachable or invalid DSN is one `StoreError` with the server's own reason
        (no such database, connection refused, a bad URI) within `CONNECT_TIMEOUT`
        seconds, not the pool's timeout after its warnings."""
        if self._opened:
            return
        async with self._opening:  # concurrent first calls open it once
            if not self._opened:
                await _reachable(self.dsn)
                await self._pool.open(wait=True)
                async with self._pool.connection() as conn:
                    await migrate(conn)
                self._opened = True

    async def close(self) -> None:
        """Close the pool's connections."""
        if self._opened:
            await self._pool.close()

    # -- writes -----------------------------------------------------------------------------

    async def create(self, run: Run, intents: Sequence[Intent] = ()) -> None:
        import psycopg

        snapshot = encode(run).decode()
        async with await self._connection() as conn:
            try:
                async with conn.transaction():
                    await conn.execute(
                        "INSERT INTO runs (run_id, chart, status, state, seq, snapshot, "
                        "chart_version, ready) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s)",
                        (
                            run.run_id,
                            run.chart,
                            run.status,
                            run.state,
                            run.seq,
                            snapshot,
                            run.chart_version,
                            self.queue_created and run.status == "running",
                        ),
                    )
                    await conn.execute(
                        "INSERT INTO bases (run_id, seq, snapshot) VALUES (%s, %s, %s::jsonb)",
                        (run.run_id, run.seq, snapshot),
                    )
                    for i in intents:
                        await conn.execute(
                            "INSERT INTO intent_rows (run_id, call_id, seq, state, tool, call, "
                            "key) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                            (
                                run.run_id,
                                i.call.id,
                                i.seq,
                                i.state,
                                i.call.name,
                                encode(i.call).decode(),
                                i.key,
                            ),
                        )
                    if self.queue_created:
                        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run.run_id))
            except psycopg.errors.UniqueViolation:
                raise run_exists(run.run_id) from None

    async def append(self, step: Step, lease: Lease | None = None) -> None:
        import psycopg

        event, run = step.event, step.run
        run_id = event.run_id
        known = self._known.get(run_id)
        async with await self._connection() as conn:
            if (
                lease is not None
                and known is not None
                and written_behind(step, lease, known[1], known[2], self.snapshot_every)
            ):  # the common step: the event row alone, one statement, fenced in its WHERE
                num = known[0]
                failpoints.hit("store.append.uncommitted")
                try:
                    cur = await conn.execute(
                        _INSERT_IF_HELD,
                        (
                            *event_row(step, num),
                            lease.holder,
                            num,
                            lease.holder,
                            key_of(num, 0),
                            key_of(num, SEQ_MASK),
                            key_of(num, known[2]),
                            key_of(num, event.seq - 1),
                        ),
                    )
                except psycopg.errors.UniqueViolation:
                    cur = None  # the transaction below says why
                except psycopg.DataError as exc:
                    raise _refused_value(event, exc) from None
                if cur is not None and cur.rowcount == 1:
                    self._behind[run_id] = run
                    return
                # refused: the transaction below says why (or writes it, if only this
                # store's view of the run was stale)
            try:
                async with conn.transaction():
                    num, status, snapshot_seq, holder, seq = await _head(conn, run_id, lock=True)
                    if lease is not None and holder != lease.holder:
                        raise lease_lost(lease, holder)
                    if event.seq != seq + 1:
                        raise not_next(run_id, seq, event.seq)
                    await conn.execute(
                        _INSERT_EVENT, (*event_row(step, num), lease and lease.holder)
                    )
                    behind = written_behind(step, lease, status, snapshot_seq, self.snapshot_every)
                    if not behind:
                        failpoints.hit("store.append.snapshot")
                        await _write_snapshot(
                            conn, num, run, others=lease is None and holder is not None
                        )
                        if step.base:
                            await conn.execute(
                                "INSERT INTO bases (run_id, seq, snapshot) "
                                "VALUES (%s, %s, %s::jsonb)",
                                (run_id, event.seq, encode(run).decode()),
                            )
                    if lease is None:  # a person decided: a worker may drive it on
                        await conn.execute(
                            "UPDATE runs SET ready=%s WHERE num=%s",
                            (run.status == "running", num),
                        )
                        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))
                    failpoints.hit("store.append.uncommitted")
            except psycopg.errors.UniqueViolation:
                raise event_exists(run_id, event.seq) from None
            except psycopg.DataError as exc:
                raise _refused_value(event, exc) from None
        if behind:
            self._behind[run_id] = run
            self._known[run_id] = (num, status, snapshot_seq)
        else:
            self._behind.pop(run_id, None)
            self._known[run_id] = (num, run.status, run.seq)

    async def renew(self, lease: Lease) -> None:
        async with await self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"UPDATE runs SET lease_expires={NOW} + %s WHERE run_id=%s AND lease_holder=%s "
                "AND lease_expires > 0",
                (lease.ttl, lease.run_id, lease.holder),
            )
            if cur.rowcount != 1:
                found = await (
                    await conn.execute(
                        "SELECT lease_holder FROM runs WHERE run_id=%s", (lease.run_id,)
                    )
                ).fetchone()
                raise lease_lost(lease, found[0] if found else None, expired=False)
            failpoints.hit("store.renew.uncommitted")

    async def acquire(self, run_id: str, holder: str, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        async with await self._connection() as conn, conn.transaction():
            found = await (
                await conn.execute(
                    f"SELECT lease_holder, lease_expires, lease_seq, lease_process, {NOW} "
                    "FROM runs WHERE run_id=%s FOR UPDATE",
                    (run_id,),
                )
            ).fetchone()
            if found is None:
                raise RunNotFoundError(f"no run {run_id} in the PostgreSQL store")
            current, expires, last_seq, process, now = found
            dead = self.same_host_takeover and known_dead(process)
            if current is not None and expires > now and not dead:
                raise lease_held(run_id, current, expires - now)
            num, status, snapshot_seq, _, seq = await _head(conn, run_id)
            mine = lease_holder(holder)
            await conn.execute(
                "UPDATE runs SET lease_holder=%s, lease_expires=%s, lease_seq=%s, "
                "lease_process=%s WHERE run_id=%s",
                (mine, now + ttl, seq, identity(), run_id),
            )
            await conn.execute(
                "INSERT INTO leases (run_id, holder, acquired, seq, took_over_from) "
                "VALUES (%s, %s, %s, %s, %s)",
                (run_id, mine, now, seq, current),
            )
        self._known[run_id] = (num, status, snapshot_seq)
        return Lease(
            run_id,
            mine,
            ttl,
            took_over=current is not None,
            previous=current,
            previous_seq=seq if current is not None and last_seq != -1 else None,
        )

    async def release(self, lease: Lease, *, clean: bool = True, failed: bool = False) -> None:
        behind = self._behind.get(lease.run_id)
        ready = ""
        if self.requeue:  # a failed drive's run waits a moment: the worker records why
            pause = f"next_try = greatest(next_try, {NOW} + {FAILED_PAUSE}), " if failed else ""
            ready = f"ready = (status = 'running'), {pause}"
        async with await self._connection() as conn, conn.transaction():
            found = await (
                await conn.execute(
                    "UPDATE runs SET lease_holder=CASE WHEN %s THEN NULL ELSE lease_holder END, "
                    f"{ready}lease_expires=0 WHERE run_id=%s AND lease_holder=%s "
                    "RETURNING num, status",
                    (clean, lease.run_id, lease.holder),
                )
            ).fetchone()
            if behind is not None and found is not None:
                await _write_snapshot(conn, found[0], behind)
                self._known[lease.run_id] = (found[0], behind.status, behind.seq)
            if found is not None:
                await conn.execute(
                    f"UPDATE leases SET released={NOW}, clean=%s WHERE run_id=%s AND holder=%s",
                    (clean, lease.run_id, lease.holder),
                )
                if self.requeue and not failed and found[1] == "running":  # never behind
                    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, lease.run_id))
            failpoints.hit("store.release.uncommitted")
        if found is not None:
            self._behind.pop(lease.run_id, None)

    async def save_chart(self, version: str, description: str, source: str | None = None) -> None:
        async with await self._connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO charts (version, description) VALUES (%s, %s) "
                "ON CONFLICT (version) DO NOTHING",
                (version, description),
            )
            if source is not None:
                await conn.execute(
                    "UPDATE charts SET source=%s WHERE version=%s", (source, version)
                )

    # -- reads ------------------------------------------------------------------------------

    async def _one(self, sql: str, args: Params) -> Any:
        async with await self._connection() as conn:
            return await (await conn.execute(sql, args)).fetchone()

    async def _all(self, sql: str, args: Params) -> list[Any]:
        async with await self._connection() as conn:
            return list(await (await conn.execute(sql, args)).fetchall())

    async def chart_source(self, version: str) -> str | None:
        found = await self._one("SELECT source FROM charts WHERE version=%s", (version,))
        return None if found is None or found[0] is None else str(found[0])

    async def chart_description(self, version: str) -> str | None:
        found = await self._one("SELECT description FROM charts WHERE version=%s", (version,))
        return None if found is None else str(found[0])

    async def _num(self, run_id: str) -> int:
        found = await self._one("SELECT num FROM runs WHERE run_id=%s", (run_id,))
        if found is None:
            raise RunNotFoundError(f"no run {run_id} in the PostgreSQL store")
        return int(found[0])

    async def load(self, run_id: str) -> Loaded:
        found = await self._one("SELECT num, snapshot::text FROM runs WHERE run_id=%s", (run_id,))
        if found is None:
            raise RunNotFoundError(f"no run {run_id} in the PostgreSQL store")
        num, snapshot = found[0], parse(Run, found[1], f"runs row of run {run_id}")
        rows = await self._all(
            f"SELECT {_READ} FROM event_rows WHERE id BETWEEN %s AND %s ORDER BY id",
            (key_of(num, snapshot.seq + 1), key_of(num, SEQ_MASK)),
        )
        return Loaded(snapshot, tuple(event_of(run_id, tuple(row)) for row in rows))

    async def base(self, run_id: str, at: int | None = None) -> Run:
        found = await self._one(
            "SELECT seq, snapshot::text FROM bases WHERE run_id=%s AND seq<=%s "
            "ORDER BY seq DESC LIMIT 1",
            (run_id, at if at is not None else 2**62),
        )
        if found is None:
            await self._num(run_id)
            raise CorruptRowError(f"run {run_id} has no base snapshot in the PostgreSQL store")
        return parse(Run, found[1], f"bases row of run {run_id} at seq {found[0]}")

    async def runs(self, *, status: Status | None = None, chart: str | None = None) -> list[Run]:
        rows = await self._all(
            "SELECT run_id, snapshot::text FROM runs WHERE (%(s)s::text IS NULL OR status=%(s)s) "
            "AND (%(c)s::text IS NULL OR chart=%(c)s) ORDER BY num",
            {"s": status, "c": chart},
        )
        return [parse(Run, snap, f"runs row of run {rid}") for rid, snap in rows]

    async def summaries(
        self, *, status: Status | None = None, chart: str | None = None
    ) -> list[RunSummary]:
        rows = await self._all(
            _SUMMARY.format(source="runs") + " WHERE (%(s)s::text IS NULL OR r.status=%(s)s) "
            "AND (%(c)s::text IS NULL OR r.chart=%(c)s) ORDER BY r.num",
            {"s": status, "c": chart},
        )
        return [_blocked(summary_row(tuple(row[:-1])), row[-1]) for row in rows]

    async def page(
        self,
        *,
        status: Status | None = None,
        chart: str | None = None,
        search: str | None = None,
        parent: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> RunPage:
        where = (
            "WHERE (%(s)s::text IS NULL OR status=%(s)s) AND (%(c)s::text IS NULL OR chart=%(c)s) "
            "AND (%(q)s::text IS NULL OR strpos(run_id, %(q)s) > 0) "
            "AND (%(p)s::text IS NULL OR snapshot->>'parent_run' = %(p)s)"
        )
        args = {"s": status, "c": chart, "q": search or None, "p": parent, "n": limit, "o": offset}
        rows = await self._all(
            _SUMMARY.format(
                source=f"(SELECT * FROM runs {where} ORDER BY num DESC LIMIT %(n)s OFFSET %(o)s)"
            )
            + " ORDER BY r.num DESC",
            args,
        )
        (total,) = await self._one(f"SELECT count(*) FROM runs {where}", args)
        return RunPage(
            rows=tuple(_blocked(summary_row(tuple(row[:-1])), row[-1]) for row in rows),
            total=int(total),
        )

    async def events(self, run_id: str, *, after: int = 0) -> list[Event]:
        num = await self._num(run_id)
        rows = await self._all(
            f"SELECT {_READ} FROM event_rows WHERE id BETWEEN %s AND %s ORDER BY id",
            (key_of(num, after + 1), key_of(num, SEQ_MASK)),
        )
        return [event_of(run_id, tuple(row)) for row in rows]

    async def transcript(self, run_id: str, visit: int) -> list[Message]:
        num = await self._num(run_id)
        rows = await self._all(
            f"SELECT id & {SEQ_MASK}, messages::text FROM event_rows WHERE id BETWEEN %s AND %s "
            "AND visit=%s AND messages IS NOT NULL ORDER BY id",
            (key_of(num, visit), key_of(num, SEQ_MASK), visit),
        )
        return messages_of(rows, run_id)

    async def fingerprints(self, run_id: str) -> set[str]:
        num = await self._num(run_id)
        rows = await self._all(
            "SELECT fingerprint FROM event_rows WHERE id BETWEEN %s AND %s "
            "AND fingerprint IS NOT NULL",
            (key_of(num, 0), key_of(num, SEQ_MASK)),
        )
        return {found for (found,) in rows}

    async def intents(self, run_id: str) -> list[Intent]:
        num = await self._num(run_id)
        span = (key_of(num, 0), key_of(num, SEQ_MASK))
        rows = await self._all(
            "SELECT call_id, seq, state, call, key FROM intent_rows WHERE run_id=%s", (run_id,)
        )
        rows += await self._all(
            f"SELECT intent, id & {SEQ_MASK}, intent_state, intent_call, key FROM event_rows "
            "WHERE id BETWEEN %s AND %s AND intent_call IS NOT NULL",
            span,
        )
        closes = await self._all(
            f"SELECT id & {SEQ_MASK}, closes FROM event_rows WHERE id BETWEEN %s AND %s "
            "AND closes IS NOT NULL",
            span,
        )
        return intents_of(
            sorted((tuple(r) for r in rows), key=lambda row: row[1]),
            [tuple(c) for c in closes],
            run_id,
        )


def _blocked(summary: RunSummary, problem: str | None) -> RunSummary:
    """A listing line with why no worker drives the run, if it is blocked."""
    return summary if problem is None else replace(summary, blocked=problem)


def _refused_value(event: Event, exc: Any) -> StoreError:
    """An event PostgreSQL refuses to store (JSONB refuses the NUL character)."""
    return StoreError(
        f"event {event.seq} of run {event.run_id} cannot be stored in PostgreSQL: "
        f"{exc.diag.message_primary or exc} (JSONB refuses the NUL character \\u0000 in "
        "text); strip it from the tool's result or arguments"
    )


async def _head(conn: Any, run_id: str, *, lock: bool = False) -> tuple[int, str, int, Any, int]:
    """(number, status, snapshot seq, lease holder, live seq) of a stored run; `lock` holds
    its row until the transaction ends."""
    found = await (
        await conn.execute(
            f"SELECT num, status, seq, lease_holder FROM runs WHERE run_id=%s"
            f"{' FOR UPDATE' if lock else ''}",
            (run_id,),
        )
    ).fetchone()
    if found is None:
        raise RunNotFoundError(f"no run {run_id} in the PostgreSQL store; create it first")
    num, status, snapshot_seq, holder = found
    last = await (
        await conn.execute(
            "SELECT max(id) FROM event_rows WHERE id BETWEEN %s AND %s",
            (key_of(num, 0), key_of(num, SEQ_MASK)),
        )
    ).fetchone()
    seq = snapshot_seq if last[0] is None else max(snapshot_seq, last[0] & SEQ_MASK)
    return num, status, snapshot_seq, holder, seq


async def _write_snapshot(conn: Any, num: int, run: Run, *, others: bool = False) -> None:
    """Write `run` as the run's snapshot unless a later one is stored."""
    await conn.execute(
        "UPDATE runs SET status=%s, state=%s, seq=%s, snapshot=%s::jsonb, chart_version=%s"
        f"{', lease_seq=-1' if others else ''} WHERE num=%s AND seq<=%s",
        (
            run.status,
            run.state,
            run.seq,
            encode(run).decode(),
            run.chart_version,
            num,
            run.seq,
        ),
    )


async def _reachable(dsn: str) -> None:
    """Connect once, directly: a DSN that does not lead to a database is a `StoreError`
    naming it (password hidden) and saying what the client or the server answered."""
    import psycopg

    try:
        with anyio.fail_after(CONNECT_TIMEOUT):
            conn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=int(CONNECT_TIMEOUT))
    except TimeoutError:
        raise StoreError(
            f"cannot connect to PostgreSQL at {shown_dsn(dsn)}: no answer within "
            f"{CONNECT_TIMEOUT:.0f} s; check the host and port in --db"
        ) from None
    except (psycopg.Error, ValueError) as exc:
        said = "; ".join(x.strip() for x in str(exc).splitlines() if x.strip())
        secret = re.search(r"://[^:/@]*:([^@/]*)@", dsn)
        if secret and secret.group(1):  # the client may quote the password it could not read
            said = said.replace(secret.group(1), "***")
        raise StoreError(
            f"cannot connect to PostgreSQL at {shown_dsn(dsn)}: {said or type(exc).__name__}"
        ) from None
    await conn.close()


def shown_dsn(dsn: str) -> str:
    """`dsn` with its password replaced by `***`, for messages."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", dsn)
