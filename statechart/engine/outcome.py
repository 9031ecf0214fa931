"""How a run came out, for callers that must tell `done` from `escalated` (the CLI's exit
codes): a fact of the chart (a terminal's declared `outcome`) and the run's status."""

from __future__ import annotations

from typing import Literal

from statechart.chart.names import CANCELLED, IMPLICIT
from statechart.engine.tables import CompiledChart
from statechart.records.run import Run

RunOutcome = Literal["running", "waiting", "sleeping", "success", "failure", "cancelled"]


def outcome_of(compiled_chart: CompiledChart, run: Run) -> RunOutcome:
    """`success` or `failure` for an ended run (`escalated`, `exhausted` and terminals
    declared `outcome="failure"` are failures), `cancelled`, or its live status."""
    if run.status != "ended":
        return run.status
    owner, state = compiled_chart.owner_state(run.state)
    name = owner.rpartition(".")[2]
    if name == CANCELLED:
        return "cancelled"
    if name in IMPLICIT or state.outcome == "failure":
        return "failure"
    return "success"
