"""The embedded durable store: the standard library's sqlite3, WAL mode.

One transaction per transition: the event row (for a side-effecting call, the
row that records the intent), the snapshot of bounded fields, the transcript
delta. Nothing is rewritten as a run grows. See `docs/persistence.md` for the
tables and what each durability setting promises.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import anyio.to_thread

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
from statechart.store.checkpoint import Checkpointer
from statechart.store.process import identity, known_dead
from statechart.store.rows import (
    INSERT_EVENT,
    INSERT_IF_HELD,
    LAST_EVENT,
    LAST_EVENT_JOIN,
    READ,
    SEQ_BITS,
    SEQ_MASK,
    event_of,
    event_row,
    insert_intent,
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
from statechart.store.schema import open_schema, transaction

Durability = Literal["process", "power"]
T = TypeVar("T")


_SUMMARY = (
    "SELECT r.run_id, r.chart, r.status, r.state, r.seq, "
    "json_extract(r.snapshot, '$.reason'), json_extract(r.snapshot, '$.created_at'), "
    "json_extract(r.snapshot, '$.parent_run'), json_extract(r.snapshot, '$.ledger.root'), "
    "json_extract(r.snapshot, '$.wake'), "
    f"{LAST_EVENT} FROM {{source}} r {LAST_EVENT_JOIN}"
)
"""A listing line per runs row of `source`: its own columns, then its last event's."""


