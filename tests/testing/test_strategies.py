"""The adversarial strategies draw every kind of misbehaviour they promise, and a chart
property-tested with them holds: only legal moves, budgets kept, the run ends or waits."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

import statechart as sc
from statechart.engine import compiled
from statechart.io.loading import load_chart
from statechart.testing import Ran, assert_within_budget
from statechart.testing.strategies import adversarial_models, adversarial_replies

AGENTS = Path(__file__).resolve().parents[2] / "agents"


@pytest.fixture(scope="module")
def triage(tmp_path_factory: pytest.TempPathFactory) -> sc.Chart:
    os.environ.setdefault(
        "SUPPORT_TRIAGE_HELPDESK", str(tmp_path_factory.mktemp("helpdesk") / "helpdesk.db")
    )
    return load_chart(f"{AGENTS}/support_triage.py:chart")[0]


def test_each_kind_of_misbehaviour_is_drawn(triage: sc.Chart) -> None:
    replies = adversarial_replies(triage)
    names = lambda r: [c.name for c in r.tool_calls]  # noqa: E731

    def target(r: sc.Reply, value: str) -> bool:
        return any(
            c.name == "next_state"
            and isinstance(c.arguments, dict)
            and c.arguments.get("target") == value
            for c in r.tool_calls
        )

    assert find(replies, lambda r: "rm_rf" in names(r))  # a tool that does not exist
    assert find(replies, lambda r: "send_reply" in names(r))  # a tool of another state
    assert find(replies, lambda r: target(r, "nowhere"))  # a state that does not exist
    assert find(replies, lambda r: target(r, "send"))  # a state, legal or not
    assert find(replies, lambda r: any(isinstance(c.arguments, str) for c in r.tool_calls))
    assert find(replies, lambda r: not r.tool_calls and r.content != "")  # text, no call
    assert find(replies, lambda r: len(r.tool_calls) == 3)  # several calls at once


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_chart_holds_whatever_the_model_says(triage: sc.Chart, data: st.DataObject) -> None:
    model = data.draw(adversarial_models(triage))
    store = sc.MemoryStore()
    run = sc.run_sync(triage, store=store, model=model, context={"ticket_id": "T-1001"})
    assert run.status in ("ended", "waiting")
    ran = anyio.run(Ran.read, triage, run, store)
    events = ran.events
    assert_within_budget(ran)
    tables = compiled(triage)
    legal = {(t.source, t.dest) for t in tables.transitions}
    for e in events:
        if e.source != e.target and not e.exhausted and e.trigger != "cancel":
            assert e.source in tables.nodes and e.target in tables.nodes
        if e.edge is not None:
            source, _, target = e.edge.partition("->")
            assert any(s.startswith(source) and d.startswith(target) for s, d in legal), e
    assert not any(e.call and e.call.name == "send_reply" and e.result == "sent" for e in events)
