"""The in-memory store: for tests and benchmarks; the same contract as the durable ones.

Snapshots, events, transcript messages and intents are kept as JSON, as a durable
store keeps them: a test on this store meets the values a database would refuse, and
thousands of runs in one process hold compact bytes instead of object graphs the
garbage collector must walk again and again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TypeVar

from msgspec.structs import replace

from statechart.errors import RunNotFoundError
from statechart.records.codec import decode, decode_messages, encode
from statechart.records.messages import Message
from statechart.records.record import Record
from statechart.records.run import Event, Intent, Run, Status, Step
from statechart.records.summary import RunPage, RunSummary
from statechart.store.base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_SNAPSHOT_EVERY,
    Lease,
    Loaded,
    lease_holder,
    summary_of,
)
from statechart.store.rows import carried
from statechart.store.rules import (
    event_exists,
    lease_held,
    lease_lost,
    not_next,
    run_exists,
    written_behind,
)

R = TypeVar("R", bound=Record)


class MemoryStore:
    """Keeps every run, event and transcript delta in dictionaries, for tests and demos.

    Nothing survives the process. Records are kept as JSON, as a database keeps them,
    so a test meets the values a database would refuse. `MemoryStore(encode=False)`
    keeps the records themselves: the fastest store, for benchmarks of the framework
    alone; values a database would refuse are then not caught.

    Isolation: none needed. It lives in one process, and each method changes its
    dictionaries without awaiting, so no other task interleaves with a write.

    Example:
        ```python
        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])
        assert run_sync(chart, store=MemoryStore(), model=model).state == "done"
        fastest = MemoryStore(encode=False)  # for benchmarks: keeps the records as they are
        ```
    """

    def __init__(
        self, *, encode: bool = True, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    ) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every={snapshot_every}; use 1 or more")
        self.encode = encode
        self.snapshot_every = snapshot_every
        """A running run's snapshot is written at least every this many events."""
        self._runs: dict[str, Any] = {}
        """run id -> the last snapshot written, as JSON (as a database keeps it)"""
        self._heads: dict[str, list[Any]] = {}
        """run id -> [live seq, status, chart, snapshot seq, seq it was created at]"""
        self._behind: dict[str, Run] = {}
        """run id -> the run after its last append, when its snapshot was not written"""
        self._bases: dict[str, list[tuple[int, Any]]] = {}
        self._events: dict[str, list[Any]] = {}
        self._transcripts: dict[tuple[str, int], list[Any]] = {}
        self._fingerprints: dict[str, set[str]] = {}
        self._intents: dict[str, list[Any]] = {}
        self._open: dict[str, dict[str, int]] = {}
        """run id -> call id -> index of its open intent"""
        self._done: dict[str, dict[int, int]] = {}
        """run id -> index of a completed intent -> seq of the event that completed it"""
        self._leases: dict[str, tuple[str, float, int]] = {}
        """run id -> (holder, expires, live seq at acquisition or -1 once another wrote)"""
        self._charts: dict[str, str] = {}
        self._sources: dict[str, str] = {}

    async def create(self, run: Run, intents: Sequence[Intent] = ()) -> None:
        if run.run_id in self._runs:
            raise run_exists(run.run_id)
        snapshot = self._put(run)
        self._runs[run.run_id] = snapshot
        self._heads[run.run_id] = [run.seq, run.status, run.chart, run.seq, run.seq]
        self._bases[run.run_id] = [(run.seq, snapshot)]
        self._events[run.run_id] = []
        self._fingerprints[run.run_id] = set()
        self._intents[run.run_id] = [self._put(i) for i in intents]
        self._open[run.run_id] = {i.call.id: n for n, i in enumerate(intents) if not i.completed}

    async def append(self, step: Step, lease: Lease | None = None) -> None:
        event, run = step.event, step.run
        run_id = event.run_id
        head = self._heads.get(run_id)
        if head is None:
            raise RunNotFoundError(f"no run {run_id} in this store; create it first")
        held = self._leases.get(run_id)
        if lease is not None and (held is None or held[0] != lease.holder):
            raise lease_lost(lease, held[0] if held else None, expired=False)
        if event.seq <= head[0]:
            raise event_exists(run_id, event.seq)
        if event.seq != head[0] + 1:
            raise not_next(run_id, head[0], event.seq)
        delta = (
            (encode(step.messages) if self.encode else step.messages)
            if step.messages and event.visit is not None
            else None
        )
        row = self._event_row(step, delta)
        behind = written_behind(step, lease, head[1], head[3], self.snapshot_every)
        self._events[run_id].append(row)
        head[0] = event.seq
        if behind:
            self._behind[run_id] = run
        else:
            self._write_snapshot(run)
            if lease is None and held is not None:
                self._leases[run_id] = (held[0], held[1], -1)
            if step.base:
                self._bases[run_id].append((run.seq, self._runs[run_id]))
        if delta is not None and event.visit is not None:
            self._transcripts.setdefault((run_id, event.visit), []).append(delta)
        if event.fingerprint is not None:
            self._fingerprints[run_id].add(event.fingerprint)
        intents, open_ = self._intents[run_id], self._open[run_id]
        for call_id in step.closed:
            n = open_.pop(call_id, None)
            if n is not None:
                self._done.setdefault(run_id, {})[n] = event.seq
        if step.opened is not None:
            open_[step.opened.call.id] = len(intents)
            intents.append(self._put(step.opened))

    def _write_snapshot(self, run: Run) -> None:
        head = self._heads[run.run_id]
        if run.seq >= head[3]:
            self._runs[run.run_id] = self._put(run)
            head[1], head[3] = run.status, run.seq
        self._behind.pop(run.run_id, None)

    def _put(self, record: Record) -> Any:
        """A record as the JSON a database row would hold (or itself, unencoded)."""
        if not self.encode:
            return record
        return encode(record)

    def _event_row(self, step: Step, delta: Any) -> Any:
        """The event as stored: its JSON, or, when the step's messages carry its result or
        its calls, its JSON without them beside those messages (not kept twice)."""
        event = step.event
        if not self.encode:
            return event
        in_result, in_calls = carried(event, step.messages) if delta is not None else (False, False)
        if not (in_result or in_calls):
            return encode(event)
        slim = replace(
            event,
            result=None if in_result else event.result,
            calls=() if in_calls else event.calls,
        )
        return (encode(slim), delta, in_result, in_calls)

    def _event(self, stored: Any) -> Event:
        if not self.encode:
            found: Event = stored
            return found
        if type(stored) is bytes:
            return decode(Event, stored)
        slim, delta, in_result, in_calls = stored
        event = decode(Event, slim)
        said = decode_messages(delta)
        if in_result:
            assert event.call is not None
            answer = next(m for m in said if m.role == "tool" and m.tool_call_id == event.call.id)
            event = replace(event, result=answer.content)
        if in_calls:
            event = replace(event, calls=next(m for m in said if m.role == "assistant").tool_calls)
        return event

    def _get(self, cls: type[R], stored: Any) -> R:
        found: R = decode(cls, stored) if self.encode else stored
        return found

    def _snapshot(self, run_id: str) -> Run:
        try:
            return self._get(Run, self._runs[run_id])
        except KeyError:
            raise RunNotFoundError(f"no run {run_id} in this store") from None

    async def load(self, run_id: str) -> Loaded:
        snapshot = self._snapshot(run_id)
        head = self._heads[run_id]
        rows = self._events[run_id][snapshot.seq - head[4] :]
        return Loaded(snapshot, tuple(self._event(r) for r in rows))

    async def base(self, run_id: str, at: int | None = None) -> Run:
        self._snapshot(run_id)
        found = [self._get(Run, b) for seq, b in self._bases[run_id] if at is None or seq <= at]
        return found[-1]

    async def runs(self, *, status: Status | None = None, chart: str | None = None) -> list[Run]:
        return [
            self._get(Run, self._runs[run_id])
            for run_id, (_, s, c, _, _) in self._heads.items()
            if (status is None or s == status) and (chart is None or c == chart)
        ]

    async def summaries(
        self, *, status: Status | None = None, chart: str | None = None
    ) -> list[RunSummary]:
        out = []
        for run_id, (_, s, c, _, _) in self._heads.items():
            if (status is None or s == status) and (chart is None or c == chart):
                run = self._behind.get(run_id) or self._snapshot(run_id)
                rows = self._events[run_id]
                last = self._event(rows[-1]) if rows else None
                out.append(summary_of(run, last.time if last is not None else None))
        return out

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
        found = [
            run_id
            for run_id, (_, s, c, _, _) in self._heads.items()
            if (status is None or s == status)
            and (chart is None or c == chart)
            and (not search or search in run_id)
            and (parent is None or self._snapshot(run_id).parent_run == parent)
        ]
        rows = []
        for run_id in found[::-1][offset : offset + limit]:
            run = self._behind.get(run_id) or self._snapshot(run_id)
            events = self._events[run_id]
            last = self._event(events[-1]) if events else None
            rows.append(summary_of(run, last.time if last is not None else None))
        return RunPage(rows=tuple(rows), total=len(found))

    async def events(self, run_id: str, *, after: int = 0) -> list[Event]:
        self._snapshot(run_id)
        first = self._heads[run_id][4]
        rows = self._events[run_id][max(0, after - first) :]
        return [self._event(r) for r in rows]

    async def transcript(self, run_id: str, visit: int) -> list[Message]:
        return [
            m
            for chunk in self._transcripts.get((run_id, visit), [])
            for m in (decode_messages(chunk) if self.encode else chunk)
        ]

    async def fingerprints(self, run_id: str) -> set[str]:
        self._snapshot(run_id)
        return set(self._fingerprints[run_id])

    async def intents(self, run_id: str) -> list[Intent]:
        self._snapshot(run_id)
        done = self._done.get(run_id, {})
        out = [self._get(Intent, i) for i in self._intents[run_id]]
        return [
            replace(i, completed=True, completed_seq=done[n]) if n in done else i
            for n, i in enumerate(out)
        ]

    async def acquire(self, run_id: str, holder: str, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        self._snapshot(run_id)
        now = time.time()
        held = self._leases.get(run_id)
        if held is not None and held[1] > now:
            raise lease_held(run_id, held[0], held[1] - now)
        mine = lease_holder(holder)
        seq = self._heads[run_id][0]
        self._leases[run_id] = (mine, now + ttl, seq)
        if held is None:
            return Lease(run_id, mine, ttl)
        previous = seq if held[2] != -1 else None
        return Lease(run_id, mine, ttl, took_over=True, previous=held[0], previous_seq=previous)

    async def renew(self, lease: Lease) -> None:
        held = self._leases.get(lease.run_id)
        if held is None or held[0] != lease.holder or held[1] == 0.0:  # released (unclean)
            raise lease_lost(lease, held[0] if held else None, expired=False)
        self._leases[lease.run_id] = (held[0], time.time() + lease.ttl, held[2])

    async def release(self, lease: Lease, *, clean: bool = True, failed: bool = False) -> None:
        held = self._leases.get(lease.run_id)
        if held is None or held[0] != lease.holder:
            return  # refused (the lease was lost): what is behind is the new holder's
        behind = self._behind.get(lease.run_id)
        if behind is not None:
            self._write_snapshot(behind)
        if clean:
            del self._leases[lease.run_id]
        else:
            self._leases[lease.run_id] = (lease.holder, 0.0, held[2])

    async def save_chart(
        self,
        version: str,
        description: str,
        source: str | None = None,
    ) -> None:
        self._charts.setdefault(version, description)
        if source is not None:
            self._sources[version] = source

    async def chart_source(self, version: str) -> str | None:
        return self._sources.get(version)

    async def chart_description(self, version: str) -> str | None:
        return self._charts.get(version)
