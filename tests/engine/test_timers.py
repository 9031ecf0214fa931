"""Retries with backoff: each failed attempt is an event, the wait a durable timer (the run
`sleeping` until `wake`), and waking it an event too; a crash during the wait loses
nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from statechart import (
    Budget,
    CallTimeoutError,
    Chart,
    ChartError,
    Edge,
    MemoryStore,
    Retry,
    ScriptedModel,
    SQLiteStore,
    State,
    call,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)
from statechart.engine import compiled
from statechart.engine.replay import replay
from statechart.records.run import Run
from statechart.records.spent import Spent

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]
FAST = Retry(attempts=3, initial=0.05, jitter=0)
SEEN: list[str | None] = []


def _flaky(
    failures: int, *, retries: Retry = FAST, error: type[Exception] = ConnectionError
) -> Any:
    """A keyed tool failing its first `failures` calls; `SEEN` gets each call's key."""
    seen = SEEN
    seen.clear()

    @tool(retry="keyed", retries=retries)
    def flaky(order: str, idempotency_key: str) -> str:
        """Fetch an order from a system that fails at first."""
        seen.append(idempotency_key)
        if len(seen) <= failures:
            raise error(f"down ({len(seen)})")
        return f"order {order}: shipped"

    return flaky


def _chart(*tools: Any, retries: Retry | None = None) -> Chart:
    return Chart(
        "retrying",
        states=(
            State("work", tools=tools, instructions="Fetch, then finish.", retries=retries),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=30),
    )


def _script(*calls: Any) -> ScriptedModel:
    return ScriptedModel([*(reply(c) for c in calls), reply(call("next_state", target="done"))])


async def _drive(c: Chart, model: Any, store: Any = None, **kw: Any) -> tuple[Any, Any, list[Any]]:
    store = store or MemoryStore()
    end = await run_to_end(
        c, await start(c, store=store, model=model), store=store, model=model, **kw
    )
    return end, store, await store.events(end.run_id)


async def test_a_failed_tool_call_sleeps_and_is_tried_again_under_the_same_key() -> None:
    """Two failures, then success: each failure is a `retry` event with the error and the
    wake time, each wait ends with a `wake` event, and the model sees only the result."""
    flaky = _flaky(2)
    started = time.time()
    end, store, events = await _drive(_chart(flaky), _script(call("flaky", order="A-7")))
    assert end.state == "done" and end.attempt == 0 and end.wake is None
    triggers = [e.trigger for e in events]
    assert triggers == [
        "propose",
        "retry",
        "wake",
        "retry",
        "wake",
        "results",
        "propose",
        "go:done",
    ]
    first, second = events[1], events[3]
    assert first.error == "ConnectionError: down (1)" and first.call.name == "flaky"
    assert first.wake == pytest.approx(first.time + 0.05) and second.wake == pytest.approx(
        second.time + 0.1
    )
    assert "attempt 1 of 3" in first.reason and "attempt 2 of 3" in second.reason
    assert events[2].time >= first.wake and events[2].actor == "system"
    assert events[5].result == "order A-7: shipped" and time.time() - started >= 0.15
    assert len(set(SEEN)) == 1 and len(SEEN) == 3  # one key for every attempt
    assert end.ledger["root"].tool_calls == 3  # every attempt is charged
    transcript = await store.transcript(end.run_id, events[0].visit)
    tool_results = [m.content for m in transcript if m.role == "tool"]
    assert tool_results == ["order A-7: shipped", "moved to 'done'"]  # no failure shown
    assert replay(compiled(_chart(flaky)), await store.base(end.run_id), events) == end
    from statechart.mining.traces import calls_of

    assert [(c.tool, c.outcome) for c in calls_of(events)] == [("flaky", "ok")]  # mined once


async def test_when_the_attempts_run_out_the_model_reads_the_last_error() -> None:
    flaky = _flaky(5)
    end, _, events = await _drive(_chart(flaky), _script(call("flaky", order="A-7")))
    assert [e.trigger for e in events][:6] == [
        "propose",
        "retry",
        "wake",
        "retry",
        "wake",
        "results",
    ]
    assert events[5].error == "ConnectionError: down (3)"
    assert events[5].result == "error: tool 'flaky' failed: ConnectionError: down (3)"
    assert end.state == "done" and end.attempt == 0


