"""Independent review of the durable-run code: each test here demonstrates a suspected bug."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    ChartChangedError,
    Edge,
    Facts,
    Run,
    ScriptedModel,
    SQLiteStore,
    State,
    Tool,
    approve,
    call,
    drive,
    fork,
    reject,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)
from tests.support.durable import CALLS, DONE, FINISH, interrupted, pay_chart

pytestmark = pytest.mark.anyio


def never_refund() -> Tool:
    async def refund(order: str) -> str:
        CALLS.append((order, None))
        return f"refunded {order}"

    return tool(retry="never")(refund)


def reconcile_refund(asked: list[str]) -> Tool:
    def check(order: str) -> str | None:
        asked.append(order)
        return f"already refunded {order}"

    async def refund(order: str) -> str:
        CALLS.append((order, None))
        return f"refunded {order}"

    return tool(retry="reconcile", reconcile=check)(refund)


# -- 1. the "in doubt" marker is erased by a driver that stops before settling -----------------


async def test_a_refused_resume_keeps_an_interrupted_never_call_in_doubt(db: Path) -> None:
    """A resume that fails before its first step (here: the chart changed) must leave the
    run exactly as it found it, including the fact that the last driver was killed mid-call.
    Today the failed driver releases the lease cleanly, so the next resume runs a
    retry='never' refund without asking a human."""
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
    """docs/persistence.md: a corrupt row 'raises CorruptRowError ... before anything is
    written'. The failed resume still rewrites the lease, erasing that the last driver was
    killed mid-call; once the row is restored, the retry='never' refund runs unasked."""
    import sqlite3

    from statechart import CorruptRowError

    c = pay_chart(never_refund())
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    raw = sqlite3.connect(db, isolation_level=None)
    good = raw.execute("SELECT messages FROM events WHERE run_id='r1' AND seq=1").fetchone()[0]
    lease_before = raw.execute("SELECT lease_holder FROM runs").fetchone()
    raw.execute('UPDATE events SET messages=\'[{"role": "wizard"}]\' WHERE seq=1')
    store = SQLiteStore(db)
    with pytest.raises(CorruptRowError):
        await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    # the failed resume took the lease but gave it back still marked abandoned (expired,
    # holder kept), so the next driver still takes the run over with the call in doubt
    holder, expires = raw.execute("SELECT lease_holder, lease_expires FROM runs").fetchone()
    assert holder is not None and holder != lease_before[0] and expires == 0
    assert (await store.events("r1"))[-1].trigger != "takeover"  # nothing was appended
    raw.execute("UPDATE events SET messages=? WHERE seq=1", (good,))  # restored from a backup
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert CALLS == [] and end.state == "resolve.approve"


async def test_closing_drive_after_the_refresh_keeps_the_call_in_doubt(db: Path) -> None:
    """A resuming driver that yields its `resume` refresh record and is then closed has
    settled nothing; the next driver must still treat the call as in doubt."""

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
    """A worker with a fixed name (holder=) killed mid-call and restarted under that name:
    the lease it never released still says a call was in flight."""
    c = pay_chart(never_refund())
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1, holder="worker-1")
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([FINISH]), holder="worker-1")
    assert CALLS == [], "a retry='never' call that may have run was run again without a human"
    assert end.state == "resolve.approve"


async def test_two_drivers_with_the_same_holder_name_do_not_both_run_the_call(
    db: Path,
) -> None:
    """Two worker processes configured with the same holder name (e.g. a host name) resume
    one run together: both get the lease and both run the refund."""
    import anyio

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


# -- 2. intents that are never completed, and a call that may have run called "not executed" --


def approval_chart() -> Chart:
    @tool(retry="never", needs_approval=True)
    async def send(text: str) -> str:
        """Send a message."""
        CALLS.append((text, None))
        return "sent"

    @tool(retry="safe")
    async def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    return Chart(
        "desk",
        budget=Budget(max_steps=20),
        states=(State("s", tools=(send, look)), DONE),
        edges=(Edge("s", "done"),),
    )


async def test_a_rejected_call_completes_its_intent(db: Path) -> None:
    """docs/persistence.md: 'the event that runs (or refuses, rejects, drops) it completes the
    intent'. A rejection leaves the intent open forever, even after the run ended."""
    c = approval_chart()
    store = SQLiteStore(db)
    model = ScriptedModel([reply(call("send", "s1", text="hi"))])
    await start(c, store=store, model=model, run_id="r1")
    waiting = await run_to_end(c, "r1", store=store, model=model)
    assert waiting.state == "s.approve"
    rec = await reject(c, "r1", store=store, by="ops", reason="no")
    end = await run_to_end(c, "r1", store=store, model=ScriptedModel([FINISH]))
    assert end.state == "done" and CALLS == []
    (intent,) = await store.intents("r1")
    assert intent.completed and intent.completed_seq == rec.event.seq, intent


