"""The worker soak at CI size (100 runs; `make soak` runs 1,000): killed and restarted
workers on the local PostgreSQL, every run ends once, no refund twice. And the check it
relies on, "one driver at a time", catches what it must."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from statechart.store.queue import Held
from tests.support.cli import ROOT
from tests.support.postgres import fresh_database
from tests.support.soak import one_at_a_time


def test_the_soak_at_ci_size() -> None:
    with fresh_database():  # skips (or fails under CI) when no server runs
        pass
    runs = int(os.environ.get("STATECHART_SOAK_RUNS", "100"))
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.soak", "--runs", str(runs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout, done.stderr[-4000:])
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(figures)
    assert figures["runs"] == runs and figures["problems"] == 0
    assert figures["double_refunds"] == 0 and figures["runs_without_refund"] == 0
    assert figures["kills_instant_takeover"] >= 1 and figures["kills_lease_expiry"] >= 1
    assert figures["takeovers_instant_takeover"] >= 1 and figures["takeovers_lease_expiry"] >= 1


def _held(holder: str, seq: int = 0, took: str | None = None, clean: bool | None = True) -> Held:
    return Held(holder, 0.0, seq, took, None if clean is None else 1.0, clean)


def test_one_at_a_time_accepts_releases_and_takeovers_and_catches_overlaps() -> None:
    a = _held("a", 0, clean=None)  # killed after writing 1 and 2
    b = _held("b", 2, took="a")  # took a over at seq 2, released clean after 3
    c = _held("c", 4)  # after a person's event 4
    assert one_at_a_time([a, b, c], [(1, "a"), (2, "a"), (3, "b"), (5, "c")]) is None
    lost = _held("x", 2, took="a", clean=None)  # took a over, then died before writing
    assert one_at_a_time([a, lost, _held("b", 2, took="x")], [(1, "a"), (3, "b")]) is None
    unclean = _held("a", 0, clean=False)  # released with a call in doubt
    assert one_at_a_time([unclean, _held("b", 1, took="a")], [(1, "a"), (2, "b")]) is None
    problem = one_at_a_time([a, _held("b", 2)], [(1, "a"), (3, "b")])
    assert problem is not None and "while a held it" in problem
    late = one_at_a_time([a, b], [(1, "a"), (2, "a"), (3, "a")])  # a wrote after b took over
    assert late is not None and "outside its lease" in late
    early = one_at_a_time([a, b], [(1, "a"), (2, "b")])  # b wrote a seq before its lease
    assert early is not None and "outside its lease" in early
    assert "holds no lease" in (one_at_a_time([a], [(1, "a"), (2, "z")]) or "")
    assert "clean release" in (one_at_a_time([_held("a"), _held("b", took="a")], []) or "")
    assert "while a held it" in (one_at_a_time([unclean, _held("b", 1)], []) or "")
