"""The `Store` port: an append-only event log with a snapshot cache, transcripts and intents.

Every backend (memory, SQLite, PostgreSQL) implements these few async
methods. `append` is the one write per transition: the event row with the
transcript messages and the intent it adds, fenced by `UNIQUE(run_id, seq)`;
the run's snapshot is written behind it (on a status change, every
`snapshot_every` events, on release), so `load` returns the last snapshot and
the events after it, which the runtime folds with the chart.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from statechart.records.messages import Message
from statechart.records.run import ROOT_LEVEL, Event, Intent, Run, Status, Step
from statechart.records.spent import Spent
from statechart.records.summary import RunPage, RunSummary

DEFAULT_LEASE_TTL = 60.0
"""Seconds a driver's lease lasts unless renewed; the driver renews it every third of that."""
DEFAULT_SNAPSHOT_EVERY = 64
"""Events after which a store writes a running run's snapshot even with no status change."""


@dataclass(frozen=True)
class Loaded:
    """A stored run as the store holds it: its last snapshot and the events after it.

    The store is chart-free, so it cannot fold the tail; `statechart.load_run(chart,
    run_id, store=store)` does. A run no driver holds (released, waiting or ended) has
    an empty tail: its snapshot is the run.
    """

    snapshot: Run
    """The last snapshot written (exact for `status`, which every change writes)."""
    tail: tuple[Event, ...] = ()
    """The events after it, in order."""

    @property
    def seq(self) -> int:
        """The run's live seq: its last event's."""
        return self.tail[-1].seq if self.tail else self.snapshot.seq

    @property
    def state(self) -> str:
        """The run's live state: where its last event left it."""
        return self.tail[-1].target if self.tail else self.snapshot.state

    @property
    def spent(self) -> Spent:
        """The whole run's live spending: the root charges every event's usage."""
        total = self.snapshot.ledger.get(ROOT_LEVEL) or Spent()
        for event in self.tail:
            total = total + event.usage
        return total


@dataclass(frozen=True)
class Lease:
    """The right to drive one run, held by one driver until released or expired.

    `drive()` acquires it and renews it by time (`Store.renew`, every third of `ttl`,
    also while a call is in flight); a second driver meanwhile gets `LeaseHeldError`.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, LeaseHeldError, MemoryStore, ScriptedModel
        from statechart import State, call, load_session, reply, start, step

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            lease = await store.acquire(run.run_id, "worker-1")
            try:
                record = await step(chart, run, model=model, session=await load_session(store, run))
                assert record is not None
                await store.append(record, lease)  # only the lease's holder appends
                try:
                    await store.acquire(run.run_id, "worker-2")  # another driver, meanwhile
                except LeaseHeldError as held:
                    print(held)  # until worker-1 releases the lease, or it expires
                else:
                    raise AssertionError("two drivers of one run")
            finally:
                await store.release(lease)
            assert (await store.load(run.run_id)).seq == 1


        anyio.run(main)
        ```
    """

    run_id: str
    """The run it is the right to drive."""
    holder: str
    """The driver's name plus a nonce unique to this acquisition (what appends are fenced by)."""
    ttl: float
    """Seconds it lasts from the last renewal (or the acquisition)."""
    took_over: bool = False
    """The previous holder never released it (killed or interrupted mid-call): an open
    intent may have started, so it is settled by the tool's retry policy."""
    previous: str | None = None
    """The holder that never released it, when `took_over`."""
    previous_seq: int | None = None
    """The run's seq when the previous holder last wrote: if others wrote since (a human
    approved), nothing of the previous holder's can still be in doubt."""


def summary_of(run: Run, updated_at: float | None) -> RunSummary:
    """A listing line of a run known exactly (at rest, or the run its driver holds)."""
    return RunSummary(
        run_id=run.run_id,
        chart=run.chart,
        status=run.status,
        state=run.state,
        seq=run.seq,
        spent=run.ledger.get(ROOT_LEVEL) or Spent(),
        reason=run.reason,
        created_at=run.created_at,
        updated_at=updated_at,
        parent_run=run.parent_run,
        wake=run.wake if run.status in ("sleeping", "waiting") else None,
    )


def lease_holder(name: str) -> str:
    """`name` plus a nonce: two acquisitions under one name are still two holders."""
    return f"{name}#{uuid.uuid4().hex[:8]}"


