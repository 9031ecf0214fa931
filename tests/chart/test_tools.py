"""Tools: schemas from signatures, validation, retry policies, output caps, fingerprints."""

from __future__ import annotations

import hashlib
from typing import Annotated

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import AfterValidator, BaseModel, Field

from statechart import (
    Budget,
    Chart,
    ChartWarning,
    Edge,
    MemoryStore,
    ScriptedModel,
    State,
    ToolDefinitionError,
    call,
    drive,
    fingerprint,
    reply,
    start,
    tool,
)
from statechart.chart.tools import canonical_json, render_result
from statechart.engine import compiled
from statechart.engine.effects import RunTool
from statechart.engine.session import Session
from statechart.engine.transition import plan
from statechart.errors import ToolArgumentsError


class Filter(BaseModel):
    status: str
    limit: int = 5


@tool(retry="safe")
async def search_kb(query: str, filters: Filter | None = None, limit: int = 3) -> list[str]:
    """Search the knowledge base.

    Longer text that is not shown.
    """
    return [query] * limit


def test_schema_comes_from_the_signature() -> None:
    schema = search_kb.schema
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"] == {"type": "string"}
    assert schema["properties"]["limit"] == {"type": "integer", "default": 3}
    assert "Filter" in schema["$defs"]
    assert search_kb.description == "Search the knowledge base."
    assert search_kb.name == "search_kb" and search_kb.retry == "safe"


def test_validation_coerces_and_reports_bad_arguments() -> None:
    assert search_kb.validate({"query": "x", "limit": "2"}) == {
        "query": "x",
        "filters": None,
        "limit": 2,
    }
    with pytest.raises(ToolArgumentsError, match=r"search_kb'.*limit: Input should be a valid"):
        search_kb.validate({"query": "x", "limit": "many"})
    with pytest.raises(ToolArgumentsError, match="query: Field required"):
        search_kb.validate({})


def test_retry_policy_is_mandatory_and_checked() -> None:
    with pytest.raises(TypeError):
        tool()(lambda q: q)  # type: ignore[call-arg]
    with pytest.raises(ToolDefinitionError, match="retry='sometimes' is not a retry policy"):
        tool(retry="sometimes")  # type: ignore[arg-type]


def test_keyed_tool_needs_a_key_parameter_hidden_from_the_model() -> None:
    with pytest.raises(ToolDefinitionError, match="no 'idempotency_key' parameter"):

        @tool(retry="keyed")
        def refund(amount: int) -> str:
            return "ok"

    @tool(retry="keyed")
    def refund2(amount: int, idempotency_key: str | None = None) -> str:
        return f"{amount}:{idempotency_key}"

    assert "idempotency_key" not in refund2.schema["properties"]


def test_reconcile_tool_needs_its_hook() -> None:
    with pytest.raises(ToolDefinitionError, match="no reconcile= hook"):

        @tool(retry="reconcile")
        def send(x: str) -> str:
            return x


def test_untyped_parameters_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="parameter 'x' has no type hint"):

        @tool(retry="safe")
        def bad(x) -> str:  # type: ignore[no-untyped-def]
            return str(x)


@pytest.mark.parametrize("bad", ["look up!", "a.b", "x" * 65, "caf\u00e9"])
def test_a_tool_name_providers_refuse_fails_the_build(bad: str) -> None:
    with pytest.raises(ToolDefinitionError, match="1-64 letters, digits") as err:

        @tool(retry="safe", name=bad)
        def look(q: str) -> str:
            """Look."""
            return q

    assert repr(bad) in str(err.value)


def test_two_tools_with_one_name_in_a_state_fail_the_build() -> None:
    @tool(retry="safe", name="lookup")
    def by_id(ticket: str) -> str:
        """Look a ticket up by id."""
        return ticket

    @tool(retry="safe", name="lookup")
    def by_email(email: str) -> str:
        """Look a customer up by email."""
        return email

    with pytest.raises(ToolDefinitionError, match="state 'work': two tools are named 'lookup'"):
        Chart(
            "c",
            states=(State("work", tools=(by_id, by_email)), State("done", kind="terminal")),
            edges=(Edge("work", "done"),),
        )