async def test_a_refused_call_completes_its_intent(db: Path) -> None:
    """A repeated call is refused at the head of the queue in `act` after its intent was
    recorded; the refusal must complete the intent."""
    c = approval_chart()
    store = SQLiteStore(db)
    model = ScriptedModel(
        [reply(call("look", "l1", q="a")), reply(call("look", "l2", q="a")), FINISH]
    )
    await start(c, store=store, model=model, run_id="r1")
    end = await run_to_end(c, "r1", store=store, model=model)
    assert end.state == "done"
    refused = next(e for e in await store.events("r1") if e.refused)
    assert refused.call is not None and refused.call.id == "l2"
    intents = {i.call.id: i for i in await store.intents("r1")}
    assert intents["l2"].completed, (
        f"intent of l2 still open after the refusal at seq "
        f"{refused.seq} and the run ended: {intents['l2']}"
    )


async def test_an_escalating_refresh_does_not_call_an_interrupted_call_not_executed(
    db: Path,
) -> None:
    """The driver was killed while the refund ran; on resume, on_resume fails and the run
    escalates. The refund may have happened: the result recorded for it must not say it was
    'not executed' (cancel says 'this call may have started' in the same situation)."""

    async def refresh(ctx: Any) -> dict[str, Any]:
        raise ConnectionError("crm down")

    c = pay_chart(never_refund(), on_resume=refresh)
    await interrupted(c, db, [reply(call("refund", "r", order="o1"))], stop_at=1)
    store = SQLiteStore(db)
    end = await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert end.state == "escalated"
    texts = [m.content for m in await store.transcript("r1", 0) if m.tool_call_id == "r"]
    assert not any(t.startswith("not executed") for t in texts), texts


# -- 3. a fork resumed: the guard of the edge that entered its state is never re-checked ------


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


# -- 4. a fork's open intent: the call runs in the fork with no intent row of the fork -------


async def test_a_fork_records_the_intent_of_the_call_it_runs(db: Path) -> None:
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


# -- 5. human events and migrations skip the chart-version check -----------------------------


def review_chart(on_approve: str, *extra: State) -> Chart:
    return Chart(
        "review",
        budget=Budget(max_steps=10),
        states=(
            State("check", kind="approval", on_approve=on_approve, on_reject="done"),
            DONE,
            *extra,
        ),
    )


async def test_approving_with_a_changed_chart_is_refused(db: Path) -> None:
    """approve() with a chart whose version differs from the run's applies the new chart's
    edges to a run of the old one: the run lands in a state its own chart does not have."""
    old = review_chart("done")
    new = review_chart("finish", State("finish", kind="terminal"))
    assert old.version != new.version
    store = SQLiteStore(db)
    await start(old, store=store, model=ScriptedModel([]), run_id="r1")
    before = await store.load("r1")
    with pytest.raises(ChartChangedError):
        await approve(new, "r1", store=store, by="ops")
    assert await store.load("r1") == before


async def test_a_migration_that_leaves_an_inconsistent_run_changes_nothing(db: Path) -> None:
    """A migration that renames a model state (the obvious `state=` rewrite) passes the
    leaf/context checks; the migrate event and a new base are committed, then driving
    crashes on the stale `visit`. It must be refused with ChartChangedError, changing nothing."""

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
    before = await store.load("r1")
    assert before.state == "research.think"

    def rename(run: Run) -> Run:
        return run.model_copy(update={"state": "investigate.think"})

    try:
        await resume(new, "r1", store=store, model=ScriptedModel([FINISH]), migrate=rename)
    except ChartChangedError:
        pass
    except Exception as exc:
        pytest.fail(
            f"{type(exc).__name__}: {exc} (after the migration; the stored run is now "
            f"at seq {(await store.load('r1')).seq}, was {before.seq})"
        )
    else:
        end = await store.load("r1")
        assert end.state == "done"
        return
    assert await store.load("r1") == before


# -- 6. a reused tool-call id overwrites an earlier intent row ---------------------------------


async def test_intent_rows_are_never_overwritten_by_a_reused_call_id(db: Path) -> None:
    """Some OpenAI-compatible servers number call ids per reply (`call_0`). The intents
    table is append-only by design; `INSERT OR REPLACE` on (run_id, call_id) drops the
    record of the first refund when the second reuses its id."""
    refunds: list[str] = []

    @tool(retry="keyed")
    async def refund(order: str, idempotency_key: str | None = None) -> str:
        """Refund."""
        refunds.append(order)
        return f"refunded {order}"

    c = pay_chart(refund)
    store = SQLiteStore(db)
    model = ScriptedModel(
        [
            reply(call("refund", "call_0", order="o1")),
            reply(call("refund", "call_0", order="o2")),
            FINISH,
        ]
    )
    await start(c, store=store, model=model, run_id="r1")
    end = await run_to_end(c, "r1", store=store, model=model)
    assert end.state == "done" and refunds == ["o1", "o2"]
    intents = await store.intents("r1")
    assert [i.call.arguments for i in intents] == [{"order": "o1"}, {"order": "o2"}]


