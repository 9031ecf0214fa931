"""The support-triage agent with deep_research's investigation as its research step.

Neither agent's file is edited: this one loads both (agents/ is not an importable
package, so by path), replaces triage's `research` state with the investigation
sub-chart running on its own `Notes` context, and maps the ticket in and the findings
out. Run it offline with `statechart run agents/triage_with_research.py:chart --input
'{"ticket_id": "T-1001"}'` (it waits twice: to buy a report, to send the reply).
"""

from __future__ import annotations

from pathlib import Path

from statechart import FunctionModel, Reply, Request, State
from statechart.io.loading import load_chart
from statechart.models import register

HERE = Path(__file__).resolve().parent
triage, support = load_chart(f"{HERE}/support_triage.py:chart")
_, deep = load_chart(f"{HERE}/deep_research.py:chart")

chart = triage.replace_state(
    "research",
    State(
        "research",
        kind="chart",
        chart=deep.investigation,
        input={"question": "ticket"},
        output={"findings": "findings"},
    ),
    exits={"done": "draft"},
).with_name("triage_with_research")


def demo_policy(request: Request) -> Reply:
    """Both agents' offline policies: deep research's inside the investigation."""
    if request.state.startswith("research."):
        return deep.demo_policy(request)
    return support.demo_policy(request)


def demo_model(spec: str = "demo:triage_with_research") -> FunctionModel:
    """The offline stand-in model; registered so `resume` can rebuild it from a run."""
    return FunctionModel(demo_policy, spec=spec)


register("demo:triage_with_research", demo_model)