def test_a_tool_with_no_description_warns_naming_it() -> None:
    with pytest.warns(ChartWarning, match="tool 'mute' has no description") as caught:

        @tool(retry="safe")
        def mute(q: str) -> str:
            return q

    assert caught[0].filename == __file__
    assert mute.description == "mute"


def test_a_model_state_shown_nothing_warns() -> None:
    with pytest.warns(ChartWarning, match="state 'blind': a model state with neither") as caught:
        Chart(
            "c",
            states=(State("blind"), State("done", kind="terminal")),
            edges=(Edge("blind", "done"),),
        )
    assert caught[0].filename == __file__


@pytest.mark.anyio
async def test_sync_and_async_tools_both_invoke() -> None:
    @tool(retry="safe")
    def double(n: int) -> int:
        return n * 2

    assert await double.invoke({"n": 4}) == 8
    assert await search_kb.invoke({"query": "a", "filters": None, "limit": 2}) == ["a", "a"]


def test_output_is_capped() -> None:
    text = render_result("x" * 9000, 8000)
    assert text.startswith("x" * 8000)
    assert text.endswith("[truncated: 1000 more characters]")
    assert render_result({"b": 1, "a": [1, 2]}, 100) == '{"a":[1,2],"b":1}'


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@given(st.dictionaries(st.text(), _JSON, max_size=4))
def test_fingerprint_is_the_hash_of_the_canonical_json(arguments: dict[str, object]) -> None:
    """The fingerprint's own encoder (made once, no cycle check) writes what
    `canonical_json` writes: fingerprints stored by earlier versions still match."""
    text = f"tool\x00{canonical_json(arguments)}"
    assert fingerprint("tool", arguments) == hashlib.sha256(text.encode()).hexdigest()[:24]


def test_fingerprint_ignores_key_order_and_tells_arguments_apart() -> None:
    assert fingerprint("t", {"a": 1, "b": 2}) == fingerprint("t", {"b": 2, "a": 1})
    assert fingerprint("t", {"a": 1}) != fingerprint("t", {"a": 2})
    assert fingerprint("t", {"a": 1}) != fingerprint("u", {"a": 1})


@pytest.mark.anyio
async def test_a_tool_that_changes_its_arguments_does_not_change_a_later_plan() -> None:
    """The planner remembers a call's validated arguments and fingerprint, not the typed
    arguments it hands the tool: planning the same call again (a retry) parses afresh."""

    @tool(retry="safe")
    async def collect(items: list[str]) -> str:
        """Collect items."""
        items.append("changed by the tool")
        return ",".join(items)

    chart = Chart(
        "mutate",
        states=(State("work", tools=(collect,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    store = MemoryStore(encode=False)
    model = ScriptedModel([reply(call("collect", items=["a"]))])
    run = await start(chart, store=store, model=model)
    steps = [s async for s in drive(chart, run, store=store, model=model)]
    first = steps[0]
    assert first.run.state == "work.act"
    session = Session()
    planned = plan(compiled(chart), first.run, session)
    assert isinstance(planned, RunTool)
    assert await planned.tool.invoke(planned.parsed) == "a,changed by the tool"
    again = plan(compiled(chart), first.run, session)
    assert isinstance(again, RunTool)
    assert again.parsed.items == ["a"]  # type: ignore[attr-defined]
    assert again.arguments == {"items": ["a"]} == planned.arguments
    assert again.fingerprint == planned.fingerprint == fingerprint("collect", {"items": ["a"]})


def test_annotated_constraints_and_validators_of_a_parameter_are_kept() -> None:
    """`Annotated[...]` metadata is the tool's contract: a bound refuses, a validator
    normalises (what is fingerprinted), a description reaches the model's schema."""

    @tool(retry="safe")
    def pick(
        count: Annotated[int, Field(ge=1, description="How many to pick")],
        code: Annotated[str, AfterValidator(str.upper)],
    ) -> str:
        """Pick some."""
        return f"{count} {code}"

    assert pick.validate({"count": 2, "code": "ab"}) == {"count": 2, "code": "AB"}
    with pytest.raises(ToolArgumentsError, match="count"):
        pick.validate({"count": 0, "code": "ab"})
    schema = pick.args_model.model_json_schema()
    assert schema["properties"]["count"]["description"] == "How many to pick"
