"""The benchmark scripts still run: each at a small size, its report checked for what it
must hold whatever the machine's speed (the timings themselves are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def benchmark(script: str, *args: str, out: Path, postgres: bool = False) -> dict[str, Any]:
    """Run `benchmarks/SCRIPT` small (it must exit 0) and read the JSON report it wrote;
    with `postgres`, only where a server runs (skipped otherwise, a failure under CI)."""
    if postgres:
        from tests.support.postgres import fresh_database

        with fresh_database():
            pass
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def test_tracing_benchmark_runs_small_and_sees_one_span_per_transition(tmp_path: Path) -> None:
    out = tmp_path / "tracing.json"
    small = ("--steps", "40", "--rounds", "1", "--repeats", "1", "--out", str(out))
    done = subprocess.run(
        [sys.executable, "benchmarks/tracing.py", *small],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert set(result["us_per_transition"]) == {"off", "sdk_none", "sdk_batch_noop", "otlp"}
    spans = result["spans"]
    assert spans["per_run"] == 40 + 4  # first span, drive, two states, one per transition
    assert spans["otlp_received_per_child"] == [spans["otlp_expected_per_child"]]
    assert spans["receiver_errors"] == []
    assert result["transition_span_attributes"] == {"chat": 16, "execute_tool": 12, "transition": 8}
    assert "target: tracing off" in done.stdout


def test_scaling_benchmark_runs_small_and_every_run_ends(tmp_path: Path) -> None:
    result = benchmark(
        "scaling.py", "--quick", "--no-langgraph", out=tmp_path / "s.json", postgres=True
    )
    assert set(result["single"]["us_per_transition"]) == {
        "statechart_sqlite",
        *(f"{n}{s}" for n in ("statechart_postgres", "bare_commit") for s in ("", "_async_commit")),
    }
    drained = [*result["cpu_bound"], result["latency"]["workers"]]
    assert [x["workers"] for x in drained] == [1, 2, 4, 4]
    for x in drained:  # every run ended in done, 20 transitions each, all counted
        assert x["runs_done"] == x["runs"] and x["transitions"] == 20 * x["runs"]
        assert 0 < x["database_cpu_share"] < 1 and x["workers_cpu_s"] > 0
    assert result["latency"]["all_ended"] and result["latency"]["workers_over_single_cpu"] > 0


def test_ui_benchmark_runs_small_and_serves_every_page(tmp_path: Path) -> None:
    small = ("--runs", "120", "--steps", "20", "--repeats", "1")
    result = benchmark("ui.py", *small, out=tmp_path / "ui.json", postgres=True)
    pages = {"runs", "runs_by_status", "runs_searched", "runs_last_page", "run"}
    for store in ("sqlite", "postgres"):
        assert pages <= set(result[store]), result[store]
        assert all(result[store][p]["bytes"] > 1000 for p in pages)
    assert len(result["targets"]) == 2 * len(pages)


def test_threads_benchmark_runs_small_and_times_every_kind_of_tool(tmp_path: Path) -> None:
    result = benchmark("threads.py", "--steps", "20", "--rounds", "1", out=tmp_path / "t.json")
    kinds = {"def (thread)", "def inline", "async def", "def, 1 thread"}
    assert set(result["us_per_transition"]) == kinds and result["steps"] == 20
    assert result["ratio_to_inline"]["def inline"] == 1.0


def test_streaming_benchmark_runs_small_and_times_every_kind(tmp_path: Path) -> None:
    report = benchmark(
        "streaming.py",
        "--chunks",
        "40",
        "--rounds",
        "1",
        "--no-callgrind",
        out=tmp_path / "streaming.json",
    )
    assert report["chunks"] == 40
    assert set(report["native_seconds"]) == {"watched", "called", "unwatched", "model"}
    assert all(seconds > 0 for seconds in report["native_seconds"].values())
    assert "framework_instructions_per_chunk" not in report  # no callgrind asked for


def test_regions_benchmark_runs_small_and_both_charts_make_the_same_calls(tmp_path: Path) -> None:
    result = benchmark("regions.py", "--calls", "5", "--rounds", "1", out=tmp_path / "r.json")
    assert result["transitions"] == {"sequential": 32, "parallel": 37}  # + entry, 3 ends, join
    assert set(result["ratio_parallel_to_sequential"]) == {"memory", "sqlite"}


def test_replay_benchmark_runs_small_and_every_run_agrees(tmp_path: Path) -> None:
    found = benchmark("replay.py", "--runs", "20", out=tmp_path / "replay.json")
    assert found["runs"] == 20 and found["steps_per_run"] == 20
    assert found["replay_seconds"] > 0 and found["seconds_for_10000_runs"] > 0
