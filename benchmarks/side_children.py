"""Fresh-process measurements of the side-by-side benchmark (run by run_all.py).

Each child prints one JSON object, so its `/proc/self/io` counters and peak RSS
belong to that measurement alone:

    side_children.py durable KIND STEPS WORKDIR       # one durable run: µs and bytes
    side_children.py concurrent KIND RUNS LATENCY WORKDIR   # many runs in one event loop
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from durable import _Lean, chart_for, checkpoint, file_bytes, make_policy, proc_io
from side_common import remove_db, reset_peak_rss, status_kib

import statechart as sc

DURABLE_KINDS = ("statechart", "langgraph", "plain")
CONCURRENT_KINDS = ("statechart_memory", "statechart_process", "plain", "langgraph")
RUN_STEPS = 20
"""Statechart transitions per concurrent run: 9 tool calls and the finish, 10 model calls."""


# -- one durable run ----------------------------------------------------------------------


def durable_run(
    kind: str, steps: int, path: Path, keep: list[Callable[[], None]] | None = None
) -> tuple[float, int]:
    """One durable workload in a new file: seconds and steps made (open handles to `keep`)."""
    if kind == "statechart":
        from side_statechart import statechart_once

        return anyio.run(statechart_once, "process", steps, path, keep)
    if kind == "langgraph":
        from side_langgraph import langgraph_once

        return langgraph_once("graph_sqlite", steps, path, keep)
    from side_plain import plain_once

    return anyio.run(plain_once, steps, path, keep)


def durable_child(kind: str, steps: int, workdir: Path) -> dict[str, Any]:
    """Warm up on a run in another file, then time one run and count its bytes.

    `run`: the counters over the run; `total`: plus a full TRUNCATE checkpoint
    and `os.sync()`. Files: main + `-wal` growth over the run, and the main
    file's growth once checkpointed (the data). The schema exists before `0`.
    """
    warm = min(steps, 200) if kind == "langgraph" else steps  # its graph has no size
    durable_run(kind, warm, workdir / f"warm-{kind}.db")
    remove_db(workdir / f"warm-{kind}.db")
    path = workdir / f"{kind}-{steps}.db"
    remove_db(path)
    if kind == "statechart":  # the schema first, as the others do before their run
        sc.SQLiteStore(path).close()
    elif kind == "plain":
        from side_plain import Rows

        Rows(path).close()
    else:
        from side_langgraph import sqlite_saver

        sqlite_saver(path).conn.close()
    os.sync()
    main0, files0, io0 = path.stat().st_size, file_bytes(path), proc_io()
    gc.collect()
    closers: list[Callable[[], None]] = []
    secs, n = durable_run(kind, steps, path, closers)
    io1, files1 = proc_io(), file_bytes(path)
    checkpoint(path, "TRUNCATE")
    main2 = path.stat().st_size
    os.sync()
    io2 = proc_io()
    for closer in closers:
        closer()
    remove_db(path)
    per = (
        {
            "wchar_run": (io1["wchar"] - io0["wchar"]) / n,
            "write_bytes_run": (io1["write_bytes"] - io0["write_bytes"]) / n,
            "wchar_total": (io2["wchar"] - io0["wchar"]) / n,
            "write_bytes_total": (io2["write_bytes"] - io0["write_bytes"]) / n,
            "files_growth": (files1 - files0) / n,
            "main_after_checkpoint": (main2 - main0) / n,
        }
        if io0
        else {}
    )
    return {"kind": kind, "steps": n, "seconds": secs, "us": secs / n * 1e6, "bytes_per_step": per}


# -- many runs in one event loop ----------------------------------------------------------


def runner(
    kind: str, latency: float, workdir: Path
) -> tuple[Callable[[int], Awaitable[int]], Callable[[], None]]:
    """`one(i)`: run i start to end, returning its steps; and a closer."""
    if kind.startswith("statechart"):
        chart = chart_for(RUN_STEPS)
        path = workdir / "concurrent.db"
        remove_db(path)
        store = sc.MemoryStore() if kind == "statechart_memory" else sc.SQLiteStore(path)

        async def one_sc(i: int) -> int:
            model = _Lean(make_policy(RUN_STEPS, latency=latency))
            run = await sc.start(chart, store=store, model=model)
            end = await sc.run_to_end(chart, run, store=store, model=model)
            return end.seq if end.state == "done" else -1

        def close_sc() -> None:
            if isinstance(store, sc.SQLiteStore):
                store.close()
            remove_db(path)

        return one_sc, close_sc
    if kind == "plain":
        from side_plain import PlainModel, plain_loop, start_messages

        async def one_plain(i: int) -> int:
            return await plain_loop(
                PlainModel(RUN_STEPS // 2 - 1, latency=latency), start_messages()
            )

        return one_plain, lambda: None
    from side_langgraph import ScriptedChat, config, hand_written, inputs, node_runs

    graph = hand_written(ScriptedChat(latency=latency), asynchronous=True)

    async def one_lg(i: int) -> int:
        return node_runs(await graph.ainvoke(inputs(RUN_STEPS), config(RUN_STEPS, f"t{i}")))

    return one_lg, lambda: None


async def sequential(one: Callable[[int], Awaitable[int]], count: int) -> float:
    """µs per step of single runs one after another (no latency): the ideal's cost."""
    out = []
    for i in range(count):
        t0 = time.perf_counter()
        n = await one(i)
        out.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(out)


async def together(kind: str, one: Callable[[int], Awaitable[int]], runs: int) -> list[int]:
    """Every run at once: an anyio task group (statechart, plain) or asyncio.gather."""
    if kind == "langgraph":
        return list(await asyncio.gather(*(one(i) for i in range(runs))))
    found: list[int] = []

    async def keep(i: int) -> None:
        found.append(await one(i))

    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(keep, i)
    return found


async def concurrent_child(kind: str, runs: int, latency: float, workdir: Path) -> dict[str, Any]:
    """Single-run µs (same process), then `runs` runs at once: wall time and peak RSS."""
    single_one, close = runner(kind, 0.0, workdir)
    await sequential(single_one, 20)  # warm-up
    single_us = await sequential(single_one, 50)
    close()
    one, close = runner(kind, latency, workdir)
    gc.collect()
    rss0 = status_kib("VmRSS")
    reset = reset_peak_rss()
    t0 = time.perf_counter()
    steps = await together(kind, one, runs)
    wall = time.perf_counter() - t0
    peak = status_kib("VmHWM")
    rss1 = status_kib("VmRSS")
    close()
    if len(steps) != runs or min(steps) < 0:
        raise SystemExit(f"{kind}: not every concurrent run finished")
    total = sum(steps)
    model_calls = RUN_STEPS // 2
    ideal = max(model_calls * latency, total * single_us / 1e6)
    return {
        "kind": kind,
        "runs": runs,
        "latency_s": latency,
        "steps_per_run": total / runs,
        "wall_s": wall,
        "single_us_per_step": single_us,
        "ideal_s": ideal,
        "wall_to_ideal": wall / ideal,
        "rss_before_kib": rss0,
        "peak_rss_kib": peak,
        "rss_after_kib": rss1,
        "peak_reset": reset,
        "peak_kib_per_run": (peak - rss0) / runs,
    }


def main(argv: list[str]) -> None:
    what = argv[0]
    if what == "durable":
        out = durable_child(argv[1], int(argv[2]), Path(argv[3]))
    elif what == "concurrent":
        out = asyncio.run(concurrent_child(argv[1], int(argv[2]), float(argv[3]), Path(argv[4])))
    else:
        raise SystemExit(f"unknown child {what!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
