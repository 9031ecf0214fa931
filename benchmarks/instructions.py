"""Instructions per transition, counted by `valgrind --tool=callgrind` (repeatable under load).

A standalone script (never collected as a test). For each store it runs the durable
workload of `durable.py` through the public API (`start` + `run_to_end`) in two fresh
processes under callgrind, one of 20 transitions (9 tool calls) and one of 200 (99 tool
calls), and reports (I(200) - I(20)) / 180 (the plain loop's runs make 19 and 199):
imports, start-up and chart compilation
cancel out, what is left is the cost of a transition. Stores: `memory` (the default
`MemoryStore()`, JSON rows), `memory_raw` (`MemoryStore(encode=False)`) and `process`
(`SQLiteStore`, `durability="process"`, a new file); and, for the ratios, the plain
`while` loop of `side_plain.py` on the same workload, in memory (`plain`) and writing one
JSON row per step in its own transaction (`plain_durable`).

    python benchmarks/instructions.py                     # every store, about 5 minutes
    python benchmarks/instructions.py --stores memory     # one store
    python benchmarks/instructions.py --one memory 200    # one counted run (what valgrind runs)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

STORES = ("memory", "memory_raw", "process", "plain", "plain_durable")
SIZES = (20, 200)


def one(kind: str, steps: int) -> None:
    """The counted run: one workload of `steps` transitions on `kind`."""
    import anyio
    from durable import _Lean, chart_for, make_policy
    from side_plain import plain_once

    import statechart as sc

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            if kind.startswith("plain"):
                durable = Path(tmp) / "plain.db" if kind == "plain_durable" else None
                _, made = await plain_once(steps, durable)
                print(made)
                return
            if kind == "process":
                store: sc.Store = sc.SQLiteStore(Path(tmp) / "runs.db")
            else:
                store = sc.MemoryStore(encode=kind == "memory")
            chart = chart_for(steps)
            model = _Lean(make_policy(steps))
            run = await sc.start(chart, store=store, model=model)
            end = await sc.run_to_end(chart, run, store=store, model=model)
            if isinstance(store, sc.SQLiteStore):
                store.close()
            assert end.state == "done" and end.seq == steps, end
            print(end.seq)

    anyio.run(main)


def callgrind(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Instructions of one process running `command` under callgrind, and its stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        found = re.search(r"^summary:\s*(\d+)", out.read_text(), re.MULTILINE)
        assert found is not None, "callgrind wrote no summary"
        return int(found.group(1)), done.stdout


def counted(kind: str, steps: int) -> tuple[int, int]:
    """Instructions of one process running `one(kind, steps)` under callgrind, and the
    transitions it made."""
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": f"{here.parent}{os.pathsep}{here}", "PYTHONHASHSEED": "0"}
    command = [sys.executable, str(Path(__file__).resolve()), "--one", kind, str(steps)]
    instructions, stdout = callgrind(command, env)
    return instructions, int(stdout.split()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--one", nargs=2, metavar=("STORE", "STEPS"))
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.one:
        one(args.one[0], int(args.one[1]))
        return
    small, large = SIZES
    result = {}
    for kind in args.stores:
        (a, n), (b, m) = counted(kind, small), counted(kind, large)
        result[kind] = {"I(small)": a, "I(large)": b, "transitions": [n, m]}
        result[kind]["per_transition"] = round((b - a) / (m - n))
        print(f"{kind}: {result[kind]['per_transition']:,} instructions per transition", flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
