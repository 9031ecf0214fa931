"""What a parallel state costs per transition (issue #30): 3 regions x 50 tool calls
against the same 150 calls made by one model state, measured side by side.

Both charts make the same calls (an inline `lookup` echo, an instant scripted model): the
sequential one in one state; the parallel one in three regions of one parallel state,
driven concurrently (one task per region, each step planned, folded back and stored under
one lock). Rounds alternate the two, on a MemoryStore (the framework alone) and on a
SQLite file (durable); figures are medians and the ratio parallel / sequential of the
cost per transition, measured in one run. Run:
`python benchmarks/regions.py [--calls 50] [--rounds 9]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

import statechart as sc

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "regions.json"
REGIONS = ("a", "b", "c")


class Ctx(BaseModel):
    note: str | None = None


@sc.tool(retry="safe", name="lookup", inline=True, repeatable=True)
def lookup(n: int) -> str:
    """A cheap tool: echoes its argument."""
    return f"item {n}"


def worker(name: str, calls: int) -> sc.Chart:
    return sc.Chart(
        name,
        context=Ctx,
        states=(
            sc.State(
                "work",
                tools=(lookup,),
                writes=("note",),
                max_iterations=calls + 2,
                instructions="Loop.",
            ),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"),),
    )


def sequential(calls: int) -> sc.Chart:
    inner = worker("seq", calls * len(REGIONS))
    return sc.Chart(
        "sequential",
        context=Ctx,
        states=inner.states,
        edges=inner.edges,
        budget=sc.Budget(max_steps=calls * 10),
    )


def parallel(calls: int) -> sc.Chart:
    regions = tuple(
        sc.State(r, kind="chart", chart=lambda r=r: worker(r, calls), input={}, output={})
        for r in REGIONS
    )
    return sc.Chart(
        "parallel",
        context=Ctx,
        states=(
            sc.State("gather", kind="parallel", regions=regions, exits={"done": "done"}),
            sc.State("done", kind="terminal"),
        ),
        budget=sc.Budget(max_steps=calls * 10),
    )


def policy(calls: int) -> sc.FunctionModel:
    """Each visit calls `lookup` `calls` times, then leaves for `done`."""

    def decide(request: sc.Request) -> sc.Reply:
        made = sum(1 for m in request.transcript if m.role == "tool")
        if made < calls:
            return sc.reply(sc.call("lookup", n=made))
        return sc.reply(sc.call("next_state", target="done", note="ok"))

    return _Lean(decide, spec="bench")


class _Lean(sc.FunctionModel):
    """A FunctionModel that does not keep every request (that list is not framework cost)."""

    async def complete(self, request: sc.Request) -> sc.Reply:
        out = await super().complete(request)
        self.requests.clear()
        return out


async def once(chart: sc.Chart, calls: int, store: sc.Store) -> tuple[float, int]:
    """Microseconds per transition of one run, and its transitions."""
    model = policy(calls)
    run = await sc.start(chart, store=store, model=model)
    gc.collect()
    t0 = time.perf_counter()
    end = await sc.run_to_end(chart, run, store=store, model=model)
    elapsed = time.perf_counter() - t0
    assert end.state == "done", end.reason
    return elapsed / end.seq * 1e6, end.seq


async def measure(calls: int, rounds: int) -> dict[str, Any]:
    charts = {
        "sequential": (sequential(calls), calls * len(REGIONS)),
        "parallel": (parallel(calls), calls),
    }
    seen: dict[str, list[float]] = {}
    transitions: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for kind, (chart, per_visit) in charts.items():
                for where in ("memory", "sqlite"):
                    store: sc.Store = (
                        sc.MemoryStore(encode=False)
                        if where == "memory"
                        else sc.SQLiteStore(Path(tmp) / f"{kind}-{i}.db")
                    )
                    us, n = await once(chart, per_visit, store)
                    seen.setdefault(f"{kind} {where}", []).append(us)
                    transitions[kind] = n
                    if isinstance(store, sc.SQLiteStore):
                        store.close()
    median = {k: round(statistics.median(v), 1) for k, v in seen.items()}
    return {
        "calls_per_region": calls,
        "regions": len(REGIONS),
        "rounds": rounds,
        "transitions": transitions,
        "us_per_transition": median,
        "ratio_parallel_to_sequential": {
            where: round(median[f"parallel {where}"] / median[f"sequential {where}"], 2)
            for where in ("memory", "sqlite")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    result = anyio.run(measure, args.calls, args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
