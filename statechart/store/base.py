"""The `Store` port: an append-only event log with a snapshot cache, transcripts and intents.

Every backend (memory, SQLite, PostgreSQL) implements these few async
methods. `append` is the one write per transition: the event row, the new
snapshot and the transcript delta, atomically, fenced by `UNIQUE(run_id, seq)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..models.base import Message, ToolCall
from ..run import Event, Run, Status, Step


class Intent(BaseModel):
    """A tool call that was recorded as about to run; `completed` once its result is in."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall
    state: str
    seq: int
    """Seq of the event that recorded the intent."""
    completed: bool = False
    """True once the call left the queue: it ran, or was refused, rejected or dropped."""


@runtime_checkable
class Store(Protocol):
    """Where runs live. All methods are async so database backends fit the same shape."""

    async def create(self, run: Run) -> None:
        """Store a new run's first snapshot (seq 0); raises `ConflictError` if the id exists."""
        ...

    async def append(self, step: Step) -> None:
        """Append `step.event`, replace the snapshot with `step.run` and add `step.delta`.

        One transaction. Raises `ConflictError` when the run already has an event at
        that seq (another writer got there first) and changes nothing.
        """
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
        """Tool calls recorded as about to run, with whether each completed."""
        ...


def intents_of(events: Sequence[Event], runs_after: Sequence[Run]) -> list[Intent]:
    """Intents as a fold: a tool call becomes an intent when a step leaves it next to run in
    `act`; it completes when it leaves the queue (it ran, or was refused, rejected, dropped).
    A cancel that lands while the call may be running leaves its intent open."""
    out: list[Intent] = []
    open_: dict[str, int] = {}  # call id -> index in `out` of its open intent
    before: Run | None = None
    for event, run in zip(events, runs_after, strict=True):
        queued = {q.call.id for q in run.pending}
        in_flight = event.trigger == "cancel" and before is not None and before.state.endswith(
            ".act")
        head_id = before.pending[0].call.id if in_flight and before and before.pending else None
        for call_id, i in list(open_.items()):
            if call_id not in queued and call_id != head_id:
                out[i] = out[i].model_copy(update={"completed": True})
                del open_[call_id]
        if run.state.endswith(".act") and run.pending:
            head = run.pending[0].call
            if head.name != "next_state":
                if head.id not in open_:
                    open_[head.id] = len(out)
                    out.append(Intent(call=head, state=run.state, seq=event.seq))
                elif out[open_[head.id]].call != head:  # an approval edited its arguments
                    out[open_[head.id]] = out[open_[head.id]].model_copy(update={"call": head})
        before = run
    return out
