"""Mining speed: 100,000 recorded steps read, mined, proposed from and compared.

A standalone script (never a test). It writes seeded synthetic traces of the
seed-003 loop (about 6.2 steps a run) to a JSONL file and times, `--repeats`
times each: reading the file, `mine()` by label, `mine()` by tool, `propose()`,
shadow-replaying every run against the proposal, and `drift()` between two such
sets. The target of issue #7: reading plus mining 100,000 steps in under 2 s.

    python benchmarks/mining.py            # 100,000 steps, 5 repeats
    python benchmarks/mining.py --quick    # 10,000 steps, 2 repeats
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statechart.mining import drift, mine, read_jsonl, replay_all, synthetic_traces, write_jsonl
from statechart.mining.propose import propose

TARGET_S = 2.0
STEPS_PER_RUN = 6.2


def timed(fn: Callable[[], Any], repeats: int) -> tuple[dict[str, float], Any]:
    """Median and spread of `repeats` calls, in seconds, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    steps = args.steps or (10_000 if args.quick else 100_000)
    repeats = args.repeats or (2 if args.quick else 5)
    runs = round(steps / STEPS_PER_RUN)
    scale = runs / 1200
    sets = [
        synthetic_traces(
            runs,
            seed=seed,
            repeated=round(14 * scale),
            unreviewed=round(9 * scale),
            early_drafts=round(3 * scale),
            redraft=0.05 if seed == 0 else 0.2,
        )
        for seed in (0, 1)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.jsonl"
        write_jsonl(sets[0].traces, path)
        size = path.stat().st_size
        read, traces = timed(lambda: read_jsonl(path), repeats)
        total_steps = sum(len(t.calls) for t in traces)
        by_label, mined = timed(lambda: mine(traces), repeats)
        by_tool, _ = timed(lambda: mine(traces, by="tool"), repeats)
        both, _ = timed(lambda: mine(read_jsonl(path)), repeats)
        proposing, draft = timed(lambda: propose(traces), repeats)
    namespace: dict[str, Any] = {}
    exec(compile(draft.source, "draft.py", "exec"), namespace)
    shadowing, refused = timed(lambda: replay_all(namespace["chart"], list(traces)), 1)
    drifting, found = timed(lambda: drift(sets[0].traces, sets[1].traces), repeats)
    report = {
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_1m": os.getloadavg()[0],
        },
        "steps": total_steps,
        "runs": len(traces),
        "jsonl_bytes": size,
        "repeats": repeats,
        "seconds": {
            "read_jsonl": read,
            "mine_label": by_label,
            "mine_tool": by_tool,
            "read_and_mine": both,
            "propose": proposing,
            "shadow_replay_all": shadowing,
            "drift_two_sets": drifting,
        },
        "us_per_step": {
            "read_and_mine": both["median"] / total_steps * 1e6,
            "shadow_replay_all": shadowing["median"] / total_steps * 1e6,
        },
        "found": {
            "rare_edges": len(mined.rare),
            "repeats": len(mined.repeats),
            "shadow_flagged": sum(1 for v in refused.values() if v),
            "drift_flagged": [(e.source, e.target) for e in found.flagged],
        },
        "target": {"read_and_mine_s": TARGET_S, "met": both["median"] < TARGET_S},
    }
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "mining.json").write_text(json.dumps(report, indent=2))
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
