"""`watch` and `on=`: one typed event stream per run, in order, with the stored log the
same as an unwatched run's; back-pressure, closing, errors, nested paths, progress from
every kind of tool, and a driver killed mid-stream."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from statechart import (
    Budget,
    CallStarted,
    Chart,
    Edge,
    FunctionModel,
    LeaseHeldError,
    LiveEvent,
    MemoryStore,
    Progress,
    Reply,
    Request,
    RunEnded,
    RunWaiting,
    ScriptedModel,
    SQLiteStore,
    State,
    Step,
    Token,
    ToolContext,
    approve,
    call,
    reply,
    run_to_end,
    start,
    tool,
    watch,
)
from tests.support import live_agent

ROOT = Path(__file__).resolve().parents[2]


@tool(retry="safe")
def crawl(site: str, ctx: ToolContext) -> str:
    """Crawl a site (a worker thread)."""
    for page in (1, 2):
        ctx.progress(f"{site}: page {page}", page=page)
        time.sleep(0.01)
    return f"2 pages of {site}"


@tool(retry="safe")
async def fetch(site: str, ctx: ToolContext) -> str:
    """Fetch a site (on the event loop)."""
    ctx.progress(f"fetching {site}")
    await anyio.sleep(0)
    return f"fetched {site}"


@tool(retry="safe", inline=True)
def count(site: str, ctx: ToolContext) -> str:
    """Count a site's pages (inline)."""
    ctx.progress("counted", pages=7)
    return "7 pages"


@tool(retry="safe", needs_approval=True)
def publish(text: str) -> str:
    """Publish the answer."""
    return "published"