async def test_only_the_failures_named_by_on_are_tried_again() -> None:
    flaky = _flaky(1, retries=Retry(attempts=3, initial=0.01, on=ConnectionError), error=KeyError)
    _, _, events = await _drive(_chart(flaky), _script(call("flaky", order="A-7")))
    assert [e.trigger for e in events][:2] == ["propose", "results"]
    assert events[1].error == "KeyError: 'down (1)'"


async def test_a_timed_out_attempt_is_tried_again_and_says_so() -> None:
    calls: list[float] = []

    @tool(retry="safe", timeout=0.1, retries=FAST)
    async def slow(order: str) -> str:
        """Slow the first time."""
        calls.append(time.monotonic())
        if len(calls) == 1:
            await anyio.sleep(30)
        return "ok"

    end, _, events = await _drive(_chart(slow), _script(call("slow", order="A-7")))
    retry = events[1]
    assert retry.trigger == "retry" and retry.timeout == 0.1
    assert retry.error.startswith("CallTimeoutError: tool 'slow' in state 'work' ran past")
    assert end.state == "done" and len(calls) == 2


async def test_a_failed_model_call_is_tried_again_by_the_state_retries() -> None:
    class Flaky(ScriptedModel):
        fails = 1

        async def complete(self, request: Any) -> Any:
            if self.fails:
                self.fails -= 1
                raise ConnectionError("the provider is overloaded")
            return await super().complete(request)

    c = _chart(retries=Retry(attempts=2, initial=0.01, jitter=0))
    model = Flaky([reply(call("next_state", target="done"))])
    end, store, events = await _drive(c, model)
    assert [e.trigger for e in events] == ["retry", "wake", "propose", "go:done"]
    assert events[0].actor == "system" and events[0].error.startswith("ConnectionError")
    assert events[0].source == "work.think" and events[0].usage.model_calls == 1
    assert end.state == "done" and end.ledger["root"].model_calls == 2
    assert replay(compiled(c), await store.base(end.run_id), events) == end


async def test_without_retries_a_failed_model_call_still_escalates() -> None:
    class Down(ScriptedModel):
        async def complete(self, request: Any) -> Any:
            raise ConnectionError("down")

    end, _, events = await _drive(_chart(), Down([]))
    assert end.state == "escalated" and events[-1].error == "ConnectionError: down"


async def test_a_wait_longer_than_max_sleep_leaves_the_run_sleeping_until_resumed(
    tmp_path: Path,
) -> None:
    """The drive stops with the run `sleeping` and its wake time stored; a resume before
    then changes nothing; one after it wakes the run and goes on."""
    flaky = _flaky(1, retries=Retry(attempts=2, initial=0.3, jitter=0))
    c = _chart(flaky)
    store = SQLiteStore(tmp_path / "s.db")
    model = _script(call("flaky", order="A-7"))
    end, _, events = await _drive(c, model, store=store, max_sleep=0)
    assert (end.status, end.attempt) == ("sleeping", 1) and end.wake == events[-1].wake
    assert "the next attempt is due at" in end.reason
    stored = (await store.load(end.run_id)).snapshot
    assert stored.status == "sleeping" and stored.wake == end.wake
    again = await resume(c, end.run_id, store=store, model=model, max_sleep=0)
    assert again.seq == end.seq and again.status == "sleeping"
    await anyio.sleep(end.wake - time.time() + 0.01)
    done = await resume(c, end.run_id, store=store, model=model, max_sleep=0)
    assert done.state == "done"
    assert [e.trigger for e in await store.events(end.run_id)][2:4] == ["wake", "results"]
    store.close()


async def _killed_asleep(where: str, marker: Path) -> None:
    """Run tests/support/sleeper.py on `where` (a SQLite path or a DSN) until its run is
    stored `sleeping`, then SIGKILL it."""
    from tests.support import sleeper

    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.sleeper", where, str(marker)], cwd=ROOT
    )
    try:
        with anyio.fail_after(60):
            while True:
                assert child.poll() is None, "the child stopped before it slept"
                store = sleeper.open_store(where)
                try:
                    if (await store.load(sleeper.RUN_ID)).snapshot.status == "sleeping":
                        break
                except Exception:  # not created yet
                    pass
                finally:
                    await _closed(store)
                await anyio.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)


