"""The three-region reference agent through the CLI: three angles researched at once, each
region's notes written back at the join, the tool cap around them shared."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import ROOT, cli

TOPICS = f"{ROOT}/agents/research_topics.py:chart"


def test_three_regions_research_at_once_and_the_report_reads_each(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", TOPICS, "--input", '{"question": "tides"}').stdout
    assert "ended in 'done'" in out
    assert "research -> report.think" in out and "all 3 regions ended" in out
    run_id = out.split()[1]
    data = json.loads(cli(tmp_path, "show", run_id, "--json").stdout)
    run, events = data["run"], data["events"]
    for angle in ("history", "economics", "ecology"):
        assert run["context"][angle] == f"{angle}: 3 sources on 'tides {angle}'"
        assert any(e["source"] == f"research.{angle}.survey.act" for e in events)
    assert run["ledger"]["research"]["tool_calls"] == 3
    assert run["context"]["answer"].startswith("From three angles: history: 3 sources")
    (join,) = [e for e in events if e["trigger"] == "join"]
    inside = [e["seq"] for e in events if e["source"].startswith("research.")]
    assert join["seq"] == max(inside) + 1 and run["regions"] == {}
