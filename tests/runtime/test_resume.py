"""Resume: from the exact nested state, with on_resume and the entering guard, settling an
interrupted call by its retry policy, refusing a changed chart unless migrated."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from msgspec.structs import replace
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    ChartChangedError,
    CorruptRowError,
    Edge,
    Facts,
    LeaseHeldError,
    ModelError,
    Run,
    ScriptedModel,
    SQLiteStore,
    State,
    Tool,
    approve,
    call,
    cancel,
    drive,
    reject,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)
from statechart.engine import compiled
from statechart.engine.replay import replay
from statechart.models import register, registry
from statechart.runtime.current import current
from tests.engine.test_nesting import workflow
from tests.support.durable import (
    CALLS,
    DONE,
    FINISH,
    interrupted,
    never_refund,
    pay_chart,
    refund_tool,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("retry", ["safe", "keyed"])
async def test_an_interrupted_call_reruns_for_safe_and_keyed_tools(db: Path, retry: str) -> None:
    c = pay_chart(refund_tool(retry))
    before = await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    assert before.state == "resolve.act" and CALLS == []
    store = SQLiteStore(db)
    (intent,) = await store.intents("r1")
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done"
    assert [("o1", intent.key if retry == "keyed" else None)] == CALLS
    events = await store.events("r1")
    assert events[1].trigger == "takeover" and f"retry='{retry}'" in events[1].reason
    ran = events[2]
    assert f"retry='{retry}'" in ran.reason and "ran again" in ran.reason


@pytest.mark.parametrize("happened", [True, False])
async def test_a_reconcile_hook_settles_an_interrupted_call(db: Path, happened: bool) -> None:
    asked: list[str] = []

    def check(order: str) -> str | None:
        asked.append(order)
        return f"already refunded {order}" if happened else None

    c = pay_chart(refund_tool("reconcile", reconcile=check))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert asked == ["o1"] and end.state == "done"
    assert ([] if happened else [("o1", None)]) == CALLS
    ran = (await store.events("r1"))[2]
    assert ran.result == ("already refunded o1" if happened else "refunded o1")
    assert ("reported that it had run" in ran.reason) == happened


async def test_a_failing_reconcile_hook_hands_the_call_to_a_human(db: Path) -> None:
    def check(order: str) -> str | None:
        raise ConnectionError("bank unreachable")

    c = pay_chart(refund_tool("reconcile", reconcile=check))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    waiting = await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert waiting.status == "waiting" and waiting.state == "resolve.approve"
    assert (
        "reconcile hook of tool 'refund' raised ConnectionError: bank unreachable" in waiting.reason
    )
    assert CALLS == []
    assert replay(compiled(c), await store.base("r1"), await store.events("r1")) == waiting


async def test_an_interrupted_never_call_waits_for_a_human(db: Path) -> None:
    c = pay_chart(refund_tool("never"))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    waiting = await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert waiting.status == "waiting" and waiting.state == "resolve.approve"
    assert "may have run" in waiting.reason and CALLS == []
    await reject(c, "r1", store=store, by="ops", reason="the bank shows it went out")
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and CALLS == []
    human = [e for e in await store.events("r1") if e.actor == "human"]
    assert [(e.trigger, e.by) for e in human] == [("rejected", "ops")]


async def test_an_approved_never_call_runs_once_after_the_human_checked(db: Path) -> None:
    c = pay_chart(refund_tool("never"))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    await resume(c, "r1", store=store, model=ScriptedModel([]))
    await approve(c, "r1", store=store, by="ops", note="bank shows nothing")
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and CALLS == [("o1", None)]


async def test_a_cleanly_stopped_driver_leaves_nothing_in_doubt(db: Path) -> None:
    c = pay_chart(refund_tool("never"))
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("refund", "r", order="o1"))])
    await start(c, store=store, model=model, run_id="r1")
    async with contextlib.aclosing(drive(c, "r1", store=store, model=model)) as steps:
        async for _ in steps:
            break  # stopped after the intent committed, before the call started
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and CALLS == [("o1", None)]


# -- resuming where the run was ----------------------------------------------------------


async def test_resume_continues_three_levels_deep_from_another_store(db: Path) -> None:
    c = workflow()
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("dig", q="1")), reply(call("buy", "b1", item="archive"))])
    run = await start(c, store=store, model=model, run_id="r1")
    async for _ in drive(c, run, store=store, model=model):
        pass
    waiting = (await store.load("r1")).snapshot
    assert waiting.state == "explore.inner.probe.approve"
    store.close()
    other = SQLiteStore(db)  # another process's connection
    await approve(c, "r1", store=other, by="lead")
    again = SQLiteStore(db)
    end = await resume(
        c,
        "r1",
        store=again,
        model=ScriptedModel(
            [
                reply(call("next_state", target="done", notes="found")),
                reply(call("next_state", target="done")),
            ]
        ),
    )
    assert end.state == "done" and end.context["notes"] == "found"
    events = await again.events("r1", after=waiting.seq)
    assert events[0].trigger == "approved" and events[1].source == "explore.inner.probe.act"
    assert "explore" not in events[1].entered and "explore.inner" not in events[1].entered
    assert end.visits["explore"] == 1 and end.visits["explore.inner"] == 1
    assert replay(compiled(c), await again.base("r1"), await again.events("r1")) == end


class Ticket(BaseModel):
    tier: str = "basic"
    refreshed: int = 0


def vip_only(f: Facts) -> str | None:
    return None if f.context.tier == "vip" else "only vip tickets are sent"


def refresh_chart(on_resume: Any) -> Chart:
    return Chart(
        "gate",
        context=Ticket,
        budget=Budget(max_steps=20),
        states=(
            State("triage", writes=("tier",)),
            State("send", reads=("tier",), writes=("refreshed",), on_resume=on_resume),
            DONE,
        ),
        edges=(Edge("triage", "send", guard=vip_only), Edge("send", "done")),
    )


async def test_on_resume_refreshes_then_the_entering_guard_runs_again(db: Path) -> None:
    async def demote(ctx: Ticket) -> dict[str, Any]:
        return {"refreshed": ctx.refreshed + 1, "tier": "basic"}

    c = refresh_chart(demote)
    replies = [reply(call("next_state", target="send", tier="vip"))]
    stopped = await interrupted(c, db, replies, stop_at=2)
    assert stopped.state == "send.think"
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert end.state == "escalated"
    last = (await store.events("r1"))[-1]
    assert last.actor == "system" and last.source == "send.think"
    assert last.reason.startswith(
        "on resume: the guard that let the run into 'send' now "
        "refuses: edge triage->send refused: only vip tickets"
    )


async def test_on_resume_patch_is_an_event_and_replays(db: Path) -> None:
    async def bump(ctx: Ticket) -> dict[str, Any]:
        return {"refreshed": ctx.refreshed + 1}

    c = refresh_chart(bump)
    await interrupted(c, db, [reply(call("next_state", target="send", tier="vip"))], stop_at=2)
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and end.context == {"tier": "vip", "refreshed": 1}
    refresh = next(e for e in await store.events("r1") if e.trigger == "resume")
    assert refresh.patch == {"refreshed": 1} and refresh.actor == "system"
    assert replay(compiled(c), await store.base("r1"), await store.events("r1")) == end


# -- a changed chart ------------------------------------------------------------------------


async def test_a_changed_chart_is_refused_naming_the_difference(db: Path) -> None:
    c = pay_chart(refund_tool("safe"))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    changed = Chart(
        "pay",
        budget=Budget(max_steps=20),
        states=(State("resolve", tools=(refund_tool("safe"),), max_visits=2), DONE),
        edges=(Edge("resolve", "done"),),
    )
    store = SQLiteStore(db)
    before = await store.events("r1")
    with pytest.raises(ChartChangedError, match=r"state resolve model .*visits=2"):
        await resume(changed, "r1", store=store, model=ScriptedModel([FINISH]))
    assert await store.events("r1") == before and CALLS == []


async def test_a_migration_lets_a_changed_chart_resume(db: Path) -> None:
    c = pay_chart(refund_tool("safe"))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    changed = Chart(
        "pay",
        budget=Budget(max_steps=20),
        states=(State("resolve", tools=(refund_tool("safe"),), max_visits=2), DONE),
        edges=(Edge("resolve", "done"),),
    )

    def same_states(run: Run) -> Run:
        return run

    store = SQLiteStore(db)
    end = await resume(
        changed, "r1", store=store, model=ScriptedModel([FINISH]), migrate=same_states
    )
    assert end.state == "done" and end.chart_version == changed.version
    migrated = next(e for e in await store.events("r1") if e.trigger == "migrate")
    assert "migrated by same_states" in migrated.reason
    base = await store.base("r1")
    assert base.seq == migrated.seq
    assert replay(compiled(changed), base, await store.events("r1", after=base.seq)) == end


async def test_a_migration_to_a_missing_state_changes_nothing(db: Path) -> None:
    c = pay_chart(refund_tool("safe"))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    changed = Chart(
        "pay",
        budget=Budget(max_steps=20),
        states=(State("settle"), DONE),
        edges=(Edge("settle", "done"),),
    )
    store = SQLiteStore(db)
    before = (await store.load("r1")).snapshot
    with pytest.raises(
        ChartChangedError, match=r"after <lambda>: the state 'resolve\.act' is not a leaf"
    ):
        await resume(changed, "r1", store=store, model=ScriptedModel([]), migrate=lambda r: r)
    assert (await store.load("r1")).snapshot == before


# -- the model a run recorded ---------------------------------------------------------------


async def test_resume_uses_the_recorded_model_spec_or_says_what_to_pass(db: Path) -> None:
    c = pay_chart(refund_tool("safe"))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    with pytest.raises(ModelError, match="run r1 was driven by model 'scripted'"):
        await resume(c, "r1", store=store)
    register("scripted", lambda spec: ScriptedModel([FINISH]))
    try:
        assert (await resume(c, "r1", store=store)).state == "done"
    finally:
        registry._FACTORIES.pop("scripted", None)


async def test_a_human_decision_after_a_dead_driver_clears_the_doubt(db: Path) -> None:
    """The driver died after asking for approval (lease never released); the approval was
    written after its last write, so the approved call cannot have started: no second ask."""

    @tool(retry="never", needs_approval=True)
    async def wire(order: str) -> str:
        """Wire money."""
        CALLS.append((order, None))
        return "wired"

    c = pay_chart(wire)
    waiting = await interrupted(c, db, [reply(call("wire", "w", order="o1"))], stop_at=2)
    assert waiting.state == "resolve.approve"
    store = SQLiteStore(db)
    await approve(c, "r1", store=store, by="ops")
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and CALLS == [("o1", None)]
    assert "takeover" not in [e.trigger for e in await store.events("r1")]


class FinishedMeanwhile:
    """A store whose run another process finishes just before this driver's lease."""

    def __init__(self, inner: SQLiteStore, chart: Chart) -> None:
        self.inner, self.chart = inner, chart

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def acquire(self, *args: Any, **kwargs: Any) -> Any:
        await resume(self.chart, "r1", store=self.inner, model=ScriptedModel([FINISH]))
        return await self.inner.acquire(*args, **kwargs)


