"""Run and event records round-trip through JSON exactly."""

from __future__ import annotations

import pytest

from statechart import Event, Run, call, reply
from tests.engine.test_advance import chart, finish
from tests.support.helpers import run_script

pytestmark = pytest.mark.anyio


async def test_run_and_events_round_trip_through_json() -> None:
    end, steps, _, store = await run_script(
        chart(), [reply(call("search_kb", query="q")), *finish()], {"ticket": "T-9"}
    )
    for s in steps:
        assert Run.model_validate_json(s.run.model_dump_json()) == s.run
        assert Event.model_validate_json(s.event.model_dump_json()) == s.event
    mid = steps[1].run
    assert mid.visit is not None
    assert Run.model_validate_json(mid.model_dump_json()).visit == mid.visit
    assert end.model == "scripted" and end.chart_version == chart().version


async def test_snapshot_is_bounded_while_the_transcript_grows() -> None:
    replies = [reply(call("search_kb", query=str(i))) for i in range(8)]
    _, steps, _, _ = await run_script(chart(max_iterations=9), [*replies, *finish()])
    sizes = [len(s.run.model_dump_json()) for s in steps if s.event.trigger == "results"]
    assert max(sizes) - min(sizes) < 40  # counters grow by digits, never by history
