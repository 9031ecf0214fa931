"""A worker: claims runnable runs from a PostgreSQL store and drives up to N at once.

Many workers on many machines share one database, which is the queue, the lock and the
log: a claim is a lease (`RunQueue.claim`, `FOR UPDATE SKIP LOCKED`), each drive renews
it by heartbeat, and the fence on every append keeps a run's log gapless whoever writes.
A worker wakes on `LISTEN/NOTIFY` (a run submitted, approved, rejected, cancelled) and
polls once per `poll` seconds for what no notification announces: leases that expired
because their worker died. It loads a run's chart only from what it was given (its
`agents` folder and installed packages' registered charts), never from a path or module
a database row names; a chart that fails to load is retried with backoff, then the run is
blocked with the error. Asked to stop, it drains: every drive stops after the step under
way is stored, releases its lease clean and puts its run back for another worker.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from statechart.chart.chart import Chart
from statechart.engine.tables import compiled
from statechart.errors import LeaseHeldError, LeaseLostError, StatechartError
from statechart.io.loading import load_trusted
from statechart.models.base import Model
from statechart.models.registry import from_spec
from statechart.records.run import Run
from statechart.runtime.current import current
from statechart.runtime.driver import drive_to_end
from statechart.runtime.relay import relay_for
from statechart.store.base import Lease
from statechart.store.postgres import PostgresStore
from statechart.store.queue import RunQueue, listening

log = logging.getLogger("statechart.worker")


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker claims and drives; see docs/scaling.md for what each one trades."""

    concurrency: int = 8
    """Runs driven at once in this process."""
    lease_ttl: float = 30.0
    """Seconds a claim lasts unless renewed (renewed every third of it, also during a model
    call or an async tool): how long a run of a killed worker waits for another."""
    poll: float | None = None
    """Seconds between claim queries when no notification comes; default a quarter of
    `lease_ttl`, so an expired lease is found soon after it expires."""
    agents: Path | None = None
    """The folder chart files are loaded from (besides installed packages' charts)."""
    max_tries: int = 5
    """Failures in a row (a chart that does not load, a drive that fails) that block a run."""
    backoff: float = 2.0
    """Seconds before the first retry of a run whose chart failed to load; doubled each try."""
    max_sleep: float = 1.0
    """A run put to sleep (a failed call's backoff) due within this many seconds sleeps in
    its drive; a later one is released and claimed again when it is due."""
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    """Lease holder name (a nonce is added per claim)."""

    @property
    def every(self) -> float:
        """Seconds between polls."""
        return self.poll if self.poll is not None else self.lease_ttl / 4


