"""Single-run µs per transition of one checkout, to compare two trees side by side.

A standalone script (never collected as a test). It imports statechart and the durable
workload (`durable.py`) from the checkout it is given and times whole runs through the
public API (`start` + `run_to_end`), one after another: 20 and 200 steps, on
`MemoryStore()` and on `SQLiteStore` in a new file; the median of `--runs` runs after 10
warm-up runs; with `--postgres DSN`, on `PostgresStore` too (give it a database of its own:
the runs stay there). Run it on two checkouts in turn, a few times, and compare within the
sitting:

    git worktree add /tmp/before <commit>
    for i in 1 2; do
        python benchmarks/trees.py /tmp/before; python benchmarks/trees.py .
    done
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="the checkout to time")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per figure")
    parser.add_argument("--postgres", metavar="DSN", help="also time PostgresStore there")
    args = parser.parse_args()
    tree = args.tree.resolve()
    sys.path[:0] = [str(tree / "benchmarks"), str(tree)]
    from durable import _Lean, chart_for, make_policy

    import statechart as sc

    if not Path(sc.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"statechart came from {sc.__file__}, not from {tree}")

    async def one(store: Any, steps: int) -> float:
        chart = chart_for(steps)
        model = _Lean(make_policy(steps))
        t0 = time.perf_counter()
        run = await sc.start(chart, store=store, model=model)
        end = await sc.run_to_end(chart, run, store=store, model=model)
        return (time.perf_counter() - t0) / end.seq * 1e6

    async def run_all() -> dict[str, float]:
        out = {}
        kinds = ("memory", "sqlite", "postgres") if args.postgres else ("memory", "sqlite")
        with tempfile.TemporaryDirectory() as tmp:
            for steps in (20, 200):
                for kind in kinds:
                    store: Any
                    if kind == "memory":
                        store = sc.MemoryStore()
                    elif kind == "sqlite":
                        store = sc.SQLiteStore(Path(tmp) / f"{steps}.db")
                    else:
                        from statechart.store.postgres import PostgresStore

                        store = PostgresStore(args.postgres)
                    for _ in range(10):
                        await one(store, steps)
                    times = [await one(store, steps) for _ in range(args.runs)]
                    out[f"{kind} {steps}"] = round(statistics.median(times), 1)
                    if kind == "postgres":
                        await store.close()
        return out

    print(tree, anyio.run(run_all))


if __name__ == "__main__":
    main()
