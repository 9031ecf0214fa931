"""The refund desk agent through the CLI: approval before money moves, keyed refunds,
verification against the bank, each command its own process."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from statechart.io.loading import load_module
from statechart.testing import (
    Cassette,
    assert_called,
    assert_not_called,
    assert_path,
    assert_within_budget,
)
from tests.cli.test_cli import ROOT, cli
from tests.support.cli import FAILED, ORDER, WAITING, run_cli, waiting_id

DESK = f"{ROOT}/agents/refund_desk.py:chart"


def bank(tmp_path: Path) -> list[tuple[str, str, int]]:
    path = tmp_path / "refund_bank.db"
    if not path.exists():
        return []
    rows = sqlite3.connect(path).execute("SELECT key, order_id, amount_cents FROM refunds")
    return rows.fetchall()


def test_no_money_moves_before_approval_then_exactly_one_refund(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", DESK, "--input", '{"order_id": "A-7"}', code=WAITING).stdout
    assert "waiting in 'resolve.approve'" in out
    assert bank(tmp_path) == []
    run_id = out.split("approve: statechart approve ")[1].split()[0]
    assert "ended in 'done'" in cli(tmp_path, "approve", run_id, "--by", "cfo").stdout
    ((key, order, amount),) = bank(tmp_path)
    assert (order, amount) == ("A-7", 2000) and len(key) == 32
    shown = cli(tmp_path, "show", run_id).stdout
    assert "verify -> done" in shown and "one refund on record" in shown


def test_an_approver_can_lower_the_amount(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", DESK, "--input", '{"order_id": "A-7"}', code=WAITING).stdout
    run_id = out.split("approve: statechart approve ")[1].split()[0]
    cli(tmp_path, "approve", run_id, "--edit", '{"amount_cents": 1500}')
    assert [row[1:] for row in bank(tmp_path)] == [("A-7", 1500)]


def test_a_rejected_refund_never_reaches_the_bank(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", DESK, "--input", '{"order_id": "A-7"}', code=WAITING).stdout
    run_id = out.split("approve: statechart approve ")[1].split()[0]
    cli(tmp_path, "reject", run_id, "--reason", "not our error")
    resumed = cli(tmp_path, "resume", run_id, code=FAILED).stdout  # ends in `failed`
    # the model heard the rejection and moved on; verify finds no refund and fails the run
    assert bank(tmp_path) == []
    assert "verify -> failed" in resumed and "0 refunds on record for A-7" in resumed


def test_the_refund_desk_demo_works_more_than_once_in_a_directory(tmp_path: Path) -> None:
    """Following docs/cli.md and then docs/scaling.md in one directory shares one bank:
    a second run on an order the bank already refunded sees it and ends `done` without
    refunding again; a run on another order asks for approval and refunds that one."""
    first = waiting_id(run_cli(tmp_path, "run", DESK, "--input", ORDER, code=WAITING).stdout)
    assert "ended in 'done'" in run_cli(tmp_path, "approve", first).stdout
    again = run_cli(tmp_path, "run", DESK, "--input", ORDER).stdout  # A-7 once more
    assert "ended in 'done'" in again and "issue_refund" not in again
    other = '{"order_id": "A-8"}'
    second = waiting_id(run_cli(tmp_path, "run", DESK, "--input", other, code=WAITING).stdout)
    assert "ended in 'done'" in run_cli(tmp_path, "approve", second).stdout
    assert sorted(row[1:] for row in bank(tmp_path)) == [("A-7", 2000), ("A-8", 2000)]


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The refund desk agent, its bank in a scratch directory."""
    module = load_module(ROOT / "agents" / "refund_desk.py")
    monkeypatch.setattr(module, "BANK", str(tmp_path / "refund_bank.db"))
    return module


@pytest.mark.anyio
async def test_one_keyed_refund_after_approval_from_its_cassette(
    statechart_cassette: Cassette, desk: ModuleType
) -> None:
    """The testing kit on the reference agent: the demo recorded once (the bank written
    then), replayed with no model, no tool and no handler (the verify step's bank read
    is served from the record)."""
    ran = await statechart_cassette.run(
        desk.chart, model=desk.demo_model(), context={"order_id": "A-7"}
    )
    assert ran.state == "resolve.approve"
    assert_not_called(ran, "issue_refund")
    ran = await statechart_cassette.approve(desk.chart, ran, by="cfo", edits={"amount_cents": 1500})
    assert ran.state == "done"
    assert_path(ran, ["classify", "gather", "resolve", "verify", "done"])
    assert_called(ran, "issue_refund", once=True)
    assert_within_budget(ran)


@pytest.mark.anyio
async def test_a_rejected_refund_from_its_cassette(
    statechart_cassette: Cassette, desk: ModuleType
) -> None:
    ran = await statechart_cassette.run(
        desk.chart, model=desk.demo_model(), context={"order_id": "A-7"}
    )
    ran = await statechart_cassette.reject(desk.chart, ran, by="cfo", reason="not our error")
    assert ran.state == "failed"
    assert_not_called(ran, "issue_refund")
    assert_path(ran, ["classify", "gather", "resolve", "verify", "failed"])
