"""The workload on statechart, reusing benchmarks/durable.py's chart, policy and stores.

One "transition" is one event written: 2N + 2 for N tool calls (each call is
think -> act -> think; `next_state` is think -> act -> done). The timed span is
`start` plus `run_to_end`, the same whole-workload span as the other contenders.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import cast

import durable
from durable import _Lean, chart_for, make_chart, make_policy, open_store
from side_common import remove_db

import statechart as sc
from statechart.engine import compiled


async def statechart_once(
    kind: str, steps: int, path: Path | None = None, keep: list[Callable[[], None]] | None = None
) -> tuple[float, int]:
    """Seconds for the whole workload and transitions made.

    `kind` is `memory` or `process` (SQLiteStore, durability="process", a new file).
    With `keep`, the store stays open and its closer is appended there.
    """
    if path is not None and keep is None:
        remove_db(path)
    store = open_store(kind, path or Path("unused.db"))
    chart = chart_for(steps)
    model = _Lean(make_policy(steps))
    compiled(chart)  # (compiled once per chart, outside the timed span)
    t0 = time.perf_counter()
    run = await sc.start(chart, store=store, model=model)
    end = await sc.run_to_end(chart, run, store=store, model=model)
    elapsed = time.perf_counter() - t0
    if keep is not None and isinstance(store, sc.SQLiteStore):
        keep.append(store.close)
    elif isinstance(store, sc.SQLiteStore):
        store.close()
    if path is not None and keep is None:
        remove_db(path)
    if end.state != "done" or end.seq != steps:
        raise SystemExit(f"statechart {kind} ended in {end.state!r} after {end.seq} steps")
    return elapsed, end.seq


async def statechart_stopped(steps: int, path: Path) -> str:
    """A durable run of a longer chart stopped after `steps` transitions (durable.py's)."""
    remove_db(path)
    return await durable.stopped_run(steps, path)


async def statechart_resume(
    steps: int, source: Path, run_id: str, workdir: Path
) -> dict[str, float]:
    """Milliseconds of two passes, each on a fresh copy of the stopped run's file.

    Pass 1: open the store, build and compile the chart (a new `Chart`, so its compiled
    machine is not cached), then read the run's state: `load` + `load_session`.
    Pass 2: from nothing to the first new step: open, build + compile, `drive(...,
    resuming=True)` (which loads the run and its session itself) to its first step.
    """
    clock = time.perf_counter
    path = workdir / "resume-statechart.db"
    remove_db(path)
    shutil.copyfile(source, path)
    t0 = clock()
    store = sc.SQLiteStore(path)
    t1 = clock()
    compiled(make_chart(2 * steps))
    t2 = clock()
    run = (await store.load(run_id)).snapshot
    t3 = clock()
    await sc.load_session(store, run)
    t4 = clock()
    events = await store.events(run_id)
    store.close()
    if len(events) != steps:
        raise SystemExit(f"stopped run has {len(events)} events, not {steps}")
    remove_db(path)
    shutil.copyfile(source, path)
    model = _Lean(make_policy(2 * steps, first=steps // 2 + 1))
    t5 = clock()
    store = sc.SQLiteStore(path)
    chart = make_chart(2 * steps)
    resumed = sc.drive(chart, run_id, store=store, model=model, resuming=True)
    async with contextlib.aclosing(cast(AsyncGenerator[sc.Step, None], resumed)) as records:
        async for _ in records:
            break
    t6 = clock()
    store.close()
    remove_db(path)
    return {
        "open_ms": (t1 - t0) * 1e3,
        "build_ms": (t2 - t1) * 1e3,
        "load_ms": (t3 - t2) * 1e3,
        "load_session_ms": (t4 - t3) * 1e3,
        "state_ms": (t4 - t2) * 1e3,
        "first_step_ms": (t6 - t5) * 1e3,
    }
