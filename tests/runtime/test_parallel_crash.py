"""A driver of three regions, each with a `keyed` charge in flight at once, SIGKILLed at
fail-points in real subprocesses, then resumed in a fresh one: every region goes on from
its own state, each charge applies once under its first key, and the log folds to the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from statechart import SQLiteStore, load_run
from statechart.engine import compiled, replay
from tests.support.parallel_proc import NAMES, Bank, chart_for

ROOT = Path(__file__).resolve().parents[2]
POINTS = (
    "intent.recorded:1",
    "intent.recorded:3",
    "tool.returned:1",
    "tool.returned:2",
    "tool.returned:3",
    "store.append.uncommitted:4",
    "store.append.uncommitted:7",
)
"""Killed with one intent recorded and the others' not yet, with all three recorded, after
the first, second and third charge ran (the others in flight), and inside two appends."""


def child(*args: str, point: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STATECHART_FAILPOINT": point}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.parallel_proc", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_with_regions_in_flight_resumes_each_and_charges_once(
    tmp_path: Path, point: str
) -> None:
    runs, bank = str(tmp_path / "runs.db"), str(tmp_path / "bank.db")
    killed = child(runs, bank, "start", point=point)
    assert killed.returncode == -9, killed.stderr  # killed at the fail-point
    run_id = killed.stdout.split()[0]
    resumed = child(runs, bank, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split()[-2:] == ["ended", "done"]
    books = Bank(Path(bank))
    applied = books.rows("applied")
    assert sorted(q for _, q in applied) == sorted(f"tides {n} 0" for n in NAMES)
    keys = {k for k, _ in applied}
    attempts = books.rows("attempts")
    assert {k for k, _ in attempts} == keys  # a re-run used the first key
    if point.startswith("tool.returned"):  # a charge ran and its result died with the driver
        assert len(attempts) > len(applied)  # so it ran again: the key alone kept it single

    async def check() -> None:
        store = SQLiteStore(runs)
        chart = chart_for(None)
        run = await load_run(chart, run_id, store=store)
        assert [run.context[n] for n in NAMES] == [f"{n}: 1 facts" for n in NAMES]
        base = await store.base(run_id)
        assert replay(compiled(chart), base, await store.events(run_id, after=base.seq)) == run
        events = await store.events(run_id)
        if point.startswith(("intent.recorded", "tool.returned")):
            takeovers = [e for e in events if e.trigger == "takeover"]
            assert takeovers and all(e.source.startswith("gather.") for e in takeovers)
        store.close()

    anyio.run(check)
