"""The `Store` port: an append-only event log with a snapshot cache, transcripts and intents.

Every backend (memory, SQLite, PostgreSQL) implements these few async
methods. `append` is the one write per transition: the event row, the new
snapshot and the transcript delta, atomically, fenced by `UNIQUE(run_id, seq)`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from statechart.records.messages import Message
from statechart.records.run import Event, Intent, Run, Status, Step

DEFAULT_LEASE_TTL = 60.0
"""Seconds a driver's lease lasts unless renewed; it must exceed the longest single call."""


@dataclass(frozen=True)
class Lease:
    """The right to drive one run, held by one driver until released or expired.

    `drive()` acquires it and renews it with every append; a second driver meanwhile
    gets `LeaseHeldError`.

    Example:
        ```python
        # in async code, with a stored run `run_id`
        lease = await store.acquire(run_id, "worker-1")  # LeaseHeldError while another holds it
        try:
            ...  # append steps with `store.append(step, lease)`
        finally:
            await store.release(lease)
        ```
    """

    run_id: str
    """The run it is the right to drive."""
    holder: str
    """The driver's name plus a nonce unique to this acquisition (what appends are fenced by)."""
    ttl: float
    """Seconds it lasts from the last append (or the acquisition) unless renewed."""
    took_over: bool = False
    """The previous holder never released it (killed or interrupted mid-call): an open
    intent may have started, so it is settled by the tool's retry policy."""
    previous: str | None = None
    """The holder that never released it, when `took_over`."""
    previous_seq: int | None = None
    """The run's seq when the previous holder last wrote: if others wrote since (a human
    approved), nothing of the previous holder's can still be in doubt."""


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
        import anyio

        from statechart import MemoryStore, SQLiteStore, Store


        async def waiting(store: Store) -> list[str]:
            "Runs waiting for a person, and why: the same code on every backend."
            return [f"{r.run_id}: {r.reason}" for r in await store.runs(status="waiting")]


        for store in (MemoryStore(), SQLiteStore("runs.db")):
            assert isinstance(store, Store)  # a runtime-checkable protocol
            print(anyio.run(waiting, store))
        ```
    """

    async def create(self, run: Run, intents: Sequence[Intent] = ()) -> None:
        """Store a new run's first snapshot (its replay base) and the open `intents` it starts
        with (a fork's); raises `ConflictError` if the id exists."""
        ...

    async def append(self, step: Step, lease: Lease | None = None) -> None:
        """Append `step.event`, replace the snapshot with `step.run`, add `step.messages`,
        record `step.opened` and complete `step.closed` intents.

        One transaction. Raises `ConflictError` when the run already has an event at
        that seq (another writer got there first), `LeaseLostError` when `lease` is no
        longer held; either way nothing changes. With a lease, the append renews it.
        """
        ...

    async def base(self, run_id: str, at: int | None = None) -> Run:
        """The last whole snapshot stored at or before seq `at` (the run's first, or a
        migration): replaying the events after it rebuilds the run."""
        ...

    async def acquire(self, run_id: str, holder: str, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        """Take the run's lease; raises `LeaseHeldError` while any live lease exists, even one
        taken under the same name (names are not identities: a restarted worker must wait)."""
        ...

    async def release(self, lease: Lease, *, clean: bool = True) -> None:
        """Give the lease back; `clean=False` says a call may have been in flight."""
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

    async def load(self, run_id: str) -> Run:
        """The latest snapshot; raises `RunNotFoundError`."""
        ...

    async def runs(self, *, status: Status | None = None, chart: str | None = None) -> list[Run]:
        """Snapshots of stored runs, optionally filtered."""
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