async def _closed(store: Any) -> None:
    out = store.close()
    if out is not None:
        await out


async def _resumed_after_the_kill(where: str, marker: Path) -> None:
    """Resuming takes the run over with no doubt about the call (it failed, and that is
    recorded), waits out the rest of the backoff, and the second attempt ends the run."""
    from tests.support import sleeper

    store = sleeper.open_store(where)
    c = sleeper.chart(str(marker))
    end = await resume(c, sleeper.RUN_ID, store=store, model=sleeper.script())
    events = await store.events(sleeper.RUN_ID)
    retry = next(e for e in events if e.trigger == "retry")
    wake = next(e for e in events if e.trigger == "wake")
    assert end.state == "done" and "takeover" not in [e.trigger for e in events]
    assert wake.time >= retry.wake == pytest.approx(retry.time + sleeper.BACKOFF)
    assert marker.read_text().split() == ["attempt", "attempt"]  # nothing ran twice
    await _closed(store)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_sigkill_during_the_backoff_on_sqlite_resumes_on_time_running_nothing_twice(
    tmp_path: Path,
) -> None:
    """A real process fails the first attempt and sleeps 1.5 s holding the lease: killed."""
    where, marker = str(tmp_path / "s.db"), tmp_path / "attempts"
    await _killed_asleep(where, marker)
    await _resumed_after_the_kill(where, marker)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # psycopg's async API: asyncio only
async def test_a_sigkill_during_the_backoff_on_postgres_resumes_on_time(
    pg_store: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "attempts"
    await _killed_asleep(pg_store.dsn, marker)
    await _resumed_after_the_kill(pg_store.dsn, marker)


def test_the_backoff_grows_by_factor_up_to_max_interval_with_reproducible_jitter() -> None:
    r = Retry(attempts=6, initial=1, factor=3, max_interval=10, jitter=0)
    assert [r.interval(n) for n in range(1, 5)] == [1, 3, 9, 10]
    j = Retry(initial=2, jitter=0.5)
    drawn = [j.interval(1, f"run:{n}") for n in range(50)]
    assert all(1 <= d <= 3 for d in drawn) and len(set(drawn)) > 40
    assert j.interval(1, "run:7") == j.interval(1, "run:7")
    assert r.again(ConnectionError(), 5) and not r.again(ConnectionError(), 6)
    assert not Retry(on=(KeyError,)).again(ValueError(), 1)
    assert Retry().again(CallTimeoutError("x", 1.0), 1)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"attempts": 0}, "attempts=0 is below 1"),
        ({"attempts": 2.5}, "attempts=2.5 is not a whole number"),
        ({"initial": -1}, "initial=-1 is not a number of seconds"),
        ({"factor": 0.5}, "factor=0.5 is below 1"),
        ({"initial": 5, "max_interval": 1}, "max_interval=1 is below initial"),
        ({"jitter": 2}, "jitter=2 is not between 0 and 1"),
        ({"on": ("x",)}, "is not a tuple of exception classes"),
    ],
)
def test_a_retry_that_makes_no_sense_is_refused_at_build(
    kwargs: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ChartError, match=problem):
        Retry(**kwargs)


def test_retries_do_not_change_the_chart_version() -> None:
    assert _chart().version == _chart(retries=Retry(attempts=5)).version


# -- after= edges -------------------------------------------------------------------------


