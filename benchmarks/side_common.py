"""Shared pieces of the side-by-side benchmark: the workload's size, stats, versions.

The workload of every contender: one model that calls the `fetch` tool of
benchmarks/durable.py N times (distinct arguments, each result ~500 characters),
then finishes. A size is given as statechart transitions (`steps`), so
N = steps // 2 - 1 tool calls and N + 1 model calls, for every contender.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sqlite3
import statistics
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DASH = "\u2013"


def tool_calls(steps: int) -> int:
    """Tool calls in a workload of `steps` statechart transitions."""
    return steps // 2 - 1


def r(x: float, nd: int = 2) -> float:
    return round(x, nd)


def spread(xs: list[float], nd: int = 2) -> dict[str, Any]:
    """Median and min-max of the repeats, plus the repeats themselves."""
    return {
        "median": r(statistics.median(xs), nd),
        "min": r(min(xs), nd),
        "max": r(max(xs), nd),
        "repeats": [r(x, nd) for x in xs],
    }


def fmt(s: dict[str, Any], nd: int = 1) -> str:
    """`median (min to max)` for the markdown table."""
    return f"{s['median']:,.{nd}f} ({s['min']:,.{nd}f}{DASH}{s['max']:,.{nd}f})"


def sig(x: float) -> str:
    """A ratio with three significant digits (0.0123, 0.120, 8.86, 15.0, 112)."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:#.3g}"


def fmt_ratio(s: dict[str, Any]) -> str:
    """`median (min to max)` of a ratio, three significant digits each."""
    return f"{sig(s['median'])} ({sig(s['min'])}{DASH}{sig(s['max'])})"


def pkg(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def git_dirty() -> list[str] | None:
    """The work tree's changed and untracked paths (the whole tree, not only statechart/)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [line[3:] for line in out.splitlines() if line.strip()]


def git_sha() -> str | None:
    """The commit, with `+dirty` when anything in the work tree differs from it."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return sha + ("+dirty" if git_dirty() else "")


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def versions() -> dict[str, Any]:
    """Every version the figures depend on."""
    return {
        "python": platform.python_version(),
        "statechart_git": git_sha(),
        "git_dirty_paths": git_dirty(),
        "statechart": pkg("statechart"),
        "transitions": pkg("transitions"),
        "pydantic": pkg("pydantic"),
        "anyio": pkg("anyio"),
        "langgraph": pkg("langgraph"),
        "langgraph-prebuilt": pkg("langgraph-prebuilt"),
        "langgraph-checkpoint": pkg("langgraph-checkpoint"),
        "langgraph-checkpoint-sqlite": pkg("langgraph-checkpoint-sqlite"),
        "langchain-core": pkg("langchain-core"),
        "opentelemetry-sdk": pkg("opentelemetry-sdk"),
        "sqlite3_lib": sqlite3.sqlite_version,
    }


def machine() -> dict[str, Any]:
    """CPUs (all, and those this process may run on: statechart's SQLite checkpointer runs
    on a second one when there is one), platform and load."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": usable,
        "cpu": cpu_name(),
        "platform": platform.platform(),
        "loadavg": [r(x) for x in os.getloadavg()],
    }


def status_kib(key: str) -> int:
    """A `/proc/self/status` figure in KiB (VmRSS, VmHWM); 0 when unavailable."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def remove_db(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)
