"""How much the JSON of one durable transition costs to encode, by encoder (toward #16).

Takes the real records of a durable run (benchmarks/durable.py's workload, 200 steps on
a MemoryStore) and times, per transition, encoding what the SQLite store writes: the
event's JSON body (`rows.event_row`) and the run snapshot, with pydantic (today),
the standard library, orjson and msgspec (each from the same `model_dump()` dicts, so
only the encoder differs; building the dicts is timed apart). Run:
`python benchmarks/encoders.py` (needs the `bench` extra: orjson, msgspec).
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
from statechart.store.rows import BODY

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


def main() -> None:
    steps = anyio.run(records, 200)
    events = [s.event for s in steps]
    runs = [s.run for s in steps]
    n = len(steps)
    bodies = [e.model_dump(mode="json", include=BODY, exclude_defaults=True) for e in events]
    snaps = [r.model_dump(mode="json", exclude_defaults=True) for r in runs]
    enc = msgspec.json.Encoder()
    figures = {
        "pydantic model_dump_json (today: body + snapshot)": per_transition(
            lambda: [
                (e.model_dump_json(include=BODY, exclude_defaults=True), r.model_dump_json())
                for e, r in zip(events, runs, strict=True)
            ],
            n,
        ),
        "model_dump(mode=json) dicts only (body + snapshot)": per_transition(
            lambda: [
                (
                    e.model_dump(mode="json", include=BODY, exclude_defaults=True),
                    r.model_dump(mode="json", exclude_defaults=True),
                )
                for e, r in zip(events, runs, strict=True)
            ],
            n,
        ),
        "json.dumps of the dicts": per_transition(
            lambda: [(json.dumps(b), json.dumps(s)) for b, s in zip(bodies, snaps, strict=True)],
            n,
        ),
        "orjson.dumps of the dicts": per_transition(
            lambda: [
                (orjson.dumps(b), orjson.dumps(s)) for b, s in zip(bodies, snaps, strict=True)
            ],
            n,
        ),
        "msgspec encode of the dicts": per_transition(
            lambda: [(enc.encode(b), enc.encode(s)) for b, s in zip(bodies, snaps, strict=True)], n
        ),
    }
    size = statistics.mean(
        len(orjson.dumps(b)) + len(orjson.dumps(s)) for b, s in zip(bodies, snaps, strict=True)
    )
    print(f"{n} transitions; body + snapshot {size:.0f} bytes of JSON a transition on average")
    for name, us in figures.items():
        print(f"{us:8.2f} µs  {name}")


if __name__ == "__main__":
    main()