async def test_resume_returns_the_stored_run_when_another_process_finished_it(db: Path) -> None:
    c = pay_chart(refund_tool("safe"))
    store = SQLiteStore(db)
    await start(c, store=store, model=ScriptedModel([]), run_id="r1")
    got = await resume(
        c,
        "r1",
        store=FinishedMeanwhile(store, c),  # type: ignore[arg-type]
        model=ScriptedModel([]),
    )
    assert got == (await store.load("r1")).snapshot and got.state == "done"


# -- a call in doubt stays in doubt until a driver settles it --------------------------------


def reconcile_refund(asked: list[str]) -> Tool:
    def check(order: str) -> str | None:
        asked.append(order)
        return f"already refunded {order}"

    async def refund(order: str) -> str:
        CALLS.append((order, None))
        return f"refunded {order}"

    return tool(retry="reconcile", reconcile=check)(refund)


async def test_a_refused_resume_keeps_an_interrupted_never_call_in_doubt(db: Path) -> None:
    """A resume that fails before its first step (the chart changed) leaves the run as it
    found it, including the fact that the last driver was killed mid-call: the next resume
    asks a human before a retry='never' refund runs again."""
    c = pay_chart(never_refund())
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    changed = pay_chart(never_refund(), steps=21)
    store = SQLiteStore(db)
    with pytest.raises(ChartChangedError):
        await resume(changed, "r1", store=store, model=ScriptedModel([FINISH]))
    # the operator goes back to the chart the run started on
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert CALLS == [], "a retry='never' call that may have run was run again without a human"
    assert end.status == "waiting" and end.state == "resolve.approve"


