"""The in-memory store: for tests and benchmarks; the same contract as the durable ones."""

from __future__ import annotations

from ..errors import ConflictError, RunNotFoundError
from ..models.base import Message
from ..run import Event, Run, Status, Step
from .base import Intent, intents_of


class MemoryStore:
    """Keeps every run, event and transcript delta in dictionaries."""

    def __init__(self) -> None:
        self._runs: dict[str, Run] = {}
        self._events: dict[str, list[Event]] = {}
        self._after: dict[str, list[Run]] = {}
        self._transcripts: dict[tuple[str, int], list[Message]] = {}
        self._fingerprints: dict[str, set[str]] = {}

    async def create(self, run: Run) -> None:
        if run.run_id in self._runs:
            raise ConflictError(f"run {run.run_id} already exists; choose another run id")
        self._runs[run.run_id] = run
        self._events[run.run_id] = []
        self._after[run.run_id] = []
        self._fingerprints[run.run_id] = set()

    async def append(self, step: Step) -> None:
        event = step.event
        run_id = event.run_id
        current = self._runs.get(run_id)
        if current is None:
            raise RunNotFoundError(f"no run {run_id} in this store; create it first")
        if event.seq != current.seq + 1:
            raise ConflictError(
                f"run {run_id} already has event {event.seq} (stored seq is {current.seq}); "
                "another writer advanced it: reload the run"
            )
        self._events[run_id].append(event)
        self._after[run_id].append(step.run)
        self._runs[run_id] = step.run
        if step.delta and event.visit is not None:
            self._transcripts.setdefault((run_id, event.visit), []).extend(step.delta)
        if event.fingerprint is not None:
            self._fingerprints[run_id].add(event.fingerprint)

    async def load(self, run_id: str) -> Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFoundError(f"no run {run_id} in this store") from None

    async def runs(self, *, status: Status | None = None, chart: str | None = None) -> list[Run]:
        return [
            r for r in self._runs.values()
            if (status is None or r.status == status) and (chart is None or r.chart == chart)
        ]

    async def events(self, run_id: str, *, after: int = 0) -> list[Event]:
        await self.load(run_id)
        return [e for e in self._events[run_id] if e.seq > after]

    async def transcript(self, run_id: str, visit: int) -> list[Message]:
        return list(self._transcripts.get((run_id, visit), []))

    async def fingerprints(self, run_id: str) -> set[str]:
        await self.load(run_id)
        return set(self._fingerprints[run_id])

    async def intents(self, run_id: str) -> list[Intent]:
        await self.load(run_id)
        return intents_of(self._events[run_id], self._after[run_id])
