"""The hot path's record constructors (`records/build.py`, `records/spent.py`): what they
build equals what the validating constructors build, given fields included."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from statechart.chart.tools import checked
from statechart.engine.effects import RunTool
from statechart.records.build import assemble, build, evolve
from statechart.records.messages import Message, ToolCall
from statechart.records.run import CheckedCall, Event, Step, Visit
from statechart.records.spent import Spent, spent
from tests.engine.test_react import fetch

AMOUNTS = st.integers(0, 10**12)


@given(st.tuples(*[AMOUNTS] * 7))
def test_spent_equals_the_validated_record(amounts: tuple[int, ...]) -> None:
    names = ("steps", "model_calls", "tool_calls", "input_tokens", "output_tokens")
    names += ("cost_micros", "wall_ms")
    made, validated = spent(*amounts), Spent(**dict(zip(names, amounts, strict=True)))
    assert made == validated and made.model_fields_set == validated.model_fields_set
    assert made.model_dump_json() == validated.model_dump_json()
    assert made + validated == Spent(**{n: 2 * a for n, a in zip(names, amounts, strict=True)})
    assert hash(made) == hash(validated) and {made: 1}[validated] == 1
    assert (made != Spent(steps=amounts[0] + 1)) and made != amounts


def test_spent_compares_like_pydantic_across_classes() -> None:
    """The fast `__eq__` keeps pydantic's rule: another class is never equal."""

    class Other(Spent):
        pass

    assert Other(steps=1) != Spent(steps=1) and Spent(steps=1) != Other(steps=1)
    assert Other(steps=1) == Other(steps=1)
    odd = Spent(steps=1).model_copy(update={"bogus": 1})  # a key that is not a field
    assert odd == Spent(steps=1) and hash(odd) == hash(Spent(steps=1))


def test_build_fills_defaults_and_factories_and_sets_only_the_given_fields() -> None:
    event = build(Event, {"run_id": "r", "seq": 1, "time": 0.0, "source": "a", "target": "b"})
    event = evolve(event, {"trigger": "go:b", "actor": "code"})
    validated = Event(run_id="r", seq=1, time=0.0, source="a", target="b", trigger="go:b",
                      actor="code")  # fmt: skip
    assert event == validated and event.model_fields_set == validated.model_fields_set
    assert event.patch == {} and event.patch is not build(Event, {}).patch  # fresh factories
    visit = build(Visit, {"state": "w", "seq": 2})
    assert visit == Visit(state="w", seq=2) and visit.calls is not Visit(state="w", seq=2).calls


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def test_assemble_equals_each_frozen_records_constructor() -> None:
    """Given every field, `assemble` makes what the constructor makes. (A field its callers
    in `engine/react.py` leave out fails the compiled-step check: comparing the record
    with the general step's reads every field.)"""
    call = ToolCall(id="c1", name="fetch", arguments={"n": 1})
    found = checked(fetch, call)
    assert isinstance(found, CheckedCall)
    tool_run = RunTool(call, fetch, {"n": 1}, found.fingerprint, "k", fetch.parse({"n": 1}))
    message = Message(role="tool", content="x", tool_call_id="c1")
    event = build(Event, {"run_id": "r", "seq": 1})
    step = Step(event=event, run=None, messages=(message,), checked=found)  # type: ignore[arg-type]
    for value in (found, tool_run, step):
        again = assemble(type(value), _fields(value))
        assert again == value and _fields(again) == _fields(value)
    assert found == CheckedCall(call, {"n": 1}, found.fingerprint)