class SQLiteStore:
    """Runs in one SQLite file: every transition is one transaction, readable with SQL.

    `durability="process"` (the default: WAL, `synchronous=NORMAL`) keeps every committed
    transition through a killed process; `"power"` (`synchronous=FULL`, an fsync per
    transition) also through losing power. `offload=True` runs each database call in a
    worker thread. Each transition appends one event row; the run's snapshot row is
    written behind it: on a status change, every `snapshot_every` events and when the
    lease is released. See docs/persistence.md.

    Isolation: SQLite's, serialisable. Each write is one `BEGIN IMMEDIATE` transaction
    (the database's write lock taken at its start) or a single fenced statement, so two
    writers of one file never interleave; the lease and the event key fence the rest.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        from statechart import Budget, Chart, Edge, ScriptedModel, SQLiteStore, State
        from statechart import call, reply, run_sync

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])
        folder = Path(tempfile.mkdtemp())
        store = SQLiteStore(folder / "runs.db")  # a committed step survives a killed process
        safer = SQLiteStore(folder / "audit.db", durability="power")  # and a power cut: fsyncs
        run = run_sync(chart, store=store, model=model, run_id="hello-1")
        store.close()  # any process can now show, resume or fork `hello-1` from runs.db
        safer.close()
        ```
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "process",
        offload: bool = False,
        timeout: float = 10.0,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        if durability not in ("process", "power"):
            raise ValueError(f"durability={durability!r}; use 'process' or 'power'")
        self.path = os.fspath(path)
        self.durability = durability
        self.offload = offload
        """Run each database call in a worker thread instead of on the event loop."""
        self.timeout = timeout
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every={snapshot_every}; use 1 or more")
        self.snapshot_every = snapshot_every
        """A running run's snapshot is written at least every this many events."""
        self._behind: dict[str, Run] = {}
        """run id -> the run after its last append, when its snapshot was not written"""
        self._known: dict[str, tuple[int, str, int, int]] = {}
        """run id -> (number, status, snapshot seq, last seq) as this connection last saw or
        wrote them: the common append skips reading the runs row, and is sent only for the
        seq after the last (its WHERE checks the lease; the key, a seq taken since)"""
        self._lock = threading.Lock()
        self._saved: dict[str, str | None] = {}
        """Chart versions this connection has stored (so `start` skips a transaction)."""
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            open_schema(self._db, self.path, self.durability)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} cannot be opened as a statechart store: {exc}") from None
        self._checkpointer = Checkpointer(self.path)

    def close(self) -> None:
        """Stop the checkpointer and close the connection (SQLite checkpoints the WAL)."""
        self._checkpointer.close()
        self._db.close()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self.offload:
            return await anyio.to_thread.run_sync(self._locked, fn, *args)
        return self._locked(fn, *args)

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            try:
                return fn(*args)
            except sqlite3.OperationalError as exc:
                about = next((a for a in args if isinstance(a, str)), None) or next(
                    (a.event.run_id for a in args if isinstance(a, Step)), ""
                )
                doing = f"{fn.__name__.strip('_')}{f' of run {about}' if about else ''}"
                if exc.sqlite_errorname in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                    raise StoreError(
                        f"{self.path}: {exc} during {doing}; another process held the "
                        f"database longer than the {self.timeout:.0f} s timeout: retry, or "
                        "raise timeout="
                    ) from exc
                if "malformed JSON" in str(exc):
                    raise CorruptRowError(
                        f"{self.path}: a stored row read during {doing} holds malformed JSON; "
                        "it was changed outside statechart. Nothing was written; restore "
                        "the file from a backup"
                    ) from exc
                raise StoreError(f"{self.path}: {exc} during {doing}") from exc

    # -- writes -----------------------------------------------------------------------------

    async def create(self, run: Run, intents: Sequence[Intent] = ()) -> None:
        await self._call(self._create, run, intents)

    def _create(self, run: Run, intents: Sequence[Intent]) -> None:
        snapshot = encode(run).decode()
        with transaction(self._db) as db:
            try:
                db.execute(
                    "INSERT INTO runs (run_id, chart, status, state, seq, snapshot) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (run.run_id, run.chart, run.status, run.state, run.seq, snapshot),
                )
            except sqlite3.IntegrityError:
                raise run_exists(run.run_id) from None
            db.execute(
                "INSERT INTO bases (run_id, seq, snapshot) VALUES (?, ?, ?)",
                (run.run_id, run.seq, snapshot),
            )
            for intent in intents:
                insert_intent(db, run.run_id, intent)

    async def append(self, step: Step, lease: Lease | None = None) -> None:
        await self._call(self._append, step, lease)

    def _append(self, step: Step, lease: Lease | None) -> None:
        event, run = step.event, step.run
        run_id = event.run_id
        known = self._known.get(run_id)
        if (
            lease is not None
            and known is not None
            and not step.base
            and run.status == known[1]
            and event.seq - known[2] < self.snapshot_every
            and event.seq == known[3] + 1
        ):  # the common step: the event row alone, one statement, fenced in its WHERE
            num = known[0]
            failpoints.hit("store.append.uncommitted")
            try:
                cur = self._db.execute(INSERT_IF_HELD, (*event_row(step, num), num, lease.holder))
            except sqlite3.IntegrityError as exc:
                if exc.sqlite_errorname != "SQLITE_CONSTRAINT_PRIMARYKEY":
                    raise
                cur = None  # the seq is taken: the transaction below says by whom
            if cur is not None and cur.rowcount == 1:
                self._behind[run_id] = run
                self._known[run_id] = (num, known[1], known[2], event.seq)
                self._checkpointer.appended()
                return
            # refused: the transaction below says why (or writes it, if only this
            # connection's view of the run was stale)
        with transaction(self._db) as db:
            num, status, snapshot_seq, holder, seq = self._head(db, run_id)
            if lease is not None and holder != lease.holder:
                raise lease_lost(lease, holder)
            if event.seq != seq + 1:
                raise not_next(run_id, seq, event.seq)
            try:
                db.execute(INSERT_EVENT, event_row(step, num))
            except sqlite3.IntegrityError:
                raise event_exists(run_id, event.seq) from None
            behind = written_behind(step, lease, status, snapshot_seq, self.snapshot_every)
            if not behind:
                failpoints.hit("store.append.snapshot")
                self._write_snapshot(db, num, run, others=lease is None and holder is not None)
                if step.base:
                    db.execute(
                        "INSERT INTO bases (run_id, seq, snapshot) VALUES (?, ?, ?)",
                        (run_id, event.seq, encode(run).decode()),
                    )
            failpoints.hit("store.append.uncommitted")
        if behind:
            self._behind[run_id] = run
            self._known[run_id] = (num, status, snapshot_seq, event.seq)
        else:
            self._behind.pop(run_id, None)
            self._known[run_id] = (num, run.status, run.seq, event.seq)
        self._checkpointer.appended()

    def _head(self, db: sqlite3.Connection, run_id: str) -> tuple[int, str, int, str | None, int]:
        """(number, status, snapshot seq, lease holder, live seq) of a stored run."""
        found = db.execute(
            "SELECT num, status, seq, lease_holder, (SELECT max(id) FROM event_rows "
            f"WHERE id BETWEEN num << {SEQ_BITS} AND (num << {SEQ_BITS}) + {SEQ_MASK}) "
            "FROM runs WHERE run_id=?",
            (run_id,),
        ).fetchone()
        if found is None:
            raise RunNotFoundError(f"no run {run_id} in {self.path}; create it first")
        num, status, snapshot_seq, holder, last = found
        seq = snapshot_seq if last is None else max(snapshot_seq, last & SEQ_MASK)
        return num, status, snapshot_seq, holder, seq

    def _write_snapshot(
        self, db: sqlite3.Connection, num: int, run: Run, *, others: bool = False
    ) -> None:
        """Write `run` as the run's snapshot unless a later one is stored; `others` says a
        writer without the lease wrote while it was held (no takeover can be in doubt)."""
        db.execute(
            "UPDATE runs SET status=?, state=?, seq=?, snapshot=?"
            f"{', lease_seq=-1' if others else ''} WHERE num=? AND seq<=?",
            (
                run.status,
                run.state,
                run.seq,
                encode(run).decode(),
                num,
                run.seq,
            ),
        )

    async def renew(self, lease: Lease) -> None:
        await self._call(self._renew, lease)

    def _renew(self, lease: Lease) -> None:
        with transaction(self._db) as db:
            cur = db.execute(
                "UPDATE runs SET lease_expires=? WHERE run_id=? AND lease_holder=? "
                "AND lease_expires > 0",  # a released lease (even unclean) stays released
                (time.time() + lease.ttl, lease.run_id, lease.holder),
            )
            if cur.rowcount != 1:
                found = db.execute(
                    "SELECT lease_holder FROM runs WHERE run_id=?", (lease.run_id,)
                ).fetchone()
                raise lease_lost(lease, found[0] if found else None, expired=False)
            failpoints.hit("store.renew.uncommitted")

    async def acquire(self, run_id: str, holder: str, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        return await self._call(self._acquire, run_id, holder, ttl)

    def _acquire(self, run_id: str, holder: str, ttl: float) -> Lease:
        with transaction(self._db) as db:
            found = db.execute(
                "SELECT lease_holder, lease_expires, lease_seq, lease_process FROM runs "
                "WHERE run_id=?",
                (run_id,),
            ).fetchone()
            if found is None:
                raise RunNotFoundError(f"no run {run_id} in {self.path}")
            current, expires, last_seq, process = found
            now = time.time()
            if current is not None and expires > now and not known_dead(process):
                raise lease_held(run_id, current, expires - now)
            num, status, snapshot_seq, _, seq = self._head(db, run_id)
            mine = lease_holder(holder)
            db.execute(
                "UPDATE runs SET lease_holder=?, lease_expires=?, lease_seq=?, lease_process=? "
                "WHERE run_id=?",
                (mine, now + ttl, seq, identity(), run_id),
            )
        self._known[run_id] = (num, status, snapshot_seq, seq)
        return Lease(
            run_id,
            mine,
            ttl,
            took_over=current is not None,
            previous=current,
            previous_seq=seq if current is not None and last_seq != -1 else None,
        )

    async def release(self, lease: Lease, *, clean: bool = True, failed: bool = False) -> None:
        await self._call(self._release, lease, clean)

    def _release(self, lease: Lease, clean: bool) -> None:
        behind = self._behind.get(lease.run_id)
        with transaction(self._db) as db:
            cur = db.execute(
                "UPDATE runs SET lease_holder=CASE WHEN ? THEN NULL ELSE lease_holder END, "
                "lease_expires=0 WHERE run_id=? AND lease_holder=? RETURNING num",
                (clean, lease.run_id, lease.holder),
            ).fetchone()
            if behind is not None and cur is not None:
                self._write_snapshot(db, cur[0], behind)
                self._known[lease.run_id] = (cur[0], behind.status, behind.seq, behind.seq)
            failpoints.hit("store.release.uncommitted")
        if cur is not None:  # a refused release (the lease was lost) keeps the new holder's
            self._behind.pop(lease.run_id, None)

    async def save_chart(
        self,
        version: str,
        description: str,
        source: str | None = None,
    ) -> None:
        await self._call(self._save_chart, version, description, source)

    def _save_chart(self, version: str, description: str, source: str | None) -> None:
        if version in self._saved and source in (None, self._saved[version]):
            return  # a chart's rows are never deleted: saved once per connection is enough
        with transaction(self._db) as db:
            db.execute(
                "INSERT OR IGNORE INTO charts (version, description) VALUES (?, ?)",
                (version, description),
            )
            if source is not None:
                db.execute("UPDATE charts SET source=? WHERE version=?", (source, version))
        self._saved[version] = source or self._saved.get(version)

    async def chart_source(self, version: str) -> str | None:
        return await self._call(self._chart_source, version)

    def _chart_source(self, version: str) -> str | None:
        found = self._db.execute("SELECT source FROM charts WHERE version=?", (version,)).fetchone()
        return None if found is None or found[0] is None else str(found[0])

    # -- reads ------------------------------------------------------------------------------

    async def load(self, run_id: str) -> Loaded:
        return await self._call(self._load, run_id)

    def _load(self, run_id: str) -> Loaded:
        num, snapshot = self._snapshot(run_id)
        rows = self._db.execute(
            f"SELECT {READ} FROM event_rows WHERE id BETWEEN ? AND ? ORDER BY id",
            (key_of(num, snapshot.seq + 1), key_of(num, SEQ_MASK)),
        ).fetchall()
        return Loaded(snapshot, tuple(event_of(run_id, row) for row in rows))

    def _snapshot(self, run_id: str) -> tuple[int, Run]:
        found = self._db.execute(
            "SELECT num, snapshot FROM runs WHERE run_id=?", (run_id,)
        ).fetchone()
        if found is None:
            raise RunNotFoundError(f"no run {run_id} in {self.path}")
        return found[0], parse(Run, found[1], f"runs row of run {run_id}")

    def _num(self, run_id: str) -> int:
        found = self._db.execute("SELECT num FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if found is None:
            raise RunNotFoundError(f"no run {run_id} in {self.path}")
        return int(found[0])

    async def base(self, run_id: str, at: int | None = None) -> Run:
        return await self._call(self._base, run_id, at)

    def _base(self, run_id: str, at: int | None) -> Run:
        found = self._db.execute(
            "SELECT seq, snapshot FROM bases WHERE run_id=? AND seq<=? ORDER BY seq DESC LIMIT 1",
            (run_id, at if at is not None else 2**62),
        ).fetchone()
        if found is None:
            self._num(run_id)
            raise CorruptRowError(f"run {run_id} has no base snapshot in {self.path}")
        return parse(Run, found[1], f"bases row of run {run_id} at seq {found[0]}")

    async def runs(self, *, status: Status | None = None, chart: str | None = None) -> list[Run]:
        return await self._call(self._runs, status, chart)

    def _runs(self, status: Status | None, chart: str | None) -> list[Run]:
        rows = self._db.execute(
            "SELECT run_id, snapshot FROM runs WHERE (?1 IS NULL OR status=?1) "
            "AND (?2 IS NULL OR chart=?2) ORDER BY num",
            (status, chart),
        ).fetchall()
        return [parse(Run, snap, f"runs row of run {rid}") for rid, snap in rows]

    async def summaries(
        self, *, status: Status | None = None, chart: str | None = None
    ) -> list[RunSummary]:
        return await self._call(self._summaries, status, chart)

    def _summaries(self, status: Status | None, chart: str | None) -> list[RunSummary]:
        rows = self._db.execute(
            _SUMMARY.format(source="runs")
            + " WHERE (?1 IS NULL OR r.status=?1) AND (?2 IS NULL OR r.chart=?2) ORDER BY r.num",
            (status, chart),
        ).fetchall()
        return [summary_row(row) for row in rows]

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
        return await self._call(self._page, status, chart, search or None, parent, limit, offset)

    def _page(
        self,
        status: Status | None,
        chart: str | None,
        search: str | None,
        parent: str | None,
        limit: int,
        offset: int,
    ) -> RunPage:
        where = (
            "WHERE (?1 IS NULL OR status=?1) AND (?2 IS NULL OR chart=?2) "
            "AND (?3 IS NULL OR instr(run_id, ?3) > 0) "
            "AND (?6 IS NULL OR json_extract(snapshot, '$.parent_run') = ?6)"
        )
        rows = self._db.execute(
            _SUMMARY.format(
                source=f"(SELECT * FROM runs {where} ORDER BY num DESC LIMIT ?4 OFFSET ?5)"
            )
            + " ORDER BY r.num DESC",
            (status, chart, search, limit, offset, parent),
        ).fetchall()
        (total,) = self._db.execute(
            f"SELECT count(*) FROM runs {where.replace('?6', '?4')}",
            (status, chart, search, parent),
        ).fetchone()
        return RunPage(rows=tuple(summary_row(row) for row in rows), total=total)

    async def events(self, run_id: str, *, after: int = 0) -> list[Event]:
        return await self._call(self._events, run_id, after)

    def _events(self, run_id: str, after: int) -> list[Event]:
        num = self._num(run_id)
        rows = self._db.execute(
            f"SELECT {READ} FROM event_rows WHERE id BETWEEN ? AND ? ORDER BY id",
            (key_of(num, after + 1), key_of(num, SEQ_MASK)),
        ).fetchall()
        return [event_of(run_id, row) for row in rows]

    async def transcript(self, run_id: str, visit: int) -> list[Message]:
        return await self._call(self._transcript, run_id, visit)

    def _transcript(self, run_id: str, visit: int) -> list[Message]:
        num = self._num(run_id)
        rows = self._db.execute(
            f"SELECT id & {SEQ_MASK}, messages FROM event_rows WHERE id BETWEEN ? AND ? "
            "AND visit=? AND messages IS NOT NULL ORDER BY id",
            (key_of(num, visit), key_of(num, SEQ_MASK), visit),
        )
        return messages_of(rows, run_id)

    async def fingerprints(self, run_id: str) -> set[str]:
        return await self._call(self._fingerprints, run_id)

    def _fingerprints(self, run_id: str) -> set[str]:
        num = self._num(run_id)
        rows = self._db.execute(
            "SELECT fingerprint FROM event_rows WHERE id BETWEEN ? AND ? "
            "AND fingerprint IS NOT NULL",
            (key_of(num, 0), key_of(num, SEQ_MASK)),
        )
        return {call_fingerprint for (call_fingerprint,) in rows}

    async def intents(self, run_id: str) -> list[Intent]:
        return await self._call(self._intents, run_id)

    def _intents(self, run_id: str) -> list[Intent]:
        num = self._num(run_id)
        span = (key_of(num, 0), key_of(num, SEQ_MASK))
        rows = self._db.execute(
            "SELECT call_id, seq, state, call, key FROM intent_rows WHERE run_id=?",
            (run_id,),
        ).fetchall()
        rows += self._db.execute(
            f"SELECT intent, id & {SEQ_MASK}, intent_state, intent_call, key FROM event_rows "
            "WHERE id BETWEEN ? AND ? AND intent_call IS NOT NULL",
            span,
        ).fetchall()
        closes = self._db.execute(
            f"SELECT id & {SEQ_MASK}, closes FROM event_rows WHERE id BETWEEN ? AND ? "
            "AND closes IS NOT NULL",
            span,
        ).fetchall()
        return intents_of(sorted(rows, key=lambda row: row[1]), closes, run_id)

    async def chart_description(self, version: str) -> str | None:
        return await self._call(self._chart_description, version)

    def _chart_description(self, version: str) -> str | None:
        found = self._db.execute(
            "SELECT description FROM charts WHERE version=?", (version,)
        ).fetchone()
        return None if found is None else str(found[0])
