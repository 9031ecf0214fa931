"""Hypothesis: any recorded run of a random chart (nested levels, guards, handlers, tools
that fail, retry, need approval or carry keys, a model that errs and misbehaves, people
approving, rejecting, cancelling), replayed against the same chart, agrees with its record
to the end, step for step: with the handlers' recorded decisions served, and with the
handlers run again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from hypothesis import given, note
from hypothesis import strategies as st

from statechart import FunctionModel, approve, cancel, reject, replay, run_to_end, start
from statechart.chart.names import SUBSTATES
from statechart.engine import compiled
from tests.engine.test_properties import (
    GUARDS,
    SETTINGS,
    TOOLSETS,
    BoundedStore,
    World,
    event_bound,
)
from tests.support.strategies import ChartOptions, charts


class Taped(World):
    """A world whose code-state handlers decide on the replay as they did when recorded
    (a handler is the chart's own code: it runs again, so its draws are played back)."""

    def __init__(self, data: st.DataObject) -> None:
        super().__init__(data)
        self.tape: list[Any] = []
        self.replaying = False

    def handler(self, targets: Sequence[str], writes: Sequence[str]) -> Any:
        inner = super().handler(targets, writes)

        async def decide(ctx: Any) -> Any:
            if self.replaying:
                out = self.tape.pop(0)
                if isinstance(out, BaseException):
                    raise out
                return out
            try:
                out = await inner(ctx)
            except Exception as exc:
                self.tape.append(exc)
                raise
            self.tape.append(out)
            return out

        return decide


@given(st.data())
@SETTINGS
def test_a_recorded_random_run_replayed_against_its_chart_agrees(data: st.DataObject) -> None:
    world = Taped(data)
    options = ChartOptions(
        guards=st.sampled_from([None, None, *GUARDS.values()]),
        toolsets=TOOLSETS,
        handler=world.handler,
    )
    chart = data.draw(charts(options), "chart")
    note(chart.describe())
    model = FunctionModel(world.reply)
    store = BoundedStore(event_bound(compiled(chart)))

    async def main() -> None:
        run = await start(chart, store=store, model=model, clock=lambda: 0.0)
        end = await run_to_end(chart, run, store=store, model=model, clock=lambda: 0.0)
        for _ in range(3):
            if end.status != "waiting":
                break
            how = data.draw(st.sampled_from(["approve", "reject", "cancel"]), "decision")
            if how == "cancel":
                await cancel(chart, run.run_id, store=store, reason="stop", by="ops")
            elif how == "approve":
                await approve(chart, run.run_id, store=store, by="ops")
            else:
                await reject(chart, run.run_id, store=store, by="ops", reason="no")
            end = await run_to_end(chart, run.run_id, store=store, model=model, clock=lambda: 0.0)
        events = await store.events(run.run_id)
        note(", ".join(f"{e.seq}:{e.trigger}:{e.source}->{e.target}" for e in events))
        decided = list(world.tape)
        handled = [  # one event per handler call, in order
            e
            for e in events
            if e.actor == "code" and e.call is None and e.source.split(".")[-1] not in SUBSTATES
        ]
        assert len(handled) == len(decided)
        world.replaying = True
        # a refused decision's target is not recorded: that handler (and only it) runs again
        world.tape = [
            d
            for d, e in zip(decided, handled, strict=True)
            if e.refused is not None or (e.error or "").startswith("InvalidDecision")
        ]
        (served,) = (await replay(chart, store=store)).verdicts
        assert (served.outcome, served.agreed) == ("agree", len(events)), served
        assert world.tape == []
        world.tape = list(decided)
        (ran,) = (await replay(chart, store=store, run_handlers=True)).verdicts
        assert (ran.outcome, ran.agreed) == ("agree", len(events)), ran
        assert world.tape == []  # each handler ran again, deciding as it did

    anyio.run(main)
