"""Each kind of divergence, on the support-triage reference agent: its recorded demo run
replayed against a small change to the agent, reported with the right kind, step and
state (the run's steps: 1-4 intake, 5-10 research, 11-14 draft, 15 review, 16-21 send)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import statechart as sc
from statechart.io.loading import load_chart
from tests.rerun.test_reference_replay import AGENTS, agent_files, record

pytestmark = pytest.mark.anyio
__all__ = ["agent_files"]  # the fixture, used by name


def closed(facts: sc.Facts) -> str | None:
    return "drafts need a second reviewer"


def renamed(chart: sc.Chart, old: str, new: str) -> sc.Chart:
    def name(s: str) -> str:
        return new if s == old else s

    return dataclasses.replace(
        chart,
        states=tuple(dataclasses.replace(s, name=name(s.name)) for s in chart.states),
        edges=tuple(
            dataclasses.replace(e, source=name(e.source), target=name(e.target))
            for e in chart.edges
        ),
    )


def changes(chart: sc.Chart, agent: Any) -> dict[str, tuple[sc.Chart, str, int, str]]:
    return {
        "a tool dropped": (
            chart.with_tools("research", agent.search_kb),
            "call_not_allowed",
            8,
            "research",
        ),
        "an edge dropped": (
            chart.with_edges(
                sc.Edge("research", "review"), sc.Edge("intake", "draft")
            ).without_edges("research->draft"),
            "edge_illegal",
            10,
            "research",
        ),
        "a guard added": (
            chart.with_edges(sc.Edge("draft", "review", guard=closed)),
            "guard_refused",
            14,
            "draft",
        ),
        "fewer steps": (
            chart.with_budget(sc.Budget(max_steps=10)),
            "budget_exhausted",
            11,
            "draft",
        ),
        "a state renamed": (renamed(chart, "draft", "compose"), "state_missing", 10, "research"),
        "a code state now a model state": (
            chart.replace_state(
                "review",
                sc.State(
                    "review",
                    reads=("draft",),
                    writes=("review_passed",),
                    instructions="Review the draft.",
                ),
            ),
            "needs_model",
            15,
            "review",
        ),
    }


async def test_each_change_to_the_agent_is_reported_with_its_kind_and_step(
    agent_files: Path,
) -> None:
    chart, agent = load_chart(f"{AGENTS}/support_triage.py:chart")
    store = sc.SQLiteStore(agent_files / "runs.db")

    async def approve(c: sc.Chart, run_id: str, s: sc.Store) -> None:
        await sc.approve(c, run_id, store=s, by="op")

    run = await record(chart, agent.demo_model(), store, {"ticket_id": "T-1001"}, approve)
    assert run.state == "done" and run.seq == 21
    try:
        for change, (changed, kind, seq, state) in changes(chart, agent).items():
            report = await sc.replay(changed, store=store, chart_name="support_triage")
            (verdict,) = report.verdicts
            assert (verdict.outcome, verdict.kind, verdict.seq, verdict.state) == (
                "diverge",
                kind,
                seq,
                state,
            ), (change, verdict.detail)
            assert verdict.agreed == seq - 1, change
        renames = {"draft": "compose"}
        back = await sc.replay(
            renamed(chart, "draft", "compose"),
            store=store,
            chart_name="support_triage",
            renames=renames,
        )
        assert back.counts() == {"agree": 1}
    finally:
        store.close()
