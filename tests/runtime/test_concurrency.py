"""Two real processes resume one stored run at once: one drives it, the other is refused.

And when a holder is SIGKILLed mid-call, its lease keeps everyone out until it
expires; the driver that then takes over settles the open intent by its policy.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from statechart import SQLiteStore, load_run, start
from statechart.engine import compiled
from statechart.engine.replay import replay
from tests.support.crash_refund import Bank, Zygote, refund_chart, refund_model

TRIALS = 100
TAKEOVER_TTL = 0.8


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    try:
        yield z
    finally:
        z.close()


def _rows(store: Path, run_id: str) -> tuple[list[int], tuple[Any, ...], list[str]]:
    """The run's event seqs, its runs row (with the live state and seq of its last event: the
    snapshot is written behind) and its event reasons, read straight from SQLite."""
    db = sqlite3.connect(store, isolation_level=None)
    try:
        seqs = [
            s
            for (s,) in db.execute(
                "SELECT seq FROM events WHERE run_id=? ORDER BY seq", (run_id,)
            ).fetchall()
        ]
        (row,) = db.execute(
            "SELECT r.status, coalesce(e.target, r.state), coalesce(e.seq, r.seq), "
            "r.lease_holder, r.lease_expires FROM runs r LEFT JOIN (SELECT * FROM events "
            "WHERE run_id=?1 ORDER BY seq DESC LIMIT 1) e USING (run_id) WHERE r.run_id=?1",
            (run_id,),
        ).fetchall()
        reasons = [
            r or ""
            for (r,) in db.execute(
                "SELECT reason FROM events WHERE run_id=? ORDER BY seq", (run_id,)
            ).fetchall()
        ]
        return seqs, row, reasons
    finally:
        db.close()


def _replays(policy: str, bank: Bank, store: Path, run_ids: list[str]) -> None:
    chart = refund_chart(policy, bank.path)

    async def check() -> None:
        s = SQLiteStore(store)
        try:
            for run_id in run_ids:
                base = await s.base(run_id)
                events = await s.events(run_id, after=base.seq)
                assert replay(compiled(chart), base, events) == await load_run(
                    chart, run_id, store=s
                ), run_id
        finally:
            s.close()

    anyio.run(check)


def test_two_processes_resuming_one_run_never_both_drive(zygote: Zygote, tmp_path: Path) -> None:
    store, bank = tmp_path / "store.db", Bank(tmp_path / "bank.db", dedupe=True)
    run_ids = [f"c-{i}" for i in range(TRIALS)]
    bank.create(dict.fromkeys(run_ids, 100))
    chart = refund_chart("keyed", bank.path)

    async def create() -> None:
        s = SQLiteStore(store)
        for run_id in run_ids:
            await start(
                chart, store=s, model=refund_model(), run_id=run_id, context={"order_id": run_id}
            )
        s.close()

    anyio.run(create)
    common = {"policy": "keyed", "bank": bank.path, "store": str(store), "ttl": 5.0}
    losers: Counter[str] = Counter()
    for run_id in run_ids:
        reports = zygote.run([{"op": "contend", **common, "run_id": run_id}] * 2, barrier=True)
        assert all(r["ok"] and r["signal"] is None for r in reports), reports
        drove = [r for r in reports if r["seqs"]]
        assert len(drove) == 1, f"{run_id}: not exactly one process appended: {reports}"
        (other,) = [r for r in reports if r is not drove[0]]
        assert other["outcome"] in ("lease_held", "found_ended"), other
        losers[other["outcome"]] += 1
        seqs, (status, state, last, holder, _), _ = _rows(store, run_id)
        assert seqs == drove[0]["seqs"] == list(range(1, last + 1)), (seqs, drove)
        assert (status, state, holder) == ("ended", "done", None)
    print(f"\n{TRIALS} trials: the other process {dict(losers)}")
    # Most trials must be true collisions, or the barrier released nothing together.
    assert losers["lease_held"] >= TRIALS // 2, losers
    assert sorted(order for _, order in bank.refunds()) == sorted(run_ids)
    _replays("keyed", bank, store, run_ids)


@pytest.mark.parametrize(
    ("policy", "point", "settled", "end", "refunds"),
    [
        ("keyed", "tool.returned:2", "it ran again under its recorded key", "done", 1),
        ("reconcile", "tool.returned:2", "the reconcile hook reported that it had run", "done", 1),
        ("reconcile", "intent.recorded:2", "it ran again", "done", 1),
        ("never", "tool.returned:2", None, "done", 1),
        ("never", "intent.recorded:2", None, "done", 1),
        ("control", "tool.returned:2", "it ran again", "escalated", 2),
    ],
)
@pytest.mark.parametrize("doubt", [False, True], ids=["known-dead", "in-doubt"])
def test_a_killed_holder_is_taken_over_at_once_or_when_its_lease_expires(
    zygote: Zygote,
    tmp_path: Path,
    policy: str,
    point: str,
    settled: str | None,
    end: str,
    refunds: int,
    doubt: bool,
) -> None:
    """A holder SIGKILLed on this machine (same boot, same PID namespace) is taken over at
    once; when its process cannot be identified (`doubt`: another host, an older store),
    the run stays its until the lease expires. Either way the call is settled once."""
    store, bank = tmp_path / "store.db", Bank(tmp_path / "bank.db", dedupe=policy == "keyed")
    bank.create({"t-1": 100})
    job = {
        "op": "drive",
        "policy": policy,
        "bank": bank.path,
        "store": str(store),
        "run_id": "t-1",
        "order_id": "t-1",
        "ttl": TAKEOVER_TTL,
    }
    (a,) = zygote.run([{**job, "failpoint": point}])
    assert a["signal"] == 9 and not a["killed_by_us"], a
    seqs, (status, state, _, holder, expires), _ = _rows(store, "t-1")
    assert (status, state) == ("running", "resolve.act")
    assert str(a["pid"]) in holder.split(":") and expires > time.time(), holder

    if doubt:
        with sqlite3.connect(store) as db:
            db.execute("UPDATE runs SET lease_process = NULL")
    (b,) = zygote.run([{**job, "patience": 5.0}])
    assert b["ok"], b
    if doubt:
        assert b["started"] < expires and b["held"] > 0, "B was let in while A's lease was live"
        assert b["refused_at"] < expires <= b["got_in_at"] + 0.1, (b, expires)
    else:
        assert b["held"] == 0 and b["got_in_at"] < expires, ("B waited for a dead holder", b)
    refund = f"settled an interrupted call (retry='{'safe' if policy == 'control' else policy}')"
    _, _, reasons = _rows(store, "t-1")
    if settled is None:  # retry='never': nothing ran; a person has to look first
        assert (b["status"], b["state"]) == ("waiting", "resolve.approve"), b
        assert "may have run" in b["reason"] and not any(refund in r for r in reasons)
        (op,) = zygote.run([{**job, "op": "operator"}])
        expected = "rejected" if point.startswith("tool") else "approved"
        assert op["ok"] and op["decision"] == expected, op
        (b,) = zygote.run([job])
    else:
        assert [r for r in reasons if refund in r] == [f"{refund}: {settled}"], reasons
    seqs, (status, state, last, holder, _), _ = _rows(store, "t-1")
    assert (b["status"], status, state, holder) == ("ended", "ended", end, None), b
    assert seqs == list(range(1, last + 1))
    assert len(bank.refunds("t-1")) == refunds
    assert bank.deduped() == (policy == "keyed")
    _replays(policy, bank, store, ["t-1"])
