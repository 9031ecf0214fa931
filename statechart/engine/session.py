"""What a driver keeps beside a run: the current visit's transcript and the fingerprints of
the calls that ran. Rebuilt from the store on start and resume (`load_session`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from statechart.records.estimate import Price
from statechart.records.messages import Message, ToolCall
from statechart.records.run import CheckedCall, Run, Step, Visit


@dataclass
class Session:
    """What a driver keeps in memory beside a run: the visit's transcript, the calls that ran.

    `plan()` reads it and `absorb()` keeps it in line after each step. You need one only
    to call `step()` yourself (`drive()` keeps its own); build it with
    `load_session(store, run)`. `step()` stores nothing.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, load_session, reply, start, step

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
            session = await load_session(store, run)
            while (record := await step(chart, run, model=model, session=session)) is not None:
                session.absorb(run, record)  # the run before the step, and the step
                run = record.run
            assert run.state == "done"
            assert (await store.load(run.run_id)).seq == 0  # step() stored nothing


        anyio.run(main)
        ```
    """

    transcript: list[Message] = field(default_factory=list)
    """The messages of the current visit of the current model state."""
    fingerprints: set[str] = field(default_factory=set)
    """Fingerprints of every call that ran in this run (and its fork parents)."""
    carry_ms: float = 0.0
    """Wall time under a millisecond not yet charged, so many short steps still add up."""
    checked: CheckedCall | None = None
    """The validated arguments of the call whose intent the last step recorded."""
    price: Price | None = None
    """What the driving model costs, if known: strict cost caps price a call's worst case."""
    regions: dict[str, Session] = field(default_factory=dict)
    """In a parallel state: each region's own session (its visit's transcript); they
    share this one's fingerprints."""

    def region(self, path: str) -> Session:
        """The session of region `path` (made on first use)."""
        found = self.regions.get(path)
        if found is None:
            found = self.regions[path] = Session(fingerprints=self.fingerprints, price=self.price)
        return found

    def absorb(self, before: Run, step: Step) -> None:
        """Keep the transcript and fingerprints in line with the run after `step`."""
        if before.regions:
            source = step.event.source
            path = next((p for p in before.regions if source.startswith(p + ".")), None)
            if path is not None:  # a region's step: its own session takes it
                after_region = step.run.regions.get(path)
                self.region(path)._absorbed(
                    before.regions[path].visit,
                    after_region.visit if after_region is not None else None,
                    step,
                )
                return
            self.regions = {}
        self._absorbed(before.visit, step.run.visit, step)

    def _absorbed(self, was: Visit | None, now: Visit | None, step: Step) -> None:
        if now is None or was is None or now.seq != was.seq:
            self.transcript = []
        elif step.messages:
            self.transcript.extend(step.messages)
        if step.event.fingerprint is not None:
            self.fingerprints.add(step.event.fingerprint)
        self.checked = step.checked

    def checked_for(self, call: ToolCall) -> CheckedCall | None:
        """The validated arguments of `call`, when the last step recorded its intent."""
        found = self.checked
        if found is None or (found.call is not call and found.call != call):
            return None
        return found

    def charge_wall(self, seconds: float) -> int:
        """Whole milliseconds to charge for `seconds` of driving; the rest carries over."""
        self.carry_ms += seconds * 1000.0
        whole = int(self.carry_ms)
        self.carry_ms -= whole
        return whole
