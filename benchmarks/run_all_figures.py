"""The six figures of run_all.py: each measures its contenders interleaved, round by round."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from durable import filesystem, proc_io
from side_common import HERE, ROOT, remove_db, spread
from side_langgraph import langgraph_once, langgraph_resume, langgraph_stopped
from side_plain import plain_once, plain_resume, plain_stopped
from side_statechart import statechart_once, statechart_resume, statechart_stopped

Sample = Callable[[int], tuple[float, int]]
"""Runs the workload of `steps`; (seconds, steps made)."""
MEMORY: dict[str, Sample] = {
    "statechart": lambda steps: anyio.run(statechart_once, "memory", steps),
    "plain": lambda steps: anyio.run(plain_once, steps),
    "langgraph_graph": lambda steps: langgraph_once("graph", steps),
    "langgraph_graph_inmemory": lambda steps: langgraph_once("graph_inmemory", steps),
    "langgraph_react": lambda steps: langgraph_once("react", steps),
}
DURABLE = ("statechart", "langgraph", "plain")
CONCURRENT = ("statechart_memory", "statechart_process", "plain", "langgraph")
_T0 = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)


def rotated(names: tuple[str, ...] | list[str], i: int) -> list[str]:
    k = i % len(names)
    return [*names[k:], *names[:k]]


def ratios(rounds: dict[str, list[float]], base: str) -> dict[str, Any]:
    """Per-round `other / base` for every other contender (paired, so noise cancels)."""
    return {
        f"{k}_to_{base}": spread([a / b for a, b in zip(v, rounds[base], strict=True)], 4)
        for k, v in rounds.items()
        if k != base
    }


Rounds = tuple[dict[str, list[float]], dict[str, list[float]], dict[str, int]]
"""µs per transition and ms per workload of every round, by contender; steps made."""


def timed_rounds(samples: dict[str, Sample], steps: int, repeats: int, label: str) -> Rounds:
    """Warm every contender up, then time `repeats` rounds, rotating who goes first."""
    for name, sample in samples.items():  # warm-up (a LangGraph graph has no size)
        sample(min(steps, 200) if name.startswith("langgraph") else steps)
    us: dict[str, list[float]] = {k: [] for k in samples}
    ms: dict[str, list[float]] = {k: [] for k in samples}
    made: dict[str, int] = {}
    for i in range(repeats):
        for name in rotated(list(samples), i):
            secs, n = samples[name](steps)
            us[name].append(secs / n * 1e6)
            ms[name].append(secs * 1e3)
            made[name] = n
        progress(
            f"{label} {steps} steps, round {i + 1}: "
            + ", ".join(f"{k} {v[-1]:.1f}" for k, v in us.items())
            + " µs/step"
        )
    return us, ms, made


def memory_figure(settings: dict[str, Any]) -> dict[str, Any]:
    """Figure 1: µs per transition and ms per workload, in memory, at each size."""
    out: dict[str, Any] = {}
    for steps in settings["memory_sizes"]:
        us, ms, made = timed_rounds(MEMORY, steps, settings["memory_repeats"], "memory")
        out[str(steps)] = {
            "tool_calls": steps // 2 - 1,
            "steps_made": made,
            "us_per_transition": {k: spread(v) for k, v in us.items()},
            "ms_per_workload": {k: spread(v, 3) for k, v in ms.items()},
            "workload_ratio": ratios(ms, "statechart"),
            "per_transition_ratio": ratios(us, "statechart"),
        }
    return out


def child(args: list[str]) -> dict[str, Any]:
    """Run side_children.py in a fresh process; its JSON."""
    cmd = [sys.executable, str(HERE / "side_children.py"), *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr}")
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def io_note(workdir: Path) -> str | None:
    """Why the byte counters may be missing or zero here (None when they look usable)."""
    if not proc_io():
        return "no /proc/self/io on this system: bytes per transition not measured"
    fs = filesystem(workdir)
    if fs in ("tmpfs", "ramfs"):
        return (
            f"the databases are on {fs}: write_bytes counts no device writes there "
            "(wchar still counts the write calls); use --dir on a disk"
        )
    return None


def durable_figure(settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Figure 2 in this process (a new file per sample, interleaved); figure 3 from one fresh
    child per contender and size (its own `/proc/self/io`), which also reports its µs."""
    note = io_note(workdir)
    if note:
        progress(f"warning: {note}")
    path = workdir / "durable.db"
    samples: dict[str, Sample] = {
        "statechart": lambda steps: anyio.run(statechart_once, "process", steps, path),
        "langgraph": lambda steps: langgraph_once("graph_sqlite", steps, path),
        "plain": lambda steps: anyio.run(plain_once, steps, path),
        # also statechart without persistence, in the same rounds, for the ceiling
        "statechart_memory": lambda steps: anyio.run(statechart_once, "memory", steps),
    }
    out: dict[str, Any] = {"filesystem": filesystem(workdir), "io_note": note, "sizes": {}}
    for steps in settings["durable_sizes"]:
        repeats = settings["durable_repeats_2000" if steps >= 2000 else "durable_repeats"]
        us, ms, made = timed_rounds(samples, steps, repeats, "durable")
        written: dict[str, dict[str, list[float]]] = {k: {} for k in DURABLE}
        fresh: dict[str, list[float]] = {k: [] for k in DURABLE}
        for i in range(settings["bytes_repeats"]):
            for kind in rotated(DURABLE, i):
                found = child(["durable", kind, str(steps), str(workdir)])
                fresh[kind].append(found["us"])
                for key, value in found["bytes_per_step"].items():
                    written[kind].setdefault(key, []).append(value)
            progress(
                f"bytes {steps} steps, round {i + 1}: "
                + ", ".join(
                    f"{k} {v['write_bytes_total'][-1]:,.0f}"
                    if v.get("write_bytes_total")
                    else f"{k} -"
                    for k, v in written.items()
                )
                + " write_bytes/step"
            )
        out["sizes"][str(steps)] = {
            "tool_calls": steps // 2 - 1,
            "repeats": repeats,
            "bytes_repeats": settings["bytes_repeats"],
            "steps_made": made,
            "us_per_transition": {k: spread(v) for k, v in us.items()},
            "ms_per_workload": {k: spread(v, 3) for k, v in ms.items()},
            "workload_ratio": ratios(ms, "statechart"),
            "per_transition_ratio": ratios(us, "statechart"),
            "ceiling": ceiling(ms),
            "us_per_transition_fresh_process": {k: spread(v) for k, v in fresh.items()},
            "bytes_per_transition": {
                k: {key: spread(v, 0) for key, v in found.items()} for k, found in written.items()
            },
        }
    return out


