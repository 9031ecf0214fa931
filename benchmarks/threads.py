"""What running a `def` tool in a worker thread costs per transition (issue #28).

The same run (overhead.py's workload: one model state calling `lookup` 99 times, 200
transitions, on a MemoryStore) with the tool written four ways: a `def` (run in a worker
thread, the default), a `def` marked `inline=True` (on the loop), an `async def`, and
the `def` under a limit of one thread. Rounds alternate the kinds, so a loaded machine
slows them alike; the figures are medians and ratios to the inline tool, measured in one
run. Run: `python benchmarks/threads.py [--steps 200] [--rounds 15]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

import anyio
from overhead import Ctx, _Lean, make_policy

import statechart as sc

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "threads.json"


def lookup(n: int) -> str:
    """A cheap tool: echoes its argument."""
    return f"item {n}"


async def alookup(n: int) -> str:
    """The same tool, async."""
    return f"item {n}"


KINDS = {
    "def (thread)": sc.tool(retry="safe", name="lookup")(lookup),
    "def inline": sc.tool(retry="safe", name="lookup", inline=True)(lookup),
    "async def": sc.tool(retry="safe", name="lookup")(alookup),
}


def chart(tool: sc.Tool, steps: int) -> sc.Chart:
    return sc.Chart(
        "threads",
        states=(
            sc.State(
                "work", tools=(tool,), writes=("note",), max_iterations=steps, instructions="Loop."
            ),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"),),
        context=Ctx,
        budget=sc.Budget(max_steps=steps * 2),
    )


async def once(c: sc.Chart, steps: int) -> float:
    """Microseconds per transition of one run."""
    store = sc.MemoryStore(encode=False)
    model = _Lean(make_policy(steps))
    run = await sc.start(c, store=store, model=model)
    gc.collect()
    t0 = time.perf_counter()
    end = await sc.run_to_end(c, run, store=store, model=model)
    elapsed = time.perf_counter() - t0
    assert end.state == "done", end.reason
    return elapsed / end.seq * 1e6


async def measure(steps: int, rounds: int) -> dict[str, object]:
    charts = {kind: chart(t, steps) for kind, t in KINDS.items()}
    seen: dict[str, list[float]] = {kind: [] for kind in [*charts, "def, 1 thread"]}
    for _ in range(rounds):
        for kind, c in charts.items():
            seen[kind].append(await once(c, steps))
        sc.set_thread_limit(1)
        seen["def, 1 thread"].append(await once(charts["def (thread)"], steps))
        sc.set_thread_limit(16)
    base = statistics.median(seen["def inline"])
    return {
        "steps": steps,
        "rounds": rounds,
        "us_per_transition": {k: round(statistics.median(v), 1) for k, v in seen.items()},
        "ratio_to_inline": {k: round(statistics.median(v) / base, 2) for k, v in seen.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    result = anyio.run(measure, args.steps, args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
