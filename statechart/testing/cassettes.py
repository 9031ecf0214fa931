"""Cassettes for tests: the model replies and tool results of the runs a test makes, kept
as JSON next to the test. Recorded once with the real model and tools; replayed after
that with neither, so the test is fast, offline and deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from statechart.chart.chart import Chart
from statechart.errors import CassetteError
from statechart.models.base import Model
from statechart.records.codec import convert, to_dict
from statechart.records.run import Event, Run
from statechart.rerun.cassette import Recording, Renames
from statechart.rerun.lockstep import Lockstep
from statechart.runtime.api import approve, reject, resume, run_to_end, start
from statechart.runtime.stand_in import standing_in
from statechart.store.memory import MemoryStore
from statechart.testing.assertions import Ran

FORMAT = 1


class Cassette:
    """The runs one test makes, recorded to `path` or replayed from it.

    Recording (no file yet, or `record=True`: `pytest --statechart-record`) runs the real
    model and tools and writes the file when the test ends. Replaying serves the recorded
    replies and results instead; the model passed in is not called, no tool runs.
    `store` is the in-memory store the runs live in.
    """

    def __init__(self, path: Path, *, record: bool | None = None) -> None:
        self.path = path
        self.recording = record if record is not None else not path.exists()
        self.store = MemoryStore()
        self._recorded: list[dict[str, Any]] = [] if self.recording else self._read()
        self._tapes: dict[str, Lockstep] = {}
        self._models: dict[str, Model] = {}
        self._made: list[str] = []
        self.saved = False

    def _read(self) -> list[dict[str, Any]]:
        try:
            doc = json.loads(self.path.read_text())
            runs = doc["runs"]
            assert doc["statechart_cassette"] == FORMAT and isinstance(runs, list)
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise CassetteError(
                f"{self.path} is not a statechart cassette ({exc!r}); delete it or record it "
                "again with pytest --statechart-record"
            ) from None
        return runs

    async def run(
        self,
        chart: Chart,
        *,
        model: Model | None = None,
        context: dict[str, Any] | None = None,
    ) -> Ran:
        """Start a run of `chart` and drive it until it ends or waits (recording: with
        `model`; replaying: with the recorded replies, `model` unused)."""
        if self.recording:
            if model is None:
                raise CassetteError(
                    f"{self.path} is being recorded: pass model= (the real one) to run()"
                )
            run = await start(chart, store=self.store, model=model, context=context)
            run = await run_to_end(chart, run, store=self.store, model=model)
            self._made.append(run.run_id)
            self._models[run.run_id] = model
            return await self._ran(chart, run)
        index = len(self._made)
        if index >= len(self._recorded):
            raise CassetteError(
                f"{self.path} holds {len(self._recorded)} run(s); the test starts one more: "
                "record it again with pytest --statechart-record"
            )
        lock = self._tape(chart, self._recorded[index])
        base, tape = lock.recording.base, lock.cassette
        self._made.append(base.run_id)
        given = context if context is not None else base.context
        run = await start(chart, store=self.store, model=tape, context=given, run_id=base.run_id)
        if run.context != base.context:
            raise CassetteError(
                f"{self.path}: run {index + 1} starts with the context {run.context}, but it was "
                f"recorded with {base.context}: record it again with pytest --statechart-record"
            )
        with standing_in(tape.answer):
            run = await run_to_end(chart, run, store=self.store, model=tape)
        return await self._checked(lock, chart, run)

    async def approve(
        self,
        chart: Chart,
        ran: Ran,
        *,
        by: str,
        note: str = "",
        edits: dict[str, Any] | None = None,
    ) -> Ran:
        """Approve what `ran` waits for, and drive it on."""
        await approve(chart, ran.run.run_id, store=self.store, by=by, note=note, edits=edits)
        return await self._resumed(chart, ran)

    async def reject(self, chart: Chart, ran: Ran, *, by: str, reason: str) -> Ran:
        """Reject what `ran` waits for, and drive it on."""
        await reject(chart, ran.run.run_id, store=self.store, by=by, reason=reason)
        return await self._resumed(chart, ran)

    async def _resumed(self, chart: Chart, ran: Ran) -> Ran:
        run_id = ran.run.run_id
        lock = self._tapes.get(run_id)
        if lock is None:
            run = await resume(chart, run_id, store=self.store, model=self._models.get(run_id))
            return await self._ran(chart, run)
        with standing_in(lock.cassette.answer):
            run = await resume(chart, run_id, store=self.store, model=lock.cassette)
        return await self._checked(lock, chart, run)

    def _tape(self, chart: Chart, recorded: dict[str, Any]) -> Lockstep:
        try:
            base = convert(Run, recorded["base"])
            events = tuple(convert(Event, e) for e in recorded["events"])
        except (KeyError, TypeError, msgspec.ValidationError) as exc:
            raise CassetteError(f"{self.path}: a recorded run does not read ({exc})") from None
        lock = Lockstep(chart, Recording(base=base, events=events, status="ended"), Renames())
        self._tapes[base.run_id] = lock
        return lock

    async def _checked(self, lock: Lockstep, chart: Chart, run: Run) -> Ran:
        """The run, once each of its new steps agrees with its recording; else a
        `CassetteError` saying where and why they part."""
        ran = await self._ran(chart, run)
        for event in ran.events[lock.compared :]:
            verdict = lock.matched(event)
            if verdict is not None:
                raise CassetteError(
                    f"{self.path}: run {run.run_id} parts from its recording at step "
                    f"{verdict.seq} in '{verdict.state}' ({verdict.kind}): {verdict.detail}. "
                    "The chart or the test changed since it was recorded: record it again "
                    "with pytest --statechart-record"
                )
        left = [e for e in lock.expected if e.actor != "human"]
        if run.status == "ended" and left:
            raise CassetteError(
                f"{self.path}: run {run.run_id} ended in '{run.state}' at step {run.seq}, "
                f"where its recording went on ({left[0].source} -> {left[0].target}): record "
                "it again with pytest --statechart-record"
            )
        return ran

    async def _ran(self, chart: Chart, run: Run) -> Ran:
        events = tuple(await self.store.events(run.run_id))
        return Ran(run=run, events=events, chart=chart)

    async def recorded(self) -> list[dict[str, Any]]:
        """What the file holds for the runs made so far."""
        out = []
        for run_id in self._made:
            base = await self.store.base(run_id, at=0)
            events = await self.store.events(run_id)
            out.append({"base": to_dict(base), "events": [to_dict(e) for e in events]})
        return out

    async def save(self) -> None:
        """Write the file (recording only; nothing when no run was made)."""
        if not self.recording or not self._made:
            return
        doc = {"statechart_cassette": FORMAT, "runs": await self.recorded()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        self.saved = True
