"""A first end-to-end run on both backends."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Edge,
    MemoryStore,
    ScriptedModel,
    State,
    call,
    reply,
    run_to_end,
    start,
    tool,
)

pytestmark = pytest.mark.anyio


class Ctx(BaseModel):
    summary: str | None = None


@tool(retry="safe")
async def search_kb(query: str) -> str:
    """Search the knowledge base."""
    return f"articles about {query}"


def chart() -> Chart:
    return Chart(
        "smoke",
        states=(
            State("research", tools=(search_kb,), writes=("summary",)),
            State("done", kind="terminal"),
        ),
        edges=(Edge("research", "done"),),
        context=Ctx,
        budget=Budget(max_steps=20),
    )


async def test_runs_to_done_and_stores_every_event() -> None:
    c = chart()
    store = MemoryStore()
    model = ScriptedModel(
        [
            reply(call("search_kb", query="refunds")),
            reply(call("next_state", target="done", summary="found it")),
        ]
    )
    run = await start(c, store=store, model=model)
    end = await run_to_end(c, run, store=store, model=model)
    assert end.state == "done" and end.status == "ended"
    assert end.context == {"summary": "found it"}
    events = await store.events(run.run_id)
    assert [(e.source, e.target) for e in events] == [
        ("research.think", "research.act"),
        ("research.act", "research.think"),
        ("research.think", "research.act"),
        ("research.act", "done"),
    ]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert end.ledger["root"].steps == 4 and end.ledger["root"].model_calls == 2
    assert model.requests[1].transcript[-1].content == "articles about refunds"
