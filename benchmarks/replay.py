"""How fast recorded runs replay against a chart (issue #31): N runs of 20 steps recorded
in a SQLite file, then all of them replayed (`statechart.replay`), no model or tool called.

The target: 10,000 runs of 20 steps replayed in 60 s or less on this machine. The
recording is timed too, side by side, as the ratio replay / record (both drive the same
steps through the same driver; the replay adds reading the record and comparing each step).
Run: `python benchmarks/replay.py [--runs 10000]`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

import statechart as sc

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "replay.json"
CALLS = 9
"""Tool calls per run: each is a model step and a tool step; with `next_state`'s two
steps, a run is 20 steps."""


class Ctx(BaseModel):
    topic: str = ""
    note: str | None = None


@sc.tool(retry="safe", name="lookup", repeatable=True)
def lookup(topic: str, n: int) -> str:
    """Look a topic up."""
    return f"{topic} #{n}"


CHART = sc.Chart(
    "bench_replay",
    context=Ctx,
    budget=sc.Budget(max_steps=40),
    states=(
        sc.State(
            "work",
            tools=(lookup,),
            reads=("topic",),
            writes=("note",),
            max_iterations=CALLS + 2,
            instructions="Look it up nine times.",
        ),
        sc.State("done", kind="terminal"),
    ),
    edges=(sc.Edge("work", "done"),),
)


def decide(request: sc.Request) -> sc.Reply:
    made = sum(1 for m in request.transcript if m.role == "tool")
    if made < CALLS:
        return sc.reply(sc.call("lookup", topic=request.context["topic"], n=made))
    return sc.reply(sc.call("next_state", target="done", note="ok"))


async def record(store: sc.Store, runs: int) -> float:
    """Record `runs` runs; seconds taken."""
    model = sc.FunctionModel(decide, spec="bench")
    t0 = time.perf_counter()
    for i in range(runs):
        run = await sc.start(CHART, store=store, model=model, context={"topic": f"t{i}"})
        end = await sc.run_to_end(CHART, run, store=store, model=model)
        assert end.seq == 2 * CALLS + 2 and end.state == "done"
        model.requests.clear()
    return time.perf_counter() - t0


async def measure(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = sc.SQLiteStore(Path(tmp) / "runs.db")
        recorded = await record(store, runs)
        tracemalloc.start()
        t0 = time.perf_counter()
        report = await sc.replay(CHART, store=store)
        replayed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        store.close()
    assert report.counts() == {"agree": runs}, report.counts()
    steps = runs * (2 * CALLS + 2)
    # tracemalloc slows the replay it watches; the time is measured again without it
    with tempfile.TemporaryDirectory() as tmp:
        store = sc.SQLiteStore(Path(tmp) / "runs.db")
        await record(store, runs)
        t0 = time.perf_counter()
        await sc.replay(CHART, store=store)
        replayed = time.perf_counter() - t0
        store.close()
    return {
        "runs": runs,
        "steps_per_run": 2 * CALLS + 2,
        "record_seconds": round(recorded, 2),
        "replay_seconds": round(replayed, 2),
        "replay_us_per_step": round(replayed / steps * 1e6, 1),
        "ratio_replay_to_record": round(replayed / recorded, 2),
        "seconds_for_10000_runs": round(replayed / runs * 10_000, 1),
        "target_seconds_for_10000_runs": 60,
        "peak_traced_mib": round(peak / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    result = anyio.run(measure, args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