async def test_a_reconcile_call_in_doubt_is_reconciled_after_a_failed_resume(db: Path) -> None:
    """After a resume refused for a changed chart, the next resume still settles the
    interrupted retry='reconcile' call through its hook instead of running it again."""
    asked: list[str] = []
    c = pay_chart(reconcile_refund(asked))
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    changed = pay_chart(reconcile_refund(asked), steps=21)
    store = SQLiteStore(db)
    with pytest.raises(ChartChangedError):
        await resume(changed, "r1", store=store, model=ScriptedModel([FINISH]))
    await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert asked == ["o1"], "the reconcile hook was never asked"
    assert CALLS == [], "the refund was issued a second time"


async def test_a_corrupt_row_error_on_resume_changes_nothing_not_even_the_doubt(
    db: Path,
) -> None:
    """A resume that meets a corrupt row raises CorruptRowError before writing anything and
    hands the lease back still marked abandoned; once the row is restored, the interrupted
    retry='never' refund waits for a human."""
    c = pay_chart(never_refund())
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    raw = sqlite3.connect(db, isolation_level=None)
    good = raw.execute("SELECT messages FROM events WHERE run_id='r1' AND seq=1").fetchone()[0]
    lease_before = raw.execute("SELECT lease_holder FROM runs").fetchone()
    rows_before = raw.execute("SELECT count(*), max(id) FROM event_rows").fetchone()
    raw.execute('UPDATE event_rows SET messages=\'[{"role": "wizard"}]\' WHERE id % 4294967296=1')
    store = SQLiteStore(db)
    with pytest.raises(CorruptRowError):
        await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    # the failed resume took the lease but gave it back still marked abandoned (expired,
    # holder kept), so the next driver still takes the run over with the call in doubt
    holder, expires = raw.execute("SELECT lease_holder, lease_expires FROM runs").fetchone()
    assert holder is not None and holder != lease_before[0] and expires == 0
    rows_after = raw.execute("SELECT count(*), max(id) FROM event_rows").fetchone()
    assert rows_after == rows_before  # nothing was appended
    raw.execute("UPDATE event_rows SET messages=? WHERE id % 4294967296=1", (good,))  # a backup
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert CALLS == [] and end.state == "resolve.approve"


