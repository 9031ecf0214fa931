"""Fork: a new run from a past state rebuilt from the log; the original is untouched. A fork,
like a human decision, needs the chart version the run was stored under."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    ChartChangedError,
    Edge,
    Facts,
    MemoryStore,
    RunError,
    ScriptedModel,
    SQLiteStore,
    State,
    Store,
    approve,
    call,
    fork,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)
from statechart.engine import compiled
from statechart.engine.replay import replay
from statechart.runtime.lineage import describe_change
from tests.support.durable import DONE, FINISH, pay_chart
from tests.support.helpers import run_script

pytestmark = pytest.mark.anyio
KEYS: list[str | None] = []


@tool(retry="keyed")
async def refund(order: str, idempotency_key: str | None = None) -> str:
    """Refund an order."""
    KEYS.append(idempotency_key)
    return f"refunded {order}"


@tool(retry="safe")
async def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: 20 EUR"


def chart() -> Chart:
    return Chart(
        "desk",
        budget=Budget(max_steps=30),
        states=(State("resolve", tools=(lookup, refund)), State("done", kind="terminal")),
        edges=(Edge("resolve", "done"),),
    )


SCRIPT = [
    reply(call("lookup", "l1", order="o1")),
    reply(call("refund", "r1", order="o1")),
    reply(call("next_state", target="done")),
]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    KEYS.clear()
    yield MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")


async def test_a_fork_starts_from_the_rebuilt_state_and_keeps_its_lineage(store: Store) -> None:
    c = chart()
    end, steps, _, _ = await run_script(c, SCRIPT, store=store)
    assert end.state == "done"
    at = steps[2].event.seq  # the refund is proposed, next to run: its intent is open
    child = await fork(c, end.run_id, at, store=store, new_run_id="child")
    assert child.seq == at and child.state == steps[2].run.state == "resolve.act"
    assert replace(
        child, run_id=end.run_id, parent_run=None, doubt=None, parent_seq=None, created_at=0.0
    ) == replace(steps[2].run, created_at=0.0)
    # the parent ran the refund after the fork point: the fork's copy is in doubt and has
    # an intent row of its own, with the same key
    assert child.doubt == "r1"
    (inherited,) = await store.intents("child")
    assert inherited.call.id == "r1" and inherited.key == child.pending[0].key
    assert not inherited.completed
    assert (child.parent_run, child.parent_seq) == (end.run_id, at)
    assert child.lineage_root == end.run_id
    assert (await store.load(end.run_id)).snapshot == end
    assert len(await store.events(end.run_id)) == end.seq


async def test_a_fork_drives_on_with_another_model_and_the_same_keys(store: Store) -> None:
    c = chart()
    end, steps, _, _ = await run_script(c, SCRIPT, store=store)
    child = await fork(c, end.run_id, 2, store=store, new_run_id="child")
    seen: list[int] = []

    def other(request):  # type: ignore[no-untyped-def]
        seen.append(len(request.transcript))
        if len(seen) == 1:
            return reply(call("lookup", "again", order="o1"))
        if len(seen) == 2:
            return reply(call("refund", "r9", order="o1"))
        return reply(call("next_state", target="done"))

    from statechart import FunctionModel

    forked = await run_to_end(c, child, store=store, model=FunctionModel(other))
    assert forked.state == "done"
    assert seen[0] == 2  # the parent's transcript of this visit, up to the fork point
    events = await store.events("child")
    assert events[0].seq == 3  # the fork's numbering goes on from the fork point
    assert (events[0].trigger, events[0].model) == ("model", "function")  # the switch
    assert forked.model == "function"
    assert "already ran with these arguments" in (events[2].refused or "")
    assert KEYS[0] == KEYS[1] is not None  # the fork presents the original refund's key
    assert replay(compiled(c), await store.base("child"), events) == forked


async def test_a_fork_of_a_fork_reads_through_both_parents(store: Store) -> None:
    c = chart()
    end, _, _, _ = await run_script(c, SCRIPT, store=store)
    first = await fork(c, end.run_id, 2, store=store, new_run_id="first")
    second = await fork(c, "first", 2, store=store, new_run_id="second")
    assert second.lineage_root == end.run_id == first.lineage_root
    from statechart import load_session

    session = await load_session(store, second)
    assert [m.role for m in session.transcript] == ["assistant", "tool"]
    assert len(session.fingerprints) == 1
    with pytest.raises(RunError, match=r"it is a fork of .* at seq 2: fork that run"):
        await fork(c, "second", 1, store=store)


async def test_fork_points_outside_the_log_are_refused(store: Store) -> None:
    c = chart()
    end, _, _, _ = await run_script(c, SCRIPT, store=store)
    with pytest.raises(RunError, match=f"has seqs 0..{end.seq}; cannot fork at 99"):
        await fork(c, end.run_id, 99, store=store)


async def test_a_fork_needs_the_chart_the_run_had(store: Store) -> None:
    c = chart()
    end, _, _, _ = await run_script(c, SCRIPT, store=store)
    other = Chart(
        "desk",
        budget=Budget(max_steps=31),
        states=(State("resolve", tools=(lookup, refund)), State("done", kind="terminal")),
        edges=(Edge("resolve", "done"),),
    )
    with pytest.raises(ChartChangedError, match="fork with the chart it had"):
        await fork(other, end.run_id, 2, store=store)


def test_a_chart_change_is_described_line_by_line() -> None:
    old, new = (
        chart().describe(),
        Chart(
            "desk",
            budget=Budget(max_steps=31),
            states=(State("resolve", tools=(lookup,)), State("done", kind="terminal")),
            edges=(Edge("resolve", "done"),),
        ).describe(),
    )
    change = describe_change(old, new)
    assert "- chart desk" in change and "+ chart desk" in change and "refund" in change
    assert describe_change(None, new).startswith("the old structure was not stored")


# -- a fork resumed or driven on: the entering guard and the intents of its own ---------------


class Ticket(BaseModel):
    tier: str = "basic"


def vip_only(f: Facts) -> str | None:
    return None if f.context.tier == "vip" else "only vip tickets are sent"


async def demote(ctx: Ticket) -> dict[str, Any]:
    return {"tier": "basic"}


def gate_chart() -> Chart:
    return Chart(
        "gate",
        context=Ticket,
        budget=Budget(max_steps=20),
        states=(
            State("triage", writes=("tier",)),
            State("send", reads=("tier",), writes=("tier",), on_resume=demote),
            DONE,
        ),
        edges=(Edge("triage", "send", guard=vip_only), Edge("send", "done")),
    )


async def test_resuming_a_fork_rechecks_the_guard_that_entered_its_state(db: Path) -> None:
    """A fork resumed in a state whose on_resume refresh breaks the guard of the edge that
    entered it escalates, as the original run resumed at that point does."""
    c = gate_chart()
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("next_state", target="send", tier="vip")), FINISH])
    await start(c, store=store, model=model, run_id="r1")
    end = await run_to_end(c, "r1", store=store, model=model)
    assert end.state == "done"
    child = await fork(c, "r1", 2, store=store, new_run_id="child")
    assert child.state == "send.think"
    # the original, resumed at that point, escalates (tests/runtime/test_resume.py shows it);
    # the fork, resumed at the same point with the same refresh, must too
    forked = await resume(c, "child", store=store, model=ScriptedModel([FINISH]))
    assert forked.state == "escalated", "the entering guard was not run again for the fork"


async def test_a_fork_records_the_intent_of_the_call_it_runs(db: Path) -> None:
    """A fork taken while a call was pending runs it with the parent's key and records an
    intent row of its own, completed once the call ran."""
    keys: list[str | None] = []

    @tool(retry="keyed")
    async def refund(order: str, idempotency_key: str | None = None) -> str:
        """Refund."""
        keys.append(idempotency_key)
        return f"refunded {order}"

    c = pay_chart(refund)
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("refund", "r", order="o1")), FINISH])
    await start(c, store=store, model=model, run_id="r1")
    await run_to_end(c, "r1", store=store, model=model)
    child = await fork(c, "r1", 1, store=store, new_run_id="child")
    assert child.state == "resolve.act" and child.pending[0].key is not None
    end = await run_to_end(c, "child", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and len(keys) == 2  # the fork ran the refund (same key)
    ran = [e for e in await store.events("child") if e.call is not None and e.actor == "code"]
    assert [e.call.name for e in ran if e.call] == ["refund"]
    intents = await store.intents("child")
    assert [(i.call.name, i.completed) for i in intents] == [("refund", True)], (
        "the fork ran a side-effecting call with no intent row of its own"
    )


# -- human decisions check the chart version -------------------------------------------------


def signoff_chart(on_approve: str, *extra: State) -> Chart:
    return Chart(
        "signoff",
        budget=Budget(max_steps=10),
        states=(
            State("check", kind="approval", on_approve=on_approve, on_reject="done"),
            DONE,
            *extra,
        ),
    )


async def test_approving_with_a_changed_chart_is_refused(db: Path) -> None:
    """approve() with a chart whose version differs from the run's raises
    ChartChangedError and leaves the stored run unchanged."""
    old = signoff_chart("done")
    new = signoff_chart("finish", State("finish", kind="terminal"))
    assert old.version != new.version
    store = SQLiteStore(db)
    await start(old, store=store, model=ScriptedModel([]), run_id="r1")
    before = (await store.load("r1")).snapshot
    with pytest.raises(ChartChangedError):
        await approve(new, "r1", store=store, by="ops")
    assert (await store.load("r1")).snapshot == before