@runtime_checkable
class Store(Protocol):
    """Where runs live. All methods are async so database backends fit the same shape.

    `MemoryStore` (tests, benchmarks) and `SQLiteStore` (one file, durable) implement it;
    the runtime needs nothing else, so a new backend only has to implement these methods.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        import anyio

        from statechart import MemoryStore, SQLiteStore, Store


        async def waiting(store: Store) -> list[str]:
            "Runs waiting for a person, and why: the same code on every backend."
            return [f"{r.run_id}: {r.reason}" for r in await store.runs(status="waiting")]


        sqlite = SQLiteStore(Path(tempfile.mkdtemp()) / "runs.db")
        for store in (MemoryStore(), sqlite):
            assert isinstance(store, Store)  # a runtime-checkable protocol
            assert anyio.run(waiting, store) == []  # no runs yet
        sqlite.close()
        ```
    """

    async def create(self, run: Run, intents: Sequence[Intent] = ()) -> None:
        """Store a new run's first snapshot (its replay base) and the open `intents` it starts
        with (a fork's); raises `ConflictError` if the id exists."""
        ...

    async def append(self, step: Step, lease: Lease | None = None) -> None:
        """Append `step.event` with `step.messages`, record `step.opened` and complete
        `step.closed` intents; write `step.run` as the snapshot when its status changed,
        every `snapshot_every` events, for a migration (`step.base`) or with no lease.

        One transaction. Raises `ConflictError` when the run already has an event at
        that seq (another writer got there first), `LeaseLostError` when `lease` is no
        longer held; either way nothing changes.
        """
        ...

    async def renew(self, lease: Lease) -> None:
        """Extend the lease by its `ttl` from now; `LeaseLostError` once it is not held."""
        ...

    async def base(self, run_id: str, at: int | None = None) -> Run:
        """The last whole snapshot stored at or before seq `at` (the run's first, or a
        migration): replaying the events after it rebuilds the run."""
        ...

    async def acquire(self, run_id: str, holder: str, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        """Take the run's lease; raises `LeaseHeldError` while any live lease exists, even one
        taken under the same name (names are not identities: a restarted worker must wait)."""
        ...

    async def release(self, lease: Lease, *, clean: bool = True, failed: bool = False) -> None:
        """Write the snapshot held behind, if any, and give the lease back; `clean=False`
        says a call may have been in flight, `failed=True` that the drive ended in an error
        (a queue holds such a run back a moment rather than hand it out again at once)."""
        ...

    async def save_chart(
        self,
        version: str,
        description: str,
        source: str | None = None,
    ) -> None:
        """Remember a chart version's structure (so a changed chart can be explained) and,
        if known, where it was loaded from (`path.py:name`)."""
        ...

    async def chart_source(self, version: str) -> str | None:
        """Where the chart of `version` was loaded from, if that was recorded."""
        ...

    async def chart_description(self, version: str) -> str | None:
        """The structure stored for `version`, if any."""
        ...

    async def load(self, run_id: str) -> Loaded:
        """The last snapshot and the events after it; raises `RunNotFoundError`."""
        ...

    async def runs(self, *, status: Status | None = None, chart: str | None = None) -> list[Run]:
        """Last snapshots of stored runs, optionally filtered by (exact) status and chart;
        a run being driven may be up to `snapshot_every` events ahead of its snapshot."""
        ...

    async def summaries(
        self, *, status: Status | None = None, chart: str | None = None
    ) -> list[RunSummary]:
        """Each stored run's live state, seq and spending (from its last event), optionally
        filtered by status and chart, oldest first."""
        ...

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
        """`limit` run summaries from `offset`, newest first, filtered by (exact) status and
        chart, by `search` in the run id and by the run they were forked from (`parent`);
        read from indexed columns and each run's last event, like `summaries`, with the
        number of runs that match."""
        ...

    async def events(self, run_id: str, *, after: int = 0) -> list[Event]:
        """Events with seq greater than `after`, in order."""
        ...

    async def transcript(self, run_id: str, visit: int) -> list[Message]:
        """The transcript of one state visit (keyed by the seq that entered it)."""
        ...

    async def fingerprints(self, run_id: str) -> set[str]:
        """Fingerprints of every call the run executed."""
        ...

    async def intents(self, run_id: str) -> list[Intent]:
        """Tool calls recorded as about to run, with whether each completed, in order."""
        ...