async def test_closing_drive_after_the_refresh_keeps_the_call_in_doubt(db: Path) -> None:
    """A resuming driver that yields its `resume` refresh record and is then closed has
    settled nothing; the next driver still treats the call as in doubt."""

    async def refresh(ctx: Any) -> dict[str, Any]:
        return {}

    c = pay_chart(never_refund(), on_resume=refresh)
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    async with contextlib.aclosing(
        drive(c, "r1", store=store, model=ScriptedModel([]), resuming=True)
    ) as steps:
        async for record in steps:  # the takeover is recorded first, then the refresh
            assert record.event.trigger in ("takeover", "resume")
            if record.event.trigger == "resume":
                break
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert CALLS == [], "a retry='never' call that may have run was run again without a human"
    assert end.state == "resolve.approve"


async def test_a_driver_restarted_under_the_same_holder_name_sees_the_call_in_doubt(
    db: Path,
) -> None:
    """A worker with a fixed holder name, killed mid-call and restarted under that name,
    finds the call in doubt: the lease it never released says a call was in flight."""
    c = pay_chart(never_refund())
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1, holder="worker-1")
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]), holder="worker-1")
    assert CALLS == [], "a retry='never' call that may have run was run again without a human"
    assert end.state == "resolve.approve"


async def test_two_drivers_with_the_same_holder_name_do_not_both_run_the_call(
    db: Path,
) -> None:
    """Two workers resuming one run under the same holder name (e.g. a host name) do not
    both get the lease: the pending call runs once."""
    ran: list[str] = []

    @tool(retry="safe")
    async def refund(order: str) -> str:
        """Refund."""
        ran.append(order)
        await anyio.sleep(0.2)
        return "ok"

    c = pay_chart(refund)
    setup = SQLiteStore(db)
    model = ScriptedModel([reply(call("refund", "r", order="o1"))])
    await start(c, store=setup, model=model, run_id="r1")
    async with contextlib.aclosing(drive(c, "r1", store=setup, model=model)) as steps:
        async for _ in steps:
            break  # the intent is recorded; the call has not run

    errors: list[Exception] = []

    async def worker() -> None:
        try:
            await resume(
                c, "r1", store=SQLiteStore(db), model=ScriptedModel([FINISH]), holder="worker"
            )
        except Exception as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        tg.start_soon(worker)
    assert ran == ["o1"], f"the refund ran {len(ran)} times; errors: {errors}"