def desk() -> Chart:
    return Chart(
        "desk",
        states=(
            State("work", tools=(crawl, fetch, count), instructions="Look, then leave."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=30),
    )


REPLIES = [
    reply(call("crawl", "c1", site="a.example"), content="Let me crawl first."),
    reply(call("fetch", "c2", site="b.example")),
    reply(call("count", "c3", site="c.example")),
    reply(call("next_state", "c4", target="done"), content="All done now, thank you."),
]


def policy(request: Request) -> Reply:
    """`REPLIES` by iteration: the same answer when a call is asked again."""
    asked = sum(1 for m in request.transcript if m.role == "assistant")
    return REPLIES[asked]


def model() -> FunctionModel:
    return FunctionModel(policy, spec="policy")


async def watched(chart: Chart, store: Any, m: Any, **options: Any) -> list[LiveEvent]:
    run = await start(chart, store=store, model=m)
    async with watch(chart, run, store=store, model=m, **options) as events:
        seen = [event async for event in events]
    assert events.run is not None
    return seen


def seq_of(event: LiveEvent) -> int:
    if isinstance(event, Step):
        return event.event.seq
    if isinstance(event, (RunWaiting, RunEnded)):
        return event.run.seq
    return event.seq


def test_a_watched_run_tells_each_call_its_tokens_and_progress_before_its_step() -> None:
    seen = anyio.run(watched, desk(), MemoryStore(), model())
    kinds = [event.kind for event in seen]
    assert kinds[-1] == "ended" and kinds.count("ended") == 1
    end = seen[-1]
    assert isinstance(end, RunEnded) and end.run.state == "done"
    steps = [e for e in seen if isinstance(e, Step)]
    assert [s.event.seq for s in steps] == list(range(1, end.run.seq + 1))  # none dropped
    for step in steps:
        n = step.event.seq
        at = seen.index(step)
        before = [e for e in seen[:at] if not isinstance(e, Step) and seq_of(e) == n]
        after = [e for e in seen[at + 1 :] if not isinstance(e, (Step, RunEnded))]
        assert not [e for e in after if seq_of(e) == n]  # nothing of a step after it
        started = [e for e in before if isinstance(e, CallStarted)]
        assert len(started) <= 1 and (not before or before[0] == started[0])
    assert {e.run_id for e in seen if not isinstance(e, (Step, RunEnded))} == {end.run.run_id}
    calls = [e for e in seen if isinstance(e, CallStarted)]
    assert [(c.call, c.name) for c in calls if c.call == "tool"] == [
        ("tool", "crawl"),
        ("tool", "fetch"),
        ("tool", "count"),
    ]
    assert [c.call_id for c in calls if c.call == "tool"] == ["c1", "c2", "c3"]
    assert {c.path for c in calls} == {"work.think", "work.act"}

    def said(call_id: str, tool_call: str = "") -> str:
        return "".join(
            e.text
            for e in seen
            if isinstance(e, Token) and e.call_id == call_id and e.tool_call_id == tool_call
        )

    models = [c for c in calls if c.call == "model"]
    assert len(models) == 4 and all(c.name == "policy" for c in models)
    assert said(models[0].call_id) == "Let me crawl first."
    assert json.loads(said(models[0].call_id, "c1")) == {"site": "a.example"}
    assert said(models[3].call_id) == "All done now, thank you."
    reports = {(e.tool, e.message) for e in seen if isinstance(e, Progress)}
    assert ("crawl", "a.example: page 2") in reports  # from a worker thread (latest kept)
    assert ("fetch", "fetching b.example") in reports  # an async tool
    assert ("count", "counted") in reports  # an inline tool
    assert [e.data for e in seen if isinstance(e, Progress) and e.tool == "count"] == [{"pages": 7}]


def test_watching_stores_exactly_what_an_unwatched_run_stores() -> None:
    async def both() -> tuple[list[Any], list[Any]]:
        logs = []
        for watching in (True, False):
            store, m, c = MemoryStore(), model(), desk()
            run = await start(c, store=store, model=m, run_id="same")
            if watching:
                async with watch(c, run, store=store, model=m, clock=lambda: 1.0) as events:
                    async for _ in events:
                        pass
            else:
                await run_to_end(c, run, store=store, model=m, clock=lambda: 1.0)
            stored = await store.load("same")
            logs.append(
                [  # all of each event but the wall time measured
                    msgspec.structs.replace(e, usage=msgspec.structs.replace(e.usage, wall_ms=0))
                    for e in await store.events("same")
                ]
                + [(stored.snapshot.state, stored.snapshot.seq, stored.snapshot.status)]
            )
        return logs[0], logs[1]  # watched, unwatched

    with_watch, without = anyio.run(both)
    assert with_watch == without
    assert with_watch[-1] == ("done", 8, "ended")


def test_a_sub_charts_events_carry_its_nested_path() -> None:
    def team() -> Chart:
        return Chart(
            "team",
            states=(State("dig", tools=(fetch,)), State("found", kind="terminal")),
            edges=(Edge("dig", "found"),),
        )

    parent = Chart(
        "parent",
        states=(
            State("research", kind="chart", chart=team, exits={"found": "done"}),
            State("done", kind="terminal"),
        ),
        budget=Budget(max_steps=20),
    )
    m = ScriptedModel(
        [
            reply(call("fetch", "f1", site="deep.example"), content="Digging."),
            reply(call("next_state", "f2", target="found"), content="Found it."),
        ]
    )
    seen = anyio.run(watched, parent, MemoryStore(), m)
    tokens = [e for e in seen if isinstance(e, Token) and not e.tool]
    assert {t.path for t in tokens} == {"research.dig.think"}
    assert "".join(t.text for t in tokens) == "Digging.Found it."
    (report,) = [e for e in seen if isinstance(e, Progress)]
    assert report.path == "research.dig.act" and report.message == "fetching deep.example"
    assert isinstance(seen[-1], RunEnded) and seen[-1].run.state == "done"


def test_a_slow_consumer_holds_the_run_only_past_the_buffer_and_loses_no_step() -> None:
    async def main() -> tuple[int, list[LiveEvent], int]:
        store, m, c = MemoryStore(), model(), desk()
        run = await start(c, store=store, model=m)
        seen: list[LiveEvent] = []
        async with watch(c, run, store=store, model=m, buffer=2, interval=0) as events:
            seen.append(await events.__anext__())
            await anyio.sleep(0.3)  # the consumer dawdles: the run waits for it
            held = (await store.load(run.run_id)).snapshot.seq
            seen += [event async for event in events]
        end = (await store.load(run.run_id)).snapshot
        return held, seen, end.seq

    held, seen, last = anyio.run(main)
    assert held <= 3  # at most the buffer's worth of steps stored ahead of the consumer
    assert last == 8
    assert [e.event.seq for e in seen if isinstance(e, Step)] == list(range(1, 9))


def test_leaving_early_lets_the_run_go_on_and_stop_on_close_stops_it() -> None:
    async def main(stop: bool) -> tuple[str, str, int]:
        store, m, c = MemoryStore(), model(), desk()
        run = await start(c, store=store, model=m)
        async with watch(c, run, store=store, model=m, stop_on_close=stop) as events:
            async for event in events:
                if isinstance(event, Step):
                    break
        left = (await store.load(run.run_id)).snapshot
        end = await run_to_end(c, run.run_id, store=store, model=m)
        return left.status, end.state, left.seq

    status, state, seq = anyio.run(main, False)
    assert (status, state, seq) == ("ended", "done", 8)  # watched or not, it finished
    status, state, seq = anyio.run(main, True)
    assert status == "running" and seq < 8  # stopped where it was, stored
    assert state == "done"  # and a later drive finishes it


def test_an_error_in_the_consumer_stops_the_drive_and_is_raised_as_it_is() -> None:
    async def main() -> tuple[str, int]:
        store, m, c = MemoryStore(), model(), desk()
        run = await start(c, store=store, model=m)
        with pytest.raises(KeyError, match="consumer broke"):
            async with watch(c, run, store=store, model=m) as events:
                async for event in events:
                    if isinstance(event, Step):
                        raise KeyError("consumer broke")
        left = (await store.load(run.run_id)).snapshot
        return left.status, left.seq

    status, seq = anyio.run(main)
    assert status == "running" and seq < 8


def test_a_drive_that_cannot_start_raises_from_the_stream() -> None:
    async def main() -> None:
        store, m, c = MemoryStore(), model(), desk()
        run = await start(c, store=store, model=m)
        await store.acquire(run.run_id, holder="another driver", ttl=60)
        with pytest.raises(LeaseHeldError):
            async with watch(c, run, store=store, model=m) as events:
                async for _ in events:
                    pass

    anyio.run(main)


def test_on_gets_every_chunk_with_a_plain_or_an_async_function() -> None:
    async def main(asynchronous: bool) -> list[LiveEvent]:
        store, m, c = MemoryStore(), model(), desk()
        run = await start(c, store=store, model=m)
        seen: list[LiveEvent] = []

        async def later(event: LiveEvent) -> None:
            await anyio.sleep(0)
            seen.append(event)

        on = later if asynchronous else seen.append
        end = await run_to_end(c, run, store=store, model=m, on=on)
        assert end.state == "done"
        return seen

    plain, awaited = anyio.run(main, False), anyio.run(main, True)
    strip = [(e.kind, seq_of(e)) for e in plain]
    assert strip == [(e.kind, seq_of(e)) for e in awaited]
    words = [e.text for e in plain if isinstance(e, Token) and not e.tool and e.seq == 7]
    assert words == ["All ", "done ", "now, ", "thank ", "you."]  # chunk by chunk, unjoined
    assert strip[-1] == ("ended", 8)


def test_a_model_that_cannot_stream_is_watched_without_tokens() -> None:
    class Plain:
        spec = "plain"

        async def complete(self, request: Request) -> Reply:
            return policy(request)

    seen = anyio.run(watched, desk(), MemoryStore(), Plain())
    assert not [e for e in seen if isinstance(e, Token)]
    assert len([e for e in seen if isinstance(e, CallStarted) and e.call == "model"]) == 4
    assert isinstance(seen[-1], RunEnded) and seen[-1].run.state == "done"


def test_a_run_that_waits_for_a_human_says_so_and_a_resume_is_watched_to_the_end() -> None:
    chart = Chart(
        "pub",
        states=(State("work", tools=(publish,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    m = ScriptedModel(
        [
            reply(call("publish", "p1", text="hello")),
            reply(call("next_state", "p2", target="done")),
        ]
    )

    async def main() -> tuple[LiveEvent, LiveEvent]:
        store = MemoryStore()
        first = await watched(chart, store, m)
        run_id = first[-1].run.run_id  # type: ignore[union-attr]
        await approve(chart, run_id, store=store, by="ana")
        async with watch(chart, run_id, store=store, model=m, resuming=True) as events:
            rest = [event async for event in events]
        return first[-1], rest[-1]

    waiting, ended = anyio.run(main)
    assert isinstance(waiting, RunWaiting) and waiting.run.status == "waiting"
    assert isinstance(ended, RunEnded) and ended.run.state == "done"


def test_a_driver_killed_mid_stream_is_followed_by_one_that_asks_again(tmp_path: Path) -> None:
    """SIGKILL while the model streams: nothing of the call was stored, the next driver
    says it starts the same call `again` and the log has one step for it."""
    db = tmp_path / "live.db"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.streamer", str(db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "LIVE_AGENT_DELAY": "0.2"},
    )
    assert child.stdout is not None
    lines: list[dict[str, Any]] = []
    try:
        for line in child.stdout:
            lines.append(json.loads(line))
            if lines[-1]["kind"] == "token":
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    began = next(e for e in lines if e["kind"] == "call_started")
    assert lines[-1]["kind"] == "token" and began["call"] == "model"
    time.sleep(1.2)  # the dead driver's lease (1 s) expires

    async def takeover() -> tuple[list[LiveEvent], list[Any]]:
        store = SQLiteStore(str(db))
        try:
            assert (await store.load("streamed")).snapshot.seq < began["seq"]  # not stored
            chart, m = live_agent.chart, live_agent.demo_model()
            async with watch(chart, "streamed", store=store, model=m, lease_ttl=1) as events:
                seen = [event async for event in events]
            return seen, await store.events("streamed")
        finally:
            store.close()

    seen, log = anyio.run(takeover)
    again = [e for e in seen if isinstance(e, CallStarted) and e.again]
    assert len(again) == 1
    assert (again[0].seq, again[0].call_id) == (began["seq"], began["call_id"])
    assert isinstance(seen[-1], RunEnded) and seen[-1].run.state == "done"
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    asked = [e for e in log if e.seq == began["seq"]]
    assert len(asked) == 1 and asked[0].source == "work.think"


class ConsumerBroke(Exception):
    pass


def test_an_on_function_that_raises_stops_the_drive_after_the_step_is_stored() -> None:
    """The consumer's error is not the model's: the call's step is stored as unwatched,
    then the error is raised; a later drive goes on from there."""

    async def main(on_kind: str) -> tuple[str, list[Any], Any]:
        store, m, c = MemoryStore(), model(), desk()
        run = await start(c, store=store, model=m)

        def on(event: LiveEvent) -> None:
            if event.kind == on_kind:
                raise ConsumerBroke(f"cannot show a {on_kind}")

        with pytest.raises(ConsumerBroke, match=on_kind):
            await run_to_end(c, run, store=store, model=m, on=on)
        log = await store.events(run.run_id)
        end = await run_to_end(c, run.run_id, store=store, model=m)
        return end.state, log, await store.events(run.run_id)

    state, log, whole = anyio.run(main, "token")
    assert state == "done"
    assert [(e.seq, e.trigger, e.error) for e in log] == [(1, "propose", None)]
    assert [e.trigger for e in whole][:2] == ["propose", "results"]

    state, log, whole = anyio.run(main, "progress")  # told from crawl's worker thread
    assert state == "done"
    assert [(e.seq, e.trigger) for e in log] == [(1, "propose"), (2, "results")]
    assert log[-1].result == "2 pages of a.example"  # the tool's own result, not an error


def test_progress_from_a_tool_its_timeout_abandoned_is_not_told_after_its_step() -> None:
    @tool(retry="safe", timeout=0.1)
    def slow(site: str, ctx: ToolContext) -> str:
        """Read a slow site."""
        for n in range(8):
            ctx.progress(f"late {n}")
            time.sleep(0.05)
        return "never seen"

    chart = Chart(
        "slow",
        states=(State("work", tools=(slow,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )

    async def main() -> list[LiveEvent]:
        m = ScriptedModel(
            [
                reply(call("slow", "s1", site="x")),
                reply(call("next_state", "s2", target="done")),
            ],
            chunk_delay=0.1,  # the model streams while the abandoned thread goes on
        )
        return await watched(chart, MemoryStore(), m, interval=0)

    seen = anyio.run(main)
    (cut,) = [e for e in seen if isinstance(e, Step) and e.event.seq == 2]
    assert cut.event.error is not None and "CallTimeoutError" in cut.event.error
    assert [e for e in seen if isinstance(e, Progress)]  # told while the call ran
    assert not [e for e in seen[seen.index(cut) :] if isinstance(e, Progress)]


class Halt(BaseException):
    pass


def test_a_base_exception_in_the_drive_comes_out_of_watch_as_it_is() -> None:
    @tool(retry="safe", inline=True)
    def halt() -> str:
        """Stop everything."""
        raise Halt("stop")

    chart = Chart(
        "halting",
        states=(State("work", tools=(halt,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    m = ScriptedModel([reply(call("halt", "h1"))])
    with pytest.raises(Halt):
        anyio.run(watched, chart, MemoryStore(), m)


def test_a_relay_wants_tokens_only_while_an_inspector_listens(tmp_path: Path) -> None:
    from statechart.runtime.relay import listening, relay_for

    store = SQLiteStore(str(tmp_path / "runs.db"))

    async def main() -> tuple[bool, bool]:
        relay = relay_for(store)
        assert relay is not None
        alone = relay.wants_tokens
        async with listening(store):
            relay._scanned = 0.0  # read the directory again now, not in RESCAN seconds
            heard = relay.wants_tokens
        relay.close()
        return alone, heard

    try:
        assert anyio.run(main) == (False, True)
    finally:
        store.close()


def test_an_async_on_function_is_not_left_with_an_unawaited_call_when_the_drive_fails() -> None:
    """A progress report from the event loop waits for the next event; if the drive fails
    first, the async function's call is closed rather than left to warn."""
    import gc
    import warnings

    @tool(retry="safe")
    async def report_then_halt(ctx: ToolContext) -> str:
        """Report, then stop everything."""
        ctx.progress("halfway")
        raise Halt("stop")

    chart = Chart(
        "halting",
        states=(State("work", tools=(report_then_halt,)), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
        budget=Budget(max_steps=10),
    )
    seen: list[str] = []

    async def on(event: LiveEvent) -> None:
        seen.append(event.kind)

    async def main() -> None:
        store, m = MemoryStore(), ScriptedModel([reply(call("report_then_halt", "h1"))])
        run = await start(chart, store=store, model=m)
        with pytest.raises(Halt):
            await run_to_end(chart, run, store=store, model=m, on=on)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        anyio.run(main)
        gc.collect()
    assert "progress" not in seen  # never awaited: the drive failed first
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_an_async_on_functions_time_is_neither_the_calls_timeout_nor_its_wall_time() -> None:
    """A consumer that takes 30 ms a token, on a reply of 20 tokens under a 0.3 s call
    timeout: the call is not cut off, and its wall time charged is the call's own."""
    chart = Chart(
        "slowly_shown",
        states=(
            State("talk", instructions="Talk.", call_timeout=0.3),
            State("done", kind="terminal"),
        ),
        edges=(Edge("talk", "done"),),
        budget=Budget(max_steps=10),
    )
    words = " ".join(f"w{n}" for n in range(20))

    async def slow(event: LiveEvent) -> None:
        if isinstance(event, Token):
            await anyio.sleep(0.03)

    async def main() -> tuple[Any, list[Any]]:
        store = MemoryStore()
        m = ScriptedModel([reply(call("next_state", "t1", target="done"), content=words)])
        run = await start(chart, store=store, model=m)
        end = await run_to_end(chart, run, store=store, model=m, on=slow)
        return end, await store.events(run.run_id)

    end, events = anyio.run(main)
    assert end.state == "done", end.reason  # not cut off by the consumer's 0.6 s
    assert events[0].error is None and events[0].usage.wall_ms < 300
