"""The memory store keeps the Store contract: events, snapshots, transcripts, intents."""

from __future__ import annotations

import pytest

from statechart import MemoryStore, RunNotFoundError, Store, call, reply

from .helpers import run_script
from .test_human import chart as approval_chart
from .test_step import chart, finish

pytestmark = pytest.mark.anyio


async def test_memory_store_is_a_store() -> None:
    assert isinstance(MemoryStore(), Store)


async def test_transcripts_are_stored_per_visit_and_fingerprints_per_run() -> None:
    end, steps, model, store = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()]
    )
    research = await store.transcript(end.run_id, 0)
    assert [m.role for m in research] == ["assistant", "tool", "assistant", "tool"]
    assert research[1].content == "kb:q"
    draft_visit = next(s.event.seq for s in steps if s.event.target == "draft.think")
    assert [m.role for m in await store.transcript(end.run_id, draft_visit)] == [
        "assistant", "tool",
    ]
    assert len(await store.fingerprints(end.run_id)) == 1
    events = await store.events(end.run_id, after=2)
    assert [e.seq for e in events] == list(range(3, end.seq + 1))
    assert await store.runs(status="ended") == [end]
    assert await store.runs(chart="other") == []


async def test_intents_are_open_until_their_call_completes() -> None:
    end, steps, _, store = await run_script(
        approval_chart(), [reply(call("send_reply", "s1", text="hi"))]
    )
    open_ = await store.intents(end.run_id)
    assert [(i.call.id, i.completed) for i in open_] == [("s1", False)]
    recorded = [s.event for s in steps if s.event.intent is not None]
    assert [(e.intent, e.key) for e in recorded] == [("s1", open_[0].key)]


async def test_unknown_run_is_a_clear_error() -> None:
    store = MemoryStore()
    with pytest.raises(RunNotFoundError, match="no run missing"):
        await store.load("missing")
    with pytest.raises(RunNotFoundError):
        await store.events("missing")