async def test_an_escalating_refresh_does_not_call_an_interrupted_call_not_executed(
    db: Path,
) -> None:
    """When on_resume fails and the run escalates, the result recorded for a call the killed
    driver may have started never says it was 'not executed'."""

    async def refresh(ctx: Any) -> dict[str, Any]:
        raise ConnectionError("crm down")

    c = pay_chart(never_refund(), on_resume=refresh)
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert end.state == "escalated"
    texts = [m.content for m in await store.transcript("r1", 0) if m.tool_call_id == "r"]
    assert not any(t.startswith("not executed") for t in texts), texts


async def test_approving_an_in_doubt_call_with_edits_keeps_the_doubtful_intent(
    db: Path,
) -> None:
    """Approving an in-doubt call with edits runs the edited call and keeps the intent of
    the original one (the record, with its key, that it may have run)."""
    c = pay_chart(never_refund())
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    (doubtful,) = await store.intents("r1")
    waiting = await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert waiting.state == "resolve.approve"
    await approve(c, "r1", store=store, by="ops", edits={"order": "o2"})
    await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert CALLS == [("o2", None)]
    keys = [i.key for i in await store.intents("r1")]
    assert doubtful.key in keys, "the intent of the call that may have run is gone"


async def test_a_call_cancelled_mid_flight_is_settled_by_a_resume(db: Path) -> None:
    """A call cancelled while it ran keeps its intent open, and a resume of the cancelled
    run settles it by the tool's retry policy (here: asks the reconcile hook)."""
    asked: list[str] = []
    started = anyio.Event()

    def check(order: str) -> str | None:
        asked.append(order)
        return "refunded"

    @tool(retry="reconcile", reconcile=check)
    async def refund(order: str) -> str:
        """Refund."""
        started.set()
        await anyio.sleep(0.2)
        return "refunded"

    c = pay_chart(refund)
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("refund", "r", order="o1"))])
    await start(c, store=store, model=model, run_id="r1")

    async def ops() -> None:
        await started.wait()
        await cancel(c, "r1", store=SQLiteStore(db), reason="customer left")

    async with anyio.create_task_group() as tg:
        tg.start_soon(ops)
        await run_to_end(c, "r1", store=store, model=model)
    assert (await store.load("r1")).snapshot.state == "cancelled"
    await resume(c, "r1", store=store, model=ScriptedModel([]))
    (intent,) = await store.intents("r1")
    assert asked == ["o1"] or intent.completed, f"the interrupted call was never settled: {intent}"


