"""Run and event records round-trip through JSON exactly; stamping one never changes another."""

from __future__ import annotations

import pytest

from statechart import Event, Run, Spent, Step, call, reply
from statechart.records.build import build
from tests.engine.test_advance import chart, finish
from tests.support.helpers import run_script
from tests.support.typed import tools_chart

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


async def test_a_store_round_trip_after_evolve_keeps_every_field() -> None:
    """Every snapshot a drive produces (built with `evolve`) dumps with exclude_unset and
    validates back to an equal run: no field is lost as unset."""
    end, steps, _, _ = await run_script(tools_chart(), [reply(call("next_state", target="done"))])
    for s in steps:
        dumped = s.run.model_dump(exclude_unset=True)
        assert type(s.run).model_validate(dumped) == s.run


def test_stamping_a_span_does_not_change_other_events_fields_set() -> None:
    """Records built from the same field names share one fields set; stamping a step's span
    gives its event a set of its own, so no other event reports 'span' as set."""
    names = {
        "run_id": "r",
        "time": 0.0,
        "source": "state-a",
        "target": "state-b",
        "trigger": "stamp",
        "actor": "code",
        "usage": Spent(),
        "reason": "why",
        "exhausted": "state-a:steps",
        "by": "someone",
    }
    other = build(Event, {**names, "seq": 1})
    traced = build(Event, {**names, "seq": 2})
    stamped = Step(run=None, event=traced).with_span("00000000000000aa")  # type: ignore[arg-type]
    assert "span" in stamped.event.model_fields_set
    assert "span" not in traced.model_fields_set
    assert "span" not in other.model_fields_set
    assert "span" not in build(Event, {**names, "seq": 3}).model_fields_set
