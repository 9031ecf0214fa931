"""The workload on statechart, reusing benchmarks/durable.py's chart, policy and stores.

One "transition" is one event written: 2N + 2 for N tool calls (each call is
think -> act -> think; `next_state` is think -> act -> done). The timed span is
`start` plus `run_to_end`, the same whole-workload span as the other contenders.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import durable
from durable import _Lean, chart_for, make_policy, open_store
from side_common import remove_db

import statechart as sc


async def statechart_once(kind: str, steps: int, path: Path | None = None,
                          keep: list[Callable[[], None]] | None = None) -> tuple[float, int]:
    """Seconds for the whole workload and transitions made.

    `kind` is `memory` or `process` (SQLiteStore, durability="process", a new file).
    With `keep`, the store stays open and its closer is appended there.
    """
    if path is not None and keep is None:
        remove_db(path)
    store = open_store(kind, path or Path("unused.db"))
    chart = chart_for(steps)
    model = _Lean(make_policy(steps))
    chart.compiled  # noqa: B018  (compiled once per chart, outside the timed span)
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


async def statechart_resume(steps: int, source: Path, run_id: str,
                            workdir: Path) -> dict[str, float]:
    """durable.py's resume: open, load, load_session, events; and open to first step."""
    return await durable.resume_once(steps, source, run_id, workdir)
