"""What the JSON of one durable transition costs to encode, by encoder (issue #27).

Takes the real records of a durable run (benchmarks/durable.py's workload, 200 steps on
a MemoryStore) and times, per transition, encoding what the SQLite store writes: the
event's JSON body (`rows.Body`), the step's transcript messages and the run snapshot.
`msgspec` encodes the structs directly (what the stores do); orjson and the standard
library cannot encode a struct, so they get `msgspec.to_builtins` dicts, timed with and
without building them. Run: `python benchmarks/encoders.py` (needs the `bench` extra).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import orjson
from durable import _Lean, chart_for, make_policy

import statechart as sc
from statechart.store.rows import Body

ROUNDS = 15


async def records(steps: int) -> list[sc.Step]:
    store = sc.MemoryStore(encode=False)
    chart = chart_for(steps)
    model = _Lean(make_policy(steps))
    run = await sc.start(chart, store=store, model=model)
    return [s async for s in sc.drive(chart, run, store=store, model=model)]


def per_transition(work: Callable[[], Any], n: int) -> float:
    """Median µs per transition of `work()` over ROUNDS rounds."""
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        work()
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


def body(e: sc.Event) -> Body:
    return Body(call=e.call, calls=e.calls, result=e.result, patch=e.patch, delta=e.delta,
                entered=e.entered, exited=e.exited)  # fmt: skip


def main() -> None:
    steps = anyio.run(records, 200)
    n = len(steps)
    parts = [(body(s.event), s.messages, s.run) for s in steps]
    plain = [tuple(msgspec.to_builtins(p) for p in ps) for ps in parts]
    enc = msgspec.json.Encoder()
    figures = {
        "msgspec encode of the structs (what the stores do)": per_transition(
            lambda: [tuple(enc.encode(p) for p in ps) for ps in parts], n
        ),
        "msgspec.to_builtins + orjson.dumps": per_transition(
            lambda: [tuple(orjson.dumps(msgspec.to_builtins(p)) for p in ps) for ps in parts], n
        ),
        "orjson.dumps of prebuilt dicts": per_transition(
            lambda: [tuple(orjson.dumps(p) for p in ps) for ps in plain], n
        ),
        "json.dumps of prebuilt dicts": per_transition(
            lambda: [tuple(json.dumps(p) for p in ps) for ps in plain], n
        ),
    }
    size = statistics.mean(sum(len(enc.encode(p)) for p in ps) for ps in parts)
    print(f"{n} transitions; body + messages + snapshot {size:.0f} bytes of JSON on average")
    for name, us in figures.items():
        print(f"{us:8.2f} µs  {name}")


if __name__ == "__main__":
    main()