# -- 7. a locked database surfaces as a bare sqlite3 error -----------------------------------


async def test_a_busy_database_is_a_statechart_error_naming_the_run(db: Path) -> None:
    import sqlite3

    from statechart import StatechartError

    c = pay_chart(never_refund())
    store = SQLiteStore(db, timeout=0.05)
    await start(c, store=store, model=ScriptedModel([]), run_id="r1")
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock (e.g. a backup)
    try:
        with pytest.raises(StatechartError, match="r1"):
            await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    finally:
        other.execute("ROLLBACK")
        other.close()


# -- 8. the chart version does not cover parts of the structure a stored run depends on ------


def test_the_chart_version_covers_approval_targets() -> None:
    """`on_approve`/`on_reject` imply edges (docs/decisions.md), but `Chart.describe()` leaves
    them out: swapping them keeps the version, so a run stored under one is driven by the
    other with no ChartChangedError."""
    both = (State("done", kind="terminal"), State("undo", kind="terminal"))

    def with_targets(yes: str, no: str) -> Chart:
        return Chart(
            "review",
            budget=Budget(max_steps=10),
            states=(State("check", kind="approval", on_approve=yes, on_reject=no), *both),
        )

    assert with_targets("done", "undo").version != with_targets("undo", "done").version


def test_the_chart_version_covers_the_context_type() -> None:
    """The stored context is validated by the chart's context type; a new required field
    must count as a changed chart, so resume asks for a migration instead of failing later."""

    class Before(BaseModel):
        tier: str = "basic"

    class After(BaseModel):
        tier: str = "basic"
        account: int

    def with_context(ctx: type[BaseModel]) -> Chart:
        return Chart(
            "ctx",
            context=ctx,
            budget=Budget(max_steps=10),
            states=(State("s", reads=("tier",)), DONE),
            edges=(Edge("s", "done"),),
        )

    assert with_context(Before).version != with_context(After).version


def test_the_chart_version_covers_tool_arguments() -> None:
    """A stored pending call is validated against the tool's schema when it runs; changing
    the schema must count as a changed chart."""

    @tool(retry="keyed")
    async def refund(order: str, idempotency_key: str | None = None) -> str:
        """Refund."""
        return "ok"

    @tool(retry="keyed", name="refund")
    async def refund_cents(order: str, cents: int, idempotency_key: str | None = None) -> str:
        """Refund."""
        return "ok"

    assert pay_chart(refund).version != pay_chart(refund_cents).version


async def test_approving_an_in_doubt_call_with_edits_keeps_the_doubtful_intent(
    db: Path,
) -> None:
    """The killed driver may have refunded o1. A human, asked about it, approves an edited
    call (o2). The intent of o1 (the record that it may have run, with its key) is replaced
    in place by o2's: the intents table no longer shows o1 at all."""
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


# -- 9. a call cancelled mid-flight is never settled -----------------------------------------


async def test_a_call_cancelled_mid_flight_is_settled_by_a_resume(db: Path) -> None:
    """docs/decisions.md, 'Cancel during a tool call': 'its intent stays open, so a resume
    settles it by the tool's retry policy'. The cancelled run has ended, so resume does
    nothing: the reconcile hook is never asked and the intent stays open forever."""
    import anyio

    from statechart import cancel

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
    assert (await store.load("r1")).state == "cancelled"
    await resume(c, "r1", store=store, model=ScriptedModel([]))
    (intent,) = await store.intents("r1")
    assert asked == ["o1"] or intent.completed, f"the interrupted call was never settled: {intent}"


# -- 10. run_to_end answers with the caller's stale snapshot ---------------------------------


async def test_run_to_end_returns_the_stored_run_when_nothing_was_left_to_do(db: Path) -> None:
    c = pay_chart(never_refund())
    store = SQLiteStore(db)
    model = ScriptedModel([FINISH])
    run = await start(c, store=store, model=model, run_id="r1")
    assert (await run_to_end(c, run, store=store, model=model)).state == "done"
    again = await run_to_end(c, run, store=store, model=ScriptedModel([]))
    assert again == await store.load("r1"), (
        f"run_to_end said the run is {again.status} in '{again.state}'; it ended in 'done'"
    )