# -- migrations ------------------------------------------------------------------------------


async def test_a_migration_that_leaves_an_inconsistent_run_changes_nothing(db: Path) -> None:
    """A migration that renames a model state by rewriting only `state=` (leaving a stale
    `visit`) either drives to the end or is refused with ChartChangedError, changing
    nothing; it never crashes after committing."""

    @tool(retry="safe")
    async def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    old = Chart(
        "desk",
        budget=Budget(max_steps=20),
        states=(State("research", tools=(look,)), DONE),
        edges=(Edge("research", "done"),),
    )
    new = Chart(
        "desk",
        budget=Budget(max_steps=20),
        states=(State("investigate", tools=(look,)), DONE),
        edges=(Edge("investigate", "done"),),
    )
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("look", "l1", q="a"))])
    await start(old, store=store, model=model, run_id="r1")
    async with contextlib.aclosing(drive(old, "r1", store=store, model=model)) as steps:
        async for record in steps:
            if record.event.seq == 2:
                break
    before = (await store.load("r1")).snapshot
    assert before.state == "research.think"

    def rename(run: Run) -> Run:
        return replace(run, state="investigate.think")

    try:
        await resume(new, "r1", store=store, model=ScriptedModel([FINISH]), migrate=rename)
    except ChartChangedError:
        pass
    except Exception as exc:
        pytest.fail(
            f"{type(exc).__name__}: {exc} (after the migration; the stored run is now "
            f"at seq {(await store.load('r1')).snapshot.seq}, was {before.seq})"
        )
    else:
        end = (await store.load("r1")).snapshot
        assert end.state == "done"
        return
    assert (await store.load("r1")).snapshot == before


