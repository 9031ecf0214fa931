"""The three-level reference workflow through the CLI: the approval three levels down
waits across processes, and every level's ledger is charged."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import ROOT, cli
from tests.support.cli import WAITING

DEEP = f"{ROOT}/agents/deep_research.py:chart"


def test_an_approval_three_levels_down_then_every_level_is_charged(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", DEEP, "--input", '{"topic": "refund abuse"}', code=WAITING).stdout
    assert "waiting in 'explore.sources.fetch.approve'" in out
    # live progress shows every budget around the state, innermost included
    assert (
        "| explore: steps 5 (35 left)  tool_calls 1 (7 left) | explore.sources: "
        "tool_calls 0 (3 left)]" in out
    )
    run_id = out.split("approve: statechart approve ")[1].split()[0]
    assert "ended in 'done'" in cli(tmp_path, "approve", run_id, "--by", "lead").stdout
    data = json.loads(cli(tmp_path, "show", run_id, "--json").stdout)
    run, events = data["run"], data["events"]
    assert run["context"]["answer"] == "Up 12% a year, per the report."
    ledger = run["ledger"]
    assert set(ledger) == {"root", "explore", "explore.sources"}
    # spending below charges every level above: the archive read and the purchase are the
    # innermost level's two tool calls; the search makes the investigation's third
    assert [ledger[k]["tool_calls"] for k in ("explore.sources", "explore", "root")] == [2, 3, 3]
    assert ledger["root"]["steps"] > ledger["explore"]["steps"] > ledger["explore.sources"]["steps"]
    assert [
        e["tool"]
        for e in events
        if e["actor"] == "code" and e["tool"] in ("search", "read_archive", "buy_report")
    ] == ["search", "read_archive", "buy_report"]
    drawn = cli(tmp_path, "diagram", "--run", run_id).stdout
    assert 'state "sources" as s_explore__sources {' in drawn


def test_a_rejected_purchase_is_heard_three_levels_down(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", DEEP, "--input", '{"topic": "refund abuse"}', code=WAITING).stdout
    run_id = out.split("approve: statechart approve ")[1].split()[0]
    cli(tmp_path, "reject", run_id, "--reason", "over budget")
    assert "ended in 'done'" in cli(tmp_path, "resume", run_id).stdout
    data = json.loads(cli(tmp_path, "show", run_id, "--json").stdout)
    assert "buy_report" not in [e["tool"] for e in data["events"] if e["actor"] == "code"]