def _approval_chart(after: Any = 0.3) -> Chart:
    return Chart(
        "reminded",
        states=(
            State("review", kind="approval", on_approve="done", on_reject="done"),
            State("remind", kind="terminal", outcome="failure"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("review", "remind", after=after),),
        budget=Budget(max_steps=10),
    )


async def test_an_approval_nobody_answers_escalates_through_its_after_edge(
    tmp_path: Path,
) -> None:
    """The timer is armed when the run enters `review` and stored with it; a resume
    before it is due changes nothing; one after it takes the edge (a free `system` step)."""
    c = _approval_chart()
    store = SQLiteStore(tmp_path / "a.db")
    run = await start(c, store=store, model=ScriptedModel([]))
    assert run.status == "waiting" and run.timers == {"review->remind": run.created_at + 0.3}
    assert run.wake == run.created_at + 0.3
    (listed,) = await store.summaries()
    assert listed.wake == run.wake
    early = await resume(c, run.run_id, store=store, model=ScriptedModel([]))
    assert early.seq == 0 and early.status == "waiting"
    await anyio.sleep(run.wake - time.time() + 0.01)
    end = await resume(c, run.run_id, store=store, model=ScriptedModel([]))
    (fired,) = await store.events(run.run_id)
    assert (end.state, end.timers, end.wake) == ("remind", {}, None)
    assert fired.actor == "system" and fired.edge == "review->remind" and fired.time >= run.wake
    assert fired.reason == (
        "state 'review' was active for 0.3 s or more: its after edge to 'remind' fired"
    )
    assert fired.usage.steps == 0
    assert replay(compiled(c), await store.base(run.run_id), [fired]) == end
    store.close()


async def test_an_answer_before_the_timer_disarms_it() -> None:
    from statechart import approve

    c = _approval_chart(after=timedelta(hours=24))
    store = MemoryStore()
    run = await start(c, store=store, model=ScriptedModel([]))
    assert run.timers["review->remind"] == run.created_at + 86400
    decided = (await approve(c, run.run_id, store=store, by="dana")).run
    assert decided.state == "done" and decided.timers == {} and decided.wake is None


async def test_a_timer_fires_between_the_steps_of_a_busy_model_state() -> None:
    """`work` keeps calling a tool; 0.25 s after it was entered, its after edge moves the
    run on, dropping nothing the model was told."""
    from statechart import FunctionModel

    @tool(retry="safe", repeatable=True)
    async def poll(n: int) -> str:
        """Look again."""
        await anyio.sleep(0.05)
        return f"nothing yet ({n})"

    count = iter(range(1000))
    model = FunctionModel(lambda request: reply(call("poll", n=next(count))))
    c = Chart(
        "patient",
        states=(
            State("work", tools=(poll,), instructions="Poll.", max_iterations=100),
            State("gave_up", kind="terminal"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"), Edge("work", "gave_up", after=0.25)),
        budget=Budget(max_steps=500),
    )
    assert "gave_up" not in str(compiled(c).views.get("work") or "")  # not offered
    end, store, events = await _drive(c, model)
    fired = events[-1]
    assert end.state == "gave_up" and fired.edge == "work->gave_up" and fired.actor == "system"
    assert fired.time - events[0].time >= 0.2
    assert replay(compiled(c), await store.base(end.run_id), events) == end


async def test_neither_the_model_nor_a_handler_may_take_an_after_edge() -> None:
    chart = Chart(
        "chosen",
        states=(
            State("work", instructions="Finish."),
            State("later", kind="terminal"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"), Edge("work", "later", after=60)),
        budget=Budget(max_steps=10),
    )
    model = ScriptedModel(
        [reply(call("next_state", target="later")), reply(call("next_state", target="done"))]
    )
    end, _, events = await _drive(chart, model)
    assert end.state == "done"
    refused = next(e for e in events if e.refused)
    assert "target: Input should be 'done' or 'escalated'" in refused.refused
    assert model.requests[0].tools[-1].parameters["properties"]["target"]["enum"] == [
        "done",
        "escalated",
    ]

    async def pick(ctx: Any) -> str:
        return "later"

    coded = Chart(
        "coded",
        states=(
            State("work", kind="code", handler=pick),
            State("later", kind="terminal"),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"), Edge("work", "later", after=60)),
        budget=Budget(max_steps=10),
    )
    end, _, events = await _drive(coded, ScriptedModel([]))
    assert end.state == "escalated"
    assert "edge work->later is taken only when its timer fires (after 60 s)" in str(
        events[-1].reason
    )


def test_an_after_edge_is_positive_takes_no_guard_and_counts_in_the_version() -> None:
    with pytest.raises(ChartError, match=r"edge review->remind: after must be a positive"):
        Edge("review", "remind", after=0)
    with pytest.raises(ChartError, match="takes no guard"):
        Chart(
            "g",
            states=(State("a"), State("b", kind="terminal")),
            edges=(Edge("a", "b", after=5, guard=lambda f: True),),
            budget=Budget(max_steps=5),
        )
    assert Edge("a", "b", after=timedelta(minutes=2)).after == 120.0
    assert _approval_chart(after=1).version != _approval_chart(after=2).version


def test_the_timer_steps_are_pure_functions_of_the_clock_they_are_given() -> None:
    """With a fake clock: an after= edge is not due a millisecond early and is taken at its
    time; a sleeping run is woken whenever it is told to be, with no clock of its own."""
    from statechart.engine.timers import due_timer, retry_later, woken

    c = _approval_chart(after=10)
    tables = compiled(c)
    run = Run(
        run_id="r",
        chart=c.name,
        chart_version=c.version,
        model="m",
        state="review",
        status="waiting",
        timers={"review->remind": 1010.0},
        wake=1010.0,
    )
    assert due_timer(tables, run, now=1009.999) is None
    fired = due_timer(tables, run, now=1010.0)
    assert fired is not None and fired.run.state == "remind" and fired.event.time == 1010.0
    assert fired.run.timers == {} and fired.run.wake is None
    assert replay(tables, run, [fired.event]) == fired.run

    work = _chart(_flaky(0))
    tables = compiled(work)
    acting = Run(
        run_id="r", chart=work.name, chart_version=work.version, model="m", state="work.think"
    )
    slept = retry_later(
        tables,
        acting,
        FAST,
        ConnectionError("down"),
        2000.0,
        Spent(steps=1),
        actor="system",
        what="the model call in state 'work'",
    )
    assert slept is not None and (slept.run.status, slept.run.wake) == ("sleeping", 2000.05)
    up = woken(tables, slept.run, now=2000.05)
    assert (up.run.status, up.run.wake, up.run.attempt) == ("running", None, 1)
    assert replay(tables, acting, [slept.event, up.event]) == up.run
    assert (
        retry_later(
            tables, acting, FAST, KeyboardInterrupt(), 0.0, Spent(), actor="system", what="x"
        )
        is None
    )  # not an Exception: never retried


async def test_a_cancel_during_a_backoff_ends_the_drive_quietly() -> None:
    """Cancelled from elsewhere while the drive sleeps: the wake loses the race for the
    seq, and the drive stops with the run cancelled, raising nothing."""
    from statechart import cancel

    flaky = _flaky(5, retries=Retry(attempts=3, initial=0.3, jitter=0))
    c = _chart(flaky)
    store = MemoryStore()
    model = _script(call("flaky", order="A-7"))
    run = await start(c, store=store, model=model)

    async def cancel_soon() -> None:
        while (await store.load(run.run_id)).snapshot.status != "sleeping":
            await anyio.sleep(0.01)
        await cancel(c, run.run_id, store=store, reason="stop", by="ops")

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_soon)
        end = await run_to_end(c, run, store=store, model=model)
    assert end.state == "cancelled"
    assert [e.trigger for e in await store.events(run.run_id)][-1] == "cancel"


async def test_a_never_tool_cut_off_by_its_timeout_is_not_tried_again() -> None:
    """The cut attempt may still finish in its thread: a `never` tool is not run again,
    its timeout goes to the model."""
    tried: list[int] = []

    @tool(retry="never", timeout=0.05, retries=FAST)
    def pay(order: str) -> str:
        """Pay once, slowly."""
        tried.append(1)
        time.sleep(0.3)
        return "paid"

    end, _, events = await _drive(_chart(pay), _script(call("pay", order="A-7")))
    assert [e.trigger for e in events][:2] == ["propose", "results"]
    assert events[1].timeout == 0.05 and tried == [1] and end.state == "done"


def test_a_timer_the_chart_no_longer_has_never_fires() -> None:
    """A run migrated onto a chart without its `after=` edge keeps a stale timer: it is
    ignored, not a crash."""
    from statechart.engine.timers import due_timer

    c = _approval_chart(after=10)
    without = c.with_edges(Edge("review", "remind"))  # the same edge, no longer timed
    run = Run(
        run_id="r",
        chart=without.name,
        chart_version=without.version,
        model="m",
        state="review",
        status="waiting",
        timers={"review->remind": 5.0},
        wake=5.0,
    )
    assert due_timer(compiled(without), run, now=100.0) is None