def _holding(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A real process driving run `held` with a one-hour lease, stopped inside a tool."""
    db, marker = tmp_path / "held.db", tmp_path / "in-tool"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.lease_holder", str(db), str(marker)],
        cwd=Path(__file__).parents[2],
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert child.poll() is None and time.monotonic() < deadline, "the child never got there"
        time.sleep(0.02)
    return child, db


async def test_a_killed_holder_on_this_machine_is_taken_over_at_once(tmp_path: Path) -> None:
    """The holder's process is gone (SIGKILL; same boot, same PID namespace): resuming does
    not wait out the hour-long lease; it takes over through the usual takeover event, and
    the interrupted `safe` call runs again by its retry policy."""
    from tests.support import lease_holder as held

    child, db = _holding(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    store = SQLiteStore(db)
    started = time.monotonic()
    end = await resume(held.chart(), held.RUN_ID, store=store, model=held.script())
    assert time.monotonic() - started < 30
    events = await store.events(held.RUN_ID)
    takeover = [e for e in events if e.trigger == "takeover"]
    assert len(takeover) == 1 and "retry='safe'" in takeover[0].reason
    assert [e.result for e in events if e.trigger == "results"] == ["found x"]
    assert (end.state, end.status) == ("done", "ended")
    store.close()


async def test_a_live_holder_is_never_taken_over(tmp_path: Path) -> None:
    """The holder still runs (same machine, same namespace, same pid and start time):
    resuming is refused, and nothing is appended."""
    from tests.support import lease_holder as held

    child, db = _holding(tmp_path)
    try:
        store = SQLiteStore(db)
        seq = (await store.load(held.RUN_ID)).snapshot.seq
        with pytest.raises(LeaseHeldError, match="is being driven by"):
            await resume(held.chart(), held.RUN_ID, store=store, model=held.script())
        assert (await store.load(held.RUN_ID)).snapshot.seq == seq
        process = store._db.execute("SELECT lease_process FROM runs").fetchone()[0]
        assert process.split("/")[2] == str(child.pid)
        store.close()
    finally:
        child.kill()
        child.wait(timeout=30)


def test_any_doubt_about_the_holder_means_waiting() -> None:
    """Another boot, another namespace, a pid reused by a newer process, or a malformed
    identity are never known dead; a finished process of this machine is."""
    from statechart.store.process import identity, known_dead

    me = identity()
    assert me is not None and not known_dead(me)  # alive
    boot, ns, pid, start = me.split("/")
    assert not known_dead(f"another-boot/{ns}/{pid}/{start}")
    assert not known_dead(f"{boot}/pid:[1]/{pid}/{start}")
    assert not known_dead(None) and not known_dead("garbage")
    assert known_dead(f"{boot}/{ns}/{pid}/{int(start) - 1}")  # same pid, another process
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = int(done.stdout)
    assert known_dead(f"{boot}/{ns}/{gone}/1")


def test_a_kill_inside_a_ported_sub_chart_resumes_with_its_own_context_and_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    """SIGKILLed right after the child's keyed tool ran (its result not stored): the stored
    child context is intact, the resumer settles the call under its recorded key (the
    outside system sees one effect), and the output reaches the parent."""
    from tests.support import ported_proc as proc

    db, effects = tmp_path / "ported.db", tmp_path / "effects.txt"
    root = Path(__file__).parents[2]

    def child(op: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.support.ported_proc", op, str(db), str(effects)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(root), **env},
        )

    killed = child("start", STATECHART_FAILPOINT="tool.returned:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = SQLiteStore(db)
    loaded = anyio.run(store.load, proc.RUN_ID)
    stopped = current(proc.chart(), loaded)  # killed: its snapshot is behind its events
    assert loaded.tail and stopped.seq == loaded.tail[-1].seq
    assert stopped.state == "look.fetch.act" and stopped.context == {
        "order_id": "A-7",
        "note": None,
    }
    assert stopped.contexts == {"look": {"ref": "A-7", "found": None}}
    assert effects.read_text().count("A-7") == 1
    store.close()
    done = child("resume")
    assert done.returncode == 0, done.stderr
    store = SQLiteStore(db)
    end = anyio.run(store.load, proc.RUN_ID).snapshot
    events = anyio.run(store.events, proc.RUN_ID)
    assert (end.state, end.context, end.contexts) == (
        "done",
        {"order_id": "A-7", "note": "record of A-7"},
        {},
    )
    assert effects.read_text().splitlines() == [effects.read_text().splitlines()[0]]
    assert any(e.trigger == "takeover" for e in events)
    base = anyio.run(store.base, proc.RUN_ID)
    assert replay(compiled(proc.chart()), base, events) == end
    store.close()


@pytest.mark.parametrize("hidden", [FileNotFoundError, PermissionError])
def test_a_live_holder_behind_a_hidden_proc_is_not_known_dead(
    monkeypatch: pytest.MonkeyPatch, hidden: type[OSError]
) -> None:
    """With `/proc` mounted `hidepid` (or another user's process), `/proc/PID/stat` is
    missing or unreadable although the process runs: that is doubt, not death."""
    from statechart.store import process

    me = process.identity()
    assert me is not None
    read = Path.read_text

    def hiding(self: Path, *args: Any, **kwargs: Any) -> str:
        if str(self) == f"/proc/{os.getpid()}/stat":
            raise hidden(str(self))
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", hiding)
    assert not process.known_dead(me)
