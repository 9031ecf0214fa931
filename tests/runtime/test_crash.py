"""Refund drivers SIGKILLed at random moments and at fail-points, resumed in fresh processes.

Each kill's window is read back from what survived it: the run store's intents
against the bank's rows. Every run must end with exactly one refund and an event
log that replays to its snapshot; a control run without intent protection must
refund twice, or this test could not catch anything.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from statechart import RunNotFoundError, SQLiteStore, load_run
from statechart.engine import compiled
from statechart.engine.replay import replay
from tests.support.cli import AGENT, TICKET, WAITING, cli_env, run_cli, waiting_id
from tests.support.crash_refund import POLICIES, Bank, Zygote, refund_chart
from tests.support.postgres import fresh_database

ITERATIONS = int(os.environ.get("STATECHART_CRASH_ITERATIONS", "1"))
KILLS_PER_POLICY = 105 * ITERATIONS
MAX_KILLS_PER_RUN = 4
TTL = 0.01
STEPS = 11
"""Transitions of a clean run (13 when it waits for the operator)."""
SETUP, PER_STEP = 0.012, 0.004
"""Seconds a child takes to start driving, then per transition (about 50 ms in all)."""
POINTS = {
    "intent.recorded": 2,
    "tool.returned": 2,
    "store.append.uncommitted": 11,
    "store.append.snapshot": 3,
    "store.renew.uncommitted": 1,
    "store.release.uncommitted": 1,
}
"""Each fail-point and how often one clean drive reaches it (the children's stores write
a snapshot every 3 events; their 0.01 s lease is renewed between most steps)."""
WINDOWS = (
    "before intent",
    "intent, before effect",
    "effect, before completion",
    "in transaction",
    "after completion",
)


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    try:
        yield z
    finally:
        z.close()


@dataclass(frozen=True)
class Seen:
    """What a kill left behind, for one run: the store's row and intents, the bank's refunds."""

    status: str | None
    state: str
    seq: int
    refund_intent: bool
    refund_done: bool
    last_intent_open: bool
    refunds: int


@dataclass
class Campaign:
    """Drives runs of one policy through kills and resumes until each ends."""

    policy: str
    tmp: Path
    zygote: Zygote
    rng: random.Random
    kills: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(mode, window) -> kills."""
    points: Counter[str] = field(default_factory=Counter)
    """fail-point -> kills it made."""
    decisions: Counter[str] = field(default_factory=Counter)
    runs: list[str] = field(default_factory=list)
    dsn: str | None = None
    """A PostgreSQL database to keep the runs in, instead of a SQLite file."""

    def __post_init__(self) -> None:
        self.store = self.dsn or str(self.tmp / f"store-{self.policy}.db")
        self.bank = Bank(self.tmp / f"bank-{self.policy}.db", dedupe=self.policy == "keyed")
        self.bank.create({f"{self.policy}-{i}": 100 + i for i in range(5_000)})
        if self.dsn is None:
            SQLiteStore(self.store).close()  # the schema; children only ever open it
            self.db = sqlite3.connect(self.store, isolation_level=None)

    def job(self, run_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "op": "drive",
            "policy": self.policy,
            "bank": self.bank.path,
            "store": self.store,
            "run_id": run_id,
            "order_id": run_id,
            "ttl": TTL,
            **extra,
        }

    def seen(self, run_id: str) -> Seen:
        if self.dsn is not None:
            return anyio.run(self._seen_in_postgres, run_id)
        rows = self.db.execute(  # the live state and seq: the snapshot is written behind
            "SELECT r.status, coalesce(e.target, r.state), coalesce(e.seq, r.seq) FROM runs r "
            "LEFT JOIN (SELECT * FROM events WHERE run_id=?1 ORDER BY seq DESC LIMIT 1) e "
            "USING (run_id) WHERE r.run_id=?1",
            (run_id,),
        ).fetchall()
        intents = self.db.execute(
            "SELECT tool, completed_seq FROM intents WHERE run_id=? ORDER BY seq", (run_id,)
        ).fetchall()
        refund = [done for tool, done in intents if tool == "issue_refund"]
        status, state, seq = rows[0] if rows else (None, "", 0)
        return Seen(
            status,
            state,
            seq,
            bool(refund),
            bool(refund) and refund[-1] is not None,
            bool(intents) and intents[-1][1] is None,
            len(self.bank.refunds(run_id)),
        )

    async def _seen_in_postgres(self, run_id: str) -> Seen:
        from statechart.store.postgres import PostgresStore

        assert self.dsn is not None
        store = PostgresStore(self.dsn)
        try:
            try:
                loaded = await store.load(run_id)
            except RunNotFoundError:
                return Seen(None, "", 0, False, False, False, len(self.bank.refunds(run_id)))
            intents = await store.intents(run_id)
        finally:
            await store.close()
        refund = [i.completed_seq for i in intents if i.call.name == "issue_refund"]
        return Seen(
            loaded.snapshot.status,
            loaded.state,
            loaded.seq,
            bool(refund),
            bool(refund) and refund[-1] is not None,
            bool(intents) and intents[-1].completed_seq is None,
            len(self.bank.refunds(run_id)),
        )

    def drive_to_end(self, run_id: str, *, first: str | None = None) -> None:
        """Kill, resume, approve as needed until the run ends; every kill is classified.
        With `first`, the first drive is killed at that fail-point and no other."""
        self.runs.append(run_id)
        killed = 0 if first is None else MAX_KILLS_PER_RUN - 1
        for _ in range(40):
            before = self.seen(run_id)
            if before.status == "ended":
                return
            if before.status == "waiting":
                assert before.state == "resolve.approve", before
                (report,) = self.zygote.run([self.job(run_id, op="operator")])
                assert report["ok"], report
                self.decisions[report["decision"]] += 1
                continue
            mode, point, extra, delay = "clean", None, {}, None
            if first is not None:
                point, mode, extra, first = (
                    first.split(":")[0],
                    "failpoint",
                    {"failpoint": first},
                    None,
                )
            elif killed < MAX_KILLS_PER_RUN:
                if self.rng.random() < 0.5:
                    left = SETUP + PER_STEP * max(STEPS - before.seq, 1)
                    mode, delay = "random", self.rng.uniform(0.0, left)
                else:
                    point = self.rng.choice(sorted(POINTS))
                    mode = "failpoint"
                    extra = {"failpoint": f"{point}:{self.rng.randint(1, POINTS[point])}"}
            (report,) = self.zygote.run([self.job(run_id, **extra)], kill_after=delay)
            if report["signal"] is None:
                assert report["ok"], report
                continue
            assert report["signal"] == 9 and (report["killed_by_us"] or point), report
            killed += 1
            self.points[point or "random"] += 1
            after = self.seen(run_id)
            self.kills[mode, self._window(before, after, point, extra)] += 1
        raise AssertionError(f"run {run_id} did not end after 40 processes: {self.seen(run_id)}")

    def _window(self, before: Seen, after: Seen, point: str | None, extra: dict[str, Any]) -> str:
        """Where the kill landed, from what was stored; fail-points also check their spot."""
        if point in ("store.append.uncommitted", "store.append.snapshot"):
            n = int(extra["failpoint"].rsplit(":", 1)[1])
            if point == "store.append.uncommitted":
                assert after.seq == before.seq + n - 1, (before, after, "append n committed")
            else:  # the n-th append that writes the snapshot: an earlier one, none since
                assert after.seq >= before.seq + n - 1, (before, after, "appends committed")
            return "in transaction"
        if point in ("store.renew.uncommitted", "store.release.uncommitted"):
            return _settled(after)
        if point is not None:  # killed right after an intent committed, or after its tool ran
            assert after.last_intent_open and after.state.endswith(".act"), (point, after)
        if point == "tool.returned" and after.refund_intent and not after.refund_done:
            assert after.refunds >= 1, after  # the refund's own call returned
        return _settled(after)


