"""Sync user code runs in a worker thread: a blocking `def` tool never stalls the event
loop, so the lease heartbeat keeps renewing and no second driver takes the run over."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    State,
    call,
    reply,
    run_to_end,
    set_thread_limit,
    start,
    tool,
)
from statechart.runtime import threads

ROOT = Path(__file__).parents[2]


def _race(tmp_path: Path, *, inline: bool) -> tuple[list[str], list[str], list[str]]:
    """Two real processes: the first drives a run whose tool blocks 2.5 s under a 0.6 s
    lease; the second tries to resume it all along. Returns the pids the tool ran in, the
    two processes' reports, and the run's triggers."""
    db, marker = tmp_path / "race.db", tmp_path / "calls"
    args = [str(db), str(marker)]
    tail = ["2.5", "0.6", "1" if inline else "0"]
    first = subprocess.Popen(
        [sys.executable, "-m", "tests.support.blocking_tool", *args, "first", *tail],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert first.poll() is None and time.monotonic() < deadline, "the tool never started"
        time.sleep(0.02)
    second = subprocess.run(
        [sys.executable, "-m", "tests.support.blocking_tool", *args, "second", *tail],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out, _ = first.communicate(timeout=120)
    store = SQLiteStore(db)
    triggers = [e.trigger for e in anyio.run(store.events, "blocking")]
    store.close()
    return marker.read_text().split(), [out.strip(), second.stdout.strip()], triggers


def test_a_blocking_def_tool_keeps_its_lease_and_runs_once(tmp_path: Path) -> None:
    """The heartbeat renews the lease while the tool blocks in its thread: the second
    process is refused until the run has ended, and the tool ran exactly once."""
    ran, said, triggers = _race(tmp_path, inline=False)
    assert len(ran) == 1, f"the tool ran in {ran}: {said}"
    assert said[0] == "first: done"
    assert "takeover" not in triggers and triggers[-1] == "go:done"


def test_an_inline_blocking_tool_loses_its_lease_and_runs_twice(tmp_path: Path) -> None:
    """What the thread prevents, shown: `inline=True` on a tool that blocks stalls the
    loop, the lease lapses, and the second process takes over and runs the call again."""
    ran, said, triggers = _race(tmp_path, inline=True)
    assert len(ran) == 2 and ran[0] != ran[1], said
    assert "takeover" in triggers
    assert said[0] == "first: LeaseLostError"


def _chart(*tools: object, handler: object = None) -> Chart:
    states = [State("work", tools=tools, instructions="Work, then finish.")]  # type: ignore[arg-type]
    edges = [Edge("work", "done")]
    if handler is not None:
        states.insert(0, State("check", kind="code", handler=handler))  # type: ignore[arg-type]
        edges.append(Edge("check", "work"))
    return Chart(
        "threads",
        states=(*states, State("done", kind="terminal")),
        edges=tuple(edges),
        budget=Budget(max_steps=20),
    )


@pytest.mark.anyio
async def test_sync_tools_and_handlers_run_off_the_loop_async_and_inline_ones_on_it() -> None:
    loop_thread = threading.get_ident()
    seen: dict[str, int] = {}

    @tool(retry="safe")
    def blocking(q: str) -> str:
        """Runs in a worker thread."""
        seen["def"] = threading.get_ident()
        return q

    @tool(retry="safe", inline=True)
    def quick(q: str) -> str:
        """Runs on the loop."""
        seen["inline"] = threading.get_ident()
        return q

    @tool(retry="safe")
    async def awaited(q: str) -> str:
        """Runs on the loop."""
        seen["async"] = threading.get_ident()
        return q

    def check(ctx: object) -> Decision:  # a sync handler
        seen["handler"] = threading.get_ident()
        return Decision("work")

    assert (blocking.threaded, quick.threaded, awaited.threaded) == (True, False, False)
    c = _chart(blocking, quick, awaited, handler=check)
    model = ScriptedModel(
        [
            reply(call("blocking", q="a"), call("quick", q="b"), call("awaited", q="c")),
            reply(call("next_state", target="done")),
        ]
    )
    store = MemoryStore()
    end = await run_to_end(c, await start(c, store=store, model=model), store=store, model=model)
    assert end.state == "done"
    assert seen["def"] != loop_thread and seen["handler"] != loop_thread
    assert seen["inline"] == loop_thread and seen["async"] == loop_thread


@pytest.mark.anyio
async def test_the_thread_limit_bounds_how_many_sync_tools_run_at_once() -> None:
    """Eight blocking calls under a limit of two: never more than two at once."""
    running, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1

    set_thread_limit(2)
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(threads.call, work)
        assert most == 2 and threads.limiter().total_tokens == 2
    finally:
        set_thread_limit(threads.DEFAULT_THREADS)
    assert threads.limiter().total_tokens == threads.DEFAULT_THREADS


def test_a_thread_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        set_thread_limit(0)
