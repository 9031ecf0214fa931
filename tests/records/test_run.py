"""Run and event records round-trip through JSON exactly; decoding checks every field."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statechart import Event, Run, Spent, Step, ToolCall, call, reply, to_dict
from statechart.records.codec import convert, decode, encode
from tests.engine.test_advance import chart, finish
from tests.support.helpers import run_script
from tests.support.typed import tools_chart

pytestmark = pytest.mark.anyio

AMOUNTS = st.integers(0, 10**12)
NAMES = ("steps", "model_calls", "tool_calls", "input_tokens", "output_tokens", "cost_micros")
NAMES += ("wall_ms",)


async def test_run_and_events_round_trip_through_json() -> None:
    end, steps, _, store = await run_script(
        chart(), [reply(call("search_kb", query="q")), *finish()], {"ticket": "T-9"}
    )
    for s in steps:
        assert decode(Run, encode(s.run)) == s.run
        assert decode(Event, encode(s.event)) == s.event
        assert convert(Run, to_dict(s.run)) == s.run  # every field, defaults included
    mid = steps[1].run
    assert mid.visit is not None
    assert decode(Run, encode(mid)).visit == mid.visit
    assert end.model == "scripted" and end.chart_version == chart().version


async def test_snapshot_is_bounded_while_the_transcript_grows() -> None:
    replies = [reply(call("search_kb", query=str(i))) for i in range(8)]
    _, steps, _, _ = await run_script(chart(max_iterations=9), [*replies, *finish()])
    sizes = [len(encode(s.run)) for s in steps if s.event.trigger == "results"]
    assert max(sizes) - min(sizes) < 40  # counters grow by digits, never by history


async def test_encoding_leaves_defaults_out_and_decoding_fills_them_in() -> None:
    end, steps, _, _ = await run_script(tools_chart(), [reply(call("next_state", target="done"))])
    for s in steps:
        body = msgspec.json.decode(encode(s.event))
        assert "span" not in body and "patch" not in body  # never set in this run
        assert decode(Event, encode(s.event)).patch == {}
    assert set(to_dict(end)) == set(Run.__struct_fields__)


def test_records_are_frozen_and_compare_by_value() -> None:
    a = ToolCall(id="c1", name="t", arguments={"q": 1})
    with pytest.raises(AttributeError):
        a.name = "other"  # type: ignore[misc]
    assert a == ToolCall(id="c1", name="t", arguments={"q": 1}) and a != ToolCall(id="c1", name="t")
    assert ToolCall(id="x", name="t").arguments is not ToolCall(id="y", name="t").arguments


def test_decoding_refuses_a_wrong_type_naming_the_field() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.actor"):
        decode(Event, b'{"run_id":"r","seq":1,"time":0,"source":"a","target":"b",'
                      b'"trigger":"t","actor":"wizard"}')  # fmt: skip
    with pytest.raises(msgspec.ValidationError, match=r"\$\.seq"):
        decode(Run, b'{"run_id":"r","chart":"c","chart_version":"v","model":"m","state":"a",'
                    b'"seq":"7"}')  # fmt: skip


@given(st.tuples(*[AMOUNTS] * 7))
def test_spent_adds_up_and_hashes_by_value(amounts: tuple[int, ...]) -> None:
    made, named = Spent(*amounts), Spent(**dict(zip(NAMES, amounts, strict=True)))
    assert made == named and hash(made) == hash(named) and {made: 1}[named] == 1
    assert made + named == Spent(**{n: 2 * a for n, a in zip(NAMES, amounts, strict=True)})
    assert decode(Spent, encode(made)) == made
    assert (made != Spent(steps=amounts[0] + 1)) and made != amounts


def test_stamping_a_span_changes_only_that_steps_event() -> None:
    names = {"run_id": "r", "time": 0.0, "source": "a", "target": "b", "trigger": "stamp"}
    traced = Event(**names, seq=2, actor="code")
    stamped = Step(run=None, event=traced).with_span("00000000000000aa")  # type: ignore[arg-type]
    assert stamped.event.span == "00000000000000aa" and traced.span is None
    assert msgspec.structs.replace(stamped.event, span=None) == traced