def ceiling(ms: dict[str, list[float]]) -> dict[str, Any]:
    """Per round, LangGraph's time over what statechart would take if persisting cost it
    no more than the plain loop's one-row transaction per step: its in-memory time plus the
    plain loop's durable time minus the plain loop's in-memory cost (negligible, ~1 µs a
    step, so not subtracted). The best durable ratio statechart's in-memory cost allows."""
    return spread(
        [
            lg / (mem + plain)
            for lg, mem, plain in zip(
                ms["langgraph"], ms["statechart_memory"], ms["plain"], strict=True
            )
        ],
        4,
    )


def resume_figure(settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Figure 4: each contender's run stopped at `resume_at` steps, resumed from fresh copies:
    open, build + compile, read the state (one pass); open to first new step (another)."""
    steps = settings["resume_at"]
    sources = {k: workdir / f"stopped-{k}.db" for k in DURABLE}
    progress(f"resume: stopping a run of each contender at {steps} steps")
    run_id = anyio.run(statechart_stopped, steps, sources["statechart"])
    langgraph_stopped(steps, sources["langgraph"])
    anyio.run(plain_stopped, steps, sources["plain"])
    copy = workdir / "resume-copy.db"

    def once(kind: str) -> dict[str, float]:
        if kind == "statechart":
            return anyio.run(statechart_resume, steps, sources[kind], run_id, workdir)
        if kind == "langgraph":
            return langgraph_resume(steps, sources[kind], copy)
        return anyio.run(plain_resume, steps, sources[kind], copy)

    for kind in DURABLE:  # warm-up
        once(kind)
    rounds: dict[str, dict[str, list[float]]] = {k: {} for k in DURABLE}
    for i in range(settings["resume_repeats"]):
        for kind in rotated(DURABLE, i):
            for key, value in once(kind).items():
                rounds[kind].setdefault(key, []).append(value)
        progress(
            f"resume round {i + 1}: "
            + ", ".join(f"{k} {v['first_step_ms'][-1]:.2f}" for k, v in rounds.items())
            + " ms"
        )
    for source in sources.values():
        remove_db(source)
    first = {k: v["first_step_ms"] for k, v in rounds.items()}
    return {
        "stopped_at": steps,
        "ms": {k: {key: spread(v, 3) for key, v in found.items()} for k, found in rounds.items()},
        "first_step_ratio": ratios(first, "statechart"),
    }


def concurrency_figure(settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Figure 5: many runs in one event loop, each contender in its own fresh child."""
    out: dict[str, Any] = {}
    found: dict[str, list[dict[str, Any]]] = {k: [] for k in CONCURRENT}
    for i in range(settings["concurrent_repeats"]):
        for kind in rotated(CONCURRENT, i):
            runs = settings["concurrent_runs"]  # the same count for every contender
            sample = child(
                ["concurrent", kind, str(runs), str(settings["latency_s"]), str(workdir)]
            )
            found[kind].append(sample)
            progress(
                f"concurrent {kind}: {runs} runs in {sample['wall_s']:.2f} s "
                f"({sample['wall_to_ideal']:.2f}x ideal, "
                f"{sample['peak_kib_per_run']:.1f} KiB/run)"
            )
    for kind, samples in found.items():
        out[kind] = {
            "runs": samples[0]["runs"],
            "repeats": len(samples),
            "steps_per_run": samples[0]["steps_per_run"],
            "peak_reset": all(s["peak_reset"] for s in samples),
            **{
                key: spread([s[key] for s in samples], 3)
                for key in (
                    "wall_s",
                    "ideal_s",
                    "wall_to_ideal",
                    "single_us_per_step",
                    "peak_kib_per_run",
                    "rss_before_kib",
                    "peak_rss_kib",
                )
            },
        }
    return out


def tracing_figure(settings: dict[str, Any]) -> dict[str, Any]:
    """Figure 6: benchmarks/tracing.py's children, off and SDK + no-op exporter, interleaved."""
    from tracing import child_env, run_child

    args = Namespace(steps=settings["tracing_steps"], rounds=settings["tracing_rounds"])
    env = child_env("http://127.0.0.1:9")  # no OTLP child here; the endpoint is unused
    per: dict[str, list[float]] = {"off": [], "sdk_batch_noop": []}
    for i in range(settings["tracing_repeats"]):
        for config in rotated(list(per), i):
            per[config].append(statistics.median(run_child(config, args, env)["us_per_transition"]))
        progress(
            f"tracing round {i + 1}: off {per['off'][-1]:.1f}, "
            f"on {per['sdk_batch_noop'][-1]:.1f} µs/transition"
        )
    return {
        "us_per_transition": {k: spread(v) for k, v in per.items()},
        "on_to_off": spread(
            [a / b for a, b in zip(per["sdk_batch_noop"], per["off"], strict=True)]
        ),
        "added_us": spread([a - b for a, b in zip(per["sdk_batch_noop"], per["off"], strict=True)]),
    }