def _settled(after: Seen) -> str:
    """The window a kill landed in, by whether the refund's intent, effect and completion
    were stored."""
    if not after.refund_intent:
        return "before intent"
    if not after.refund_done:
        return "effect, before completion" if after.refunds else "intent, before effect"
    return "after completion"


def check(campaign: Campaign) -> dict[str, int]:
    """Read every run back from a fresh connection: end state, refunds, replay, settlements."""
    chart = refund_chart(campaign.policy, campaign.bank.path)
    per_order = Counter(order for _, order in campaign.bank.refunds())

    async def read() -> tuple[list[tuple[str, str, str]], list[str]]:
        """Each run's end and every event's `trigger: reason`."""
        store: Any
        if campaign.dsn is not None:
            from statechart.store.postgres import PostgresStore

            store = PostgresStore(campaign.dsn)
        else:
            store = SQLiteStore(campaign.store)
        try:
            ends = [(r.run_id, r.status, r.state) for r in await store.runs()]
            reasons = []
            for run_id in campaign.runs:
                base = await store.base(run_id)
                events = await store.events(run_id, after=base.seq)
                assert replay(compiled(chart), base, events) == await load_run(
                    chart, run_id, store=store
                ), run_id
                reasons += [f"{e.trigger}: {e.reason}" for e in events]
            return ends, reasons
        finally:
            closed = store.close()
            if closed is not None:
                await closed

    ends, reasons = anyio.run(read)
    assert sorted(r for r, _, _ in ends) == sorted(campaign.runs), "a run was lost"
    assert all(status == "ended" for _, status, _ in ends), ends
    return {
        "runs": len(ends),
        "done": sum(state == "done" for _, _, state in ends),
        "duplicates": sum(n - 1 for n in per_order.values() if n > 1),
        "refunded": sum(1 for r in campaign.runs if per_order[r] == 1),
        "deduped": campaign.bank.deduped(),
        **{
            p: sum(f"settled an interrupted call (retry='{p}')" in r for r in reasons)
            for p in ("safe", "keyed")
        },
        "reconciled": sum("reconcile hook reported that it had run" in r for r in reasons),
        "asked": sum(r.startswith("ask: ") and "may have run" in r for r in reasons),
    }


