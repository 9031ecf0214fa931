"""Side by side: statechart, a plain `while` loop, and LangGraph, on the same workload.

One entry point for issue #6. The workload (see side_common.py): a model that
calls a ~500-character tool N times with distinct arguments, then finishes,
with a scripted model, so only framework cost is measured. Figures, each as a
ratio against the others measured in the same run, contenders interleaved
round by round, median (min to max) over the repeats:

1. in memory: µs per transition and per workload (run_all_figures.memory_figure);
2. durable: µs per transition (statechart `process`, LangGraph + SqliteSaver
   `durability="sync"`, the plain loop with one SQLite row per step);
3. bytes written per transition (fresh child process per sample);
4. resume latency of a run stopped at 2,000 steps (open, build, read the state, and
   to the first new step, each contender's graph or chart built inside the span);
5. 10,000 concurrent runs of 10 model calls with 20 ms model latency, the same count
   for every contender (statechart on MemoryStore and SQLiteStore, plain, LangGraph);
6. tracing off vs on (benchmarks/tracing.py's children).

    python benchmarks/run_all.py            # full, about 30 minutes
    python benchmarks/run_all.py --quick    # smoke run, about 2 minutes; no target judged

--quick measures smaller sizes and 500 concurrent runs per contender: its target rows
say "not judged (quick)".

Writes benchmarks/results/run_all.json and prints the markdown tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from durable import filesystem
from run_all_figures import (
    concurrency_figure,
    durable_figure,
    memory_figure,
    progress,
    resume_figure,
    tracing_figure,
)
from run_all_report import markdown, targets
from side_common import HERE, machine, versions

DEFAULT_OUT = HERE / "results" / "run_all.json"
FULL: dict[str, Any] = {
    "memory_sizes": [20, 200, 2000],
    "memory_repeats": 5,
    "durable_sizes": [20, 200, 2000],
    "durable_repeats": 5,
    "durable_repeats_2000": 3,
    "bytes_repeats": 2,
    "resume_at": 2000,
    "resume_repeats": 5,
    "concurrent_runs": 10000,
    "concurrent_repeats": 3,
    "latency_s": 0.02,
    "tracing_steps": 1000,
    "tracing_rounds": 5,
    "tracing_repeats": 3,
}
QUICK: dict[str, Any] = {
    "memory_sizes": [20, 200],
    "memory_repeats": 3,
    "durable_sizes": [20, 200],
    "durable_repeats": 3,
    "durable_repeats_2000": 1,
    "bytes_repeats": 1,
    "resume_at": 200,
    "resume_repeats": 3,
    "concurrent_runs": 500,
    "concurrent_repeats": 1,
    "latency_s": 0.02,
    "tracing_steps": 1000,
    "tracing_rounds": 2,
    "tracing_repeats": 1,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON result")
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        choices=["memory", "durable", "resume", "concurrency", "tracing"],
        help="run only these figures",
    )
    args = parser.parse_args(argv)
    settings = dict(QUICK if args.quick else FULL)
    only = set(args.only or ["memory", "durable", "resume", "concurrency", "tracing"])
    command = (
        "python benchmarks/run_all.py"
        + (" --quick" if args.quick else "")
        + (f" --only {' '.join(args.only)}" if args.only else "")
    )
    workdir = Path(tempfile.mkdtemp(prefix="statechart-side-", dir=args.dir))
    t0 = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "side by side: statechart, a plain loop, LangGraph",
        "command": command,
        "quick": args.quick,
        "machine_before": machine(),
        "versions": versions(),
        "settings": settings,
        "workdir_filesystem": filesystem(workdir),
        "note": "contenders interleaved round by round on a possibly shared machine: "
        "compare the ratios of the same run, not absolute µs between runs",
    }
    try:
        if "memory" in only:
            result["memory"] = memory_figure(settings)
        if "durable" in only:
            result["durable"] = durable_figure(settings, workdir)
        if "resume" in only:
            result["resume"] = resume_figure(settings, workdir)
        if "concurrency" in only:
            result["concurrency"] = concurrency_figure(settings, workdir)
        if "tracing" in only:
            result["tracing"] = tracing_figure(settings)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["machine_after"] = machine()
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["targets"] = targets(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    progress(f"done in {result['wall_s']} s")
    print(markdown(result))
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
