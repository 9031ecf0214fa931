"""Every reference agent's recorded runs, replayed against the agent itself, agree to the
end: approvals, an approver's edit, a rejection, nested sub-charts and parallel regions
included; no tool runs during the replay."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import statechart as sc
from statechart.io.loading import load_chart

pytestmark = pytest.mark.anyio

AGENTS = Path(__file__).resolve().parents[2] / "agents"

Decide = Callable[[sc.Chart, str, sc.Store], Any]


async def approve(chart: sc.Chart, run_id: str, store: sc.Store) -> None:
    await sc.approve(chart, run_id, store=store, by="op", note="fine")


async def lower(chart: sc.Chart, run_id: str, store: sc.Store) -> None:
    await sc.approve(chart, run_id, store=store, by="cfo", edits={"amount_cents": 1500})


async def refuse(chart: sc.Chart, run_id: str, store: sc.Store) -> None:
    await sc.reject(chart, run_id, store=store, by="cfo", reason="not our error")


CASES: dict[str, tuple[dict[str, Any], Decide]] = {
    "support_triage": ({"ticket_id": "T-1001"}, approve),
    "refund_desk": ({"order_id": "A-7"}, approve),
    "refund_desk edited": ({"order_id": "A-7"}, lower),
    "refund_desk rejected": ({"order_id": "A-7"}, refuse),
    "deep_research": ({"topic": "refund abuse"}, approve),
    "deep_research rejected": ({"topic": "refund abuse"}, refuse),
    "research_topics": ({"question": "tides"}, approve),
    "triage_with_research": ({"ticket_id": "T-1001"}, approve),
}


async def record(
    chart: sc.Chart, model: sc.Model, store: sc.Store, context: dict[str, Any], decide: Decide
) -> sc.Run:
    """One run of `chart` with its demo model, a person deciding each time it waits."""
    run = await sc.start(chart, store=store, model=model, context=context)
    run = await sc.run_to_end(chart, run, store=store, model=model)
    for _ in range(5):
        if run.status != "waiting":
            break
        await decide(chart, run.run_id, store)
        run = await sc.resume(chart, run.run_id, store=store, model=model)
    return run


@pytest.fixture
def agent_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agents' own data files (helpdesk, bank) in a scratch directory."""
    monkeypatch.setenv("STATECHART_DB", str(tmp_path / "statechart.db"))
    monkeypatch.setenv("SUPPORT_TRIAGE_HELPDESK", str(tmp_path / "helpdesk.db"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("case", list(CASES))
async def test_recorded_runs_replayed_against_their_own_chart_agree(
    case: str, agent_files: Path
) -> None:
    name = case.split()[0]
    chart, module = load_chart(f"{AGENTS / name}.py:chart")
    context, decide = CASES[case]
    store = sc.SQLiteStore(agent_files / "runs.db")
    try:
        ended = [await record(chart, module.demo_model(), store, context, decide) for _ in range(2)]
        assert all(r.status == "ended" for r in ended), [(r.state, r.reason) for r in ended]
        seqs = {r.run_id: r.seq for r in ended}
        report = await sc.replay(chart, store=store)
    finally:
        store.close()
    assert report.ok and report.counts() == {"agree": 2}, report.table()
    assert {v.run_id: v.agreed for v in report.verdicts} == seqs  # every step met, none left