def test_sigkill_anywhere_never_refunds_twice_nor_loses_a_run(
    zygote: Zygote,
    tmp_path: Path,
    record_property: Any,
) -> None:
    kills: dict[str, Counter[tuple[str, str]]] = {}
    points: Counter[str] = Counter()
    for n, policy in enumerate(POLICIES):
        campaign = Campaign(policy, tmp_path, zygote, random.Random(1000 + n))
        i = 0
        while sum(campaign.kills.values()) < KILLS_PER_POLICY:
            campaign.drive_to_end(f"{policy}-{i}")
            i += 1
        found = check(campaign)
        print(f"\n{policy}: {found}, operator {dict(campaign.decisions)}")
        assert found["duplicates"] == 0, found
        assert found["refunded"] == found["done"] == found["runs"], found
        assert found["safe"] > 0, "no lookup was ever re-run after a takeover"
        if policy == "keyed":
            assert found["keyed"] > 0 and found["deduped"] > 0, found
        if policy == "reconcile":
            assert found["reconciled"] > 0, found
        if policy == "never":
            assert found["asked"] > 0 and campaign.decisions["rejected"] > 0, found
            assert campaign.decisions["approved"] > 0, campaign.decisions
        kills[policy] = campaign.kills
        points.update(campaign.points)
    assert set(POINTS) <= set(points), f"fail-points that never killed: {points}"
    table = _table(kills)
    record_property("crash_windows", json.dumps(table))
    (tmp_path / "crash_windows.json").write_text(json.dumps(table, indent=2))
    total = sum(row["total"] for row in table.values())
    assert total >= 300 * ITERATIONS, table
    for window, row in table.items():
        assert row["total"] >= 5, f"only {row['total']} kills landed {window}: {table}"
    assert (
        table["intent, before effect"]["random"] + table["effect, before completion"]["random"] > 0
    ), "random kills never hit the narrow windows"


def _table(kills: dict[str, Counter[tuple[str, str]]]) -> dict[str, dict[str, int]]:
    """Kills per window, by policy and by mode; printed with `-s`."""
    table = {
        w: {p: sum(n for (_, win), n in kills[p].items() if win == w) for p in kills}
        for w in WINDOWS
    }
    for w, row in table.items():
        for mode in ("random", "failpoint"):
            row[mode] = sum(c[mode, w] for c in kills.values())
        row["total"] = row["random"] + row["failpoint"]
    cols = [*kills, "random", "failpoint", "total"]
    print(f"\n{'window':<27}" + "".join(f"{c:>10}" for c in cols))
    for w, row in table.items():
        print(f"{w:<27}" + "".join(f"{row[c]:>10}" for c in cols))
    print(f"{'all':<27}" + "".join(f"{sum(r[c] for r in table.values()):>10}" for c in cols))
    return table


