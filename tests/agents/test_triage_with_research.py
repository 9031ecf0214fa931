"""The derived agent (agents/triage_with_research.py) through the real CLI: support triage
with deep research's investigation on its own context, run offline to `done`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import OK, ROOT, TICKET, WAITING, run_cli, waiting_id

DERIVED = f"{ROOT}/agents/triage_with_research.py:chart"


def test_the_derived_agent_runs_to_done_and_draws_the_nested_investigation(tmp_path: Path) -> None:
    out = run_cli(tmp_path, "run", DERIVED, "--input", TICKET, code=WAITING).stdout
    assert "waiting in 'research.sources.fetch.approve'" in out  # buying the report
    run_id = waiting_id(out)
    shown = json.loads(run_cli(tmp_path, "show", run_id, "--json").stdout)
    assert shown["run"]["contexts"]["research"]["question"].startswith("I was charged twice")
    out = run_cli(tmp_path, "approve", run_id, code=WAITING).stdout
    assert "waiting in 'send.approve'" in out
    out = run_cli(tmp_path, "approve", run_id, code=OK).stdout
    assert f"run {run_id}: ended in 'done'" in out
    shown = json.loads(run_cli(tmp_path, "show", run_id, "--json").stdout)
    assert shown["run"]["context"]["findings"] == "rising, per a report"
    assert shown["run"]["contexts"] == {}
    drawing = run_cli(tmp_path, "diagram", DERIVED).stdout
    assert 'state "research" as s_research {' in drawing
    assert "s_research__survey --> s_research__sources" in drawing
    assert run_cli(tmp_path, "check", DERIVED).stdout.startswith("ok: triage_with_research")