@dataclass
class Worker:
    """One worker process's loop. `await Worker(store, settings).run(stop)` until `stop` is
    set (then it drains) or it is cancelled."""

    store: PostgresStore
    settings: WorkerSettings = field(default_factory=WorkerSettings)
    on_step: Callable[[str, Run], None] | None = None
    """Told of every stored step (run id, run after it): for progress lines and tests."""
    queue: RunQueue = field(init=False)
    charts: dict[str, tuple[Chart, ModuleType]] = field(default_factory=dict)
    models: dict[str, Model] = field(default_factory=dict)
    active: set[str] = field(default_factory=set)
    draining: bool = False
    reconnects: int = 0
    """Times the LISTEN connection was lost and opened again."""
    driven: int = 0
    """Drives finished (a run that waits, ends or is put back counts once per drive)."""
    _wake: anyio.Event = field(default_factory=anyio.Event)
    _look: bool = True

    def __post_init__(self) -> None:
        self.queue = RunQueue(self.store)
        self.store.requeue = True  # a drive that stops with its run running puts it back

    def wake(self, *, look: bool = True) -> None:
        """Claim now rather than at the next poll; `look=False` (a drive of this worker
        ended) claims among the chart versions it knows, without looking for new versions
        or for dead local holders: one query, not three, per finished drive."""
        self._look = (self._look or look) if self._wake.is_set() else look
        self._wake.set()

    async def run(self, stop: anyio.Event | None = None) -> None:
        """Claim and drive until `stop` is set, then drain and return. A database it cannot
        reach at start is a `StoreError` at once; one that drops later is retried."""
        stop = stop or anyio.Event()
        await self.store.open()
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._listen)
            async with anyio.create_task_group() as drives:
                drives.start_soon(self._until, stop)
                look = True
                while not self.draining:
                    try:
                        await self._fill(drives, look=look)
                    except Exception as exc:  # a database hiccup: log it, try at the next poll
                        log.warning("claiming failed: %s: %s", type(exc).__name__, exc)
                    look = True
                    with anyio.move_on_after(await self._until_due()):
                        await self._wake.wait()
                        look = self._look
                    self._wake, self._look = anyio.Event(), True
            outer.cancel_scope.cancel()

    async def _until_due(self) -> float:
        """Seconds to the next poll, or sooner to the first sleeping run's due time."""
        try:
            due = await self.queue.next_wake()
        except Exception as exc:  # a database hiccup: poll as usual
            log.warning("reading timers failed: %s: %s", type(exc).__name__, exc)
            due = None
        every = self.settings.every
        if due is None or due <= time.time():  # none, or one this worker could not claim
            return every  # (another version, a live holder, no free slot): poll as usual
        return min(every, due - time.time() + 0.005)

    async def _until(self, stop: anyio.Event) -> None:
        await stop.wait()
        self.draining = True
        self.wake()

    async def _fill(self, drives: TaskGroup, *, look: bool = True) -> None:
        """Claim as many runs as there are free slots and start driving them; with `look`,
        load the charts of new versions and take over dead local holders' runs too."""
        free = self.settings.concurrency - len(self.active)
        if free <= 0:
            return
        versions = await self._loadable() if look else list(self.charts)
        claims = await self.queue.claim(
            self.settings.name, versions, limit=free, ttl=self.settings.lease_ttl
        )
        for claim in claims:
            self.active.add(claim.lease.run_id)
            drives.start_soon(self._drive, claim.lease, claim.tries)
        if not look or len(claims) >= free:
            return
        for run_id in await self.queue.abandoned_here(versions):
            if len(self.active) >= self.settings.concurrency:
                break
            if run_id in self.active:
                continue
            try:
                lease = await self.store.acquire(
                    run_id, self.settings.name, self.settings.lease_ttl
                )
            except LeaseHeldError:
                continue
            self.active.add(run_id)
            drives.start_soon(self._drive, lease, -1)  # its tries unknown: reset them

    async def _loadable(self) -> list[str]:
        """The chart versions this worker can drive, loading any new one that claimable
        runs need; a version that fails to load defers (or blocks) its runs."""
        for version in await self.queue.pending_versions() - self.charts.keys():
            try:
                self.charts[version] = await self._load(version)
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
                blocked = await self.queue.defer(
                    version,
                    problem,
                    max_tries=self.settings.max_tries,
                    backoff=self.settings.backoff,
                )
                log.warning("chart version %s does not load: %s", version, problem)
                for run_id in blocked:
                    log.error("run %s blocked: %s", run_id, problem)
        return list(self.charts)

    async def _load(self, version: str) -> tuple[Chart, ModuleType]:
        source = await self.store.chart_source(version)
        if source is None:
            raise StatechartError(
                f"chart version {version} has no stored source (its runs were started from "
                "a chart built inside a function); start them with `statechart submit`"
            )
        chart, module = load_trusted(source, self.settings.agents)
        compiled(chart)
        gc.collect()
        gc.freeze()  # modules and charts outlive every run: keep them out of the GC's passes
        if chart.version != version:
            raise StatechartError(
                f"{source} is now chart '{chart.name}' version {chart.version}, but its runs "
                f"were stored under version {version}; deploy the chart they started with"
            )
        return chart, module

    def _model(self, run: Run) -> Model:
        found = self.models.get(run.model)
        if found is None:
            found = self.models[run.model] = from_spec(run.model, run.run_id)
        return found

    async def _drive(self, lease: Lease, tries: int) -> None:
        run_id = lease.run_id
        releases = False
        try:
            loaded = await self.store.load(run_id)
            chart, _ = self.charts[loaded.snapshot.chart_version]
            model = self._model(current(chart, loaded))

            def each(record: Any) -> bool:
                if self.on_step is not None:
                    self.on_step(run_id, record.run)
                return self.draining

            releases = True  # from here on, the drive releases the lease (and puts the
            # run back if it stops while the run is still running: a drain)
            relay = relay_for(self.store)  # an inspector on this machine sees it live
            try:
                last = await drive_to_end(
                    chart,
                    run_id,
                    store=self.store,
                    model=model,
                    lease=lease,
                    lease_ttl=lease.ttl,
                    resuming=True,
                    each=each,
                    max_sleep=self.settings.max_sleep,
                    on=relay,
                )
            finally:
                if relay is not None:
                    relay.close()
            if tries:
                try:
                    await self.queue.succeeded(run_id)
                except Exception as exc:  # the drive went through; only the count is stale
                    log.warning("run %s: could not reset its tries: %s", run_id, exc)
            if last is not None:
                log.info("run %s: %s in '%s'", run_id, last.status, last.state)
        except (LeaseHeldError, LeaseLostError) as exc:
            log.info("run %s: another driver has it (%s)", run_id, exc)
        except Exception as exc:
            await self._failed(lease, exc, released=releases)
        finally:
            self.active.discard(run_id)
            self.driven += 1
            self.wake(look=False)

    async def _failed(self, lease: Lease, exc: Exception, *, released: bool) -> None:
        """Log a drive that failed and count it against its run (blocked after its tries);
        never raise: a run this cannot record is found again when its lease expires."""
        problem = f"{type(exc).__name__}: {exc}"
        log.error("run %s failed to drive: %s", lease.run_id, problem)
        try:
            await self.queue.retry_later(
                lease.run_id,
                problem,
                max_tries=self.settings.max_tries,
                backoff=self.settings.backoff,
            )
            if not released:  # a takeover with a call in doubt keeps it for the next claim
                doubt = lease.took_over and lease.previous_seq is not None
                await self.store.release(lease, clean=not doubt, failed=True)
        except Exception as again:
            log.error("run %s: could not record the failure: %s", lease.run_id, again)

    async def _listen(self) -> None:
        """Wake the loop on every notification; reopen a dropped connection (with a pause
        that grows to the poll interval) and claim once on reconnect, since notifications
        sent while it was down are lost."""
        pause = 0.05
        first = True
        while True:
            try:
                async with listening(self.store.dsn, name=self.settings.name) as conn:
                    if not first:
                        self.reconnects += 1
                        log.info("LISTEN connection reopened; polling the queue once")
                        self.wake()
                    first, pause = False, 0.05
                    while True:
                        async for _ in conn.notifies(timeout=self.settings.every):
                            self.wake()
                        await conn.execute("SELECT 1")  # a silently dead link fails here
            except Exception as exc:
                log.warning("LISTEN connection lost (%s: %s); reopening", type(exc).__name__, exc)
                first = False
                await anyio.sleep(pause)
                pause = min(pause * 2, self.settings.every)