def test_control_without_protection_refunds_twice(zygote: Zygote, tmp_path: Path) -> None:
    """The same kill, but the refund is declared `safe` on a bank that never dedupes."""
    campaign = Campaign("control", tmp_path, zygote, random.Random(7))
    for i in range(5):
        run_id = f"control-{i}"
        campaign.runs.append(run_id)
        (killed,) = zygote.run([campaign.job(run_id, failpoint="tool.returned:2")])
        assert killed["signal"] == 9, killed
        (resumed,) = zygote.run([campaign.job(run_id)])
        assert resumed["ok"] and resumed["state"] == "escalated", resumed
    found = check(campaign)
    assert found["duplicates"] == 5 and found["done"] == 0, found
    assert found["safe"] == 5, found


def test_a_driver_killed_after_an_approval_leaves_the_call_in_doubt_again(
    zygote: Zygote,
    tmp_path: Path,
) -> None:
    """An approval clears the doubt of the driver killed before it, not of the one after it."""
    campaign = Campaign("never", tmp_path, zygote, random.Random(0))
    run_id = "never-0"
    campaign.runs.append(run_id)

    def drive(failpoint: str | None = None) -> dict[str, Any]:
        (report,) = zygote.run([campaign.job(run_id, failpoint=failpoint)])
        return report

    def operator() -> str:
        (report,) = zygote.run([campaign.job(run_id, op="operator")])
        return str(report["decision"])

    assert drive("intent.recorded:2")["signal"] == 9  # intent recorded, nothing sent
    assert drive()["state"] == "resolve.approve"
    assert operator() == "approved"  # the bank shows nothing: send it
    assert drive("tool.returned:1")["signal"] == 9  # sent, then killed before the result
    assert campaign.seen(run_id).refunds == 1
    waiting = drive()
    assert waiting["state"] == "resolve.approve" and "may have run" in waiting["reason"]
    assert operator() == "rejected"
    assert drive()["state"] == "done"
    found = check(campaign)
    assert found["duplicates"] == 0 and found["asked"] == 2, found


def test_a_kill_between_storing_the_chart_and_the_run_leaves_nothing_unresumable(
    tmp_path: Path,
) -> None:
    """`statechart run` writes where the chart came from before it creates the run: killed
    between the two (fail-point `cli.run.chart_saved`), it leaves no run that no command
    could resume, and the next `run` goes through."""
    killed = run_cli(
        tmp_path,
        "run",
        AGENT,
        "--input",
        TICKET,
        code=None,
        environ=cli_env(STATECHART_FAILPOINT="cli.run.chart_saved"),
    )
    assert killed.returncode == -9, killed.stderr
    db = sqlite3.connect(tmp_path / "statechart.db")
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    (source,) = db.execute("SELECT source FROM charts").fetchone()
    assert source.endswith("agents/support_triage.py:chart")
    db.close()
    again = run_cli(tmp_path, "run", AGENT, "--input", TICKET, code=WAITING)
    run_id = waiting_id(again.stdout)
    assert "ended in 'done'" in run_cli(tmp_path, "approve", run_id).stdout


def test_every_fail_point_on_postgres(zygote: Zygote, tmp_path: Path) -> None:
    """The crash test's fail-points with the runs in PostgreSQL: each policy, each point
    (at each count a clean drive reaches it), then driven to the end by fresh processes."""
    rng = random.Random(18)
    for policy in POLICIES:
        (tmp_path / policy).mkdir()
        with fresh_database() as dsn:
            campaign = Campaign(policy, tmp_path / policy, zygote, rng, dsn=dsn)
            i = 0
            for point, times in sorted(POINTS.items()):
                for n in range(1, times + 1):
                    campaign.drive_to_end(f"{policy}-{i}", first=f"{point}:{n}")
                    i += 1
            found = check(campaign)
        print(f"\n{policy} on PostgreSQL: {found}, kills {dict(campaign.kills)}")
        assert sum(campaign.points.values()) == sum(POINTS.values()), campaign.points
        assert set(campaign.points) == set(POINTS), campaign.points
        assert found["duplicates"] == 0, found
        assert found["refunded"] == found["done"] == found["runs"], found
        if policy == "keyed":
            assert found["keyed"] > 0, found
        if policy == "reconcile":
            assert found["reconciled"] > 0, found
        if policy == "never":
            assert found["asked"] > 0, found
