"""Inert, frozen chart definitions: states, edges, guards, budgets, tools, reserved names.

A `Chart` is validated when it is built; the engine compiles it (`engine.compiled`).
"""

from statechart.chart.budget import Budget
from statechart.chart.chart import Chart, Decision, Edge, EmptyContext, Facts, Guard, State
from statechart.chart.names import CANCELLED, ESCALATED, EXHAUSTED, NEXT_STATE
from statechart.chart.tools import Tool, fingerprint, tool

__all__ = [
    "CANCELLED",
    "ESCALATED",
    "EXHAUSTED",
    "NEXT_STATE",
    "Budget",
    "Chart",
    "Decision",
    "Edge",
    "EmptyContext",
    "Facts",
    "Guard",
    "State",
    "Tool",
    "fingerprint",
    "tool",
]
