"""The names the framework reserves: implicit terminals, sub-states, the exit tool.

One home for them, so the validator, the engine, the prompt and the miners agree.
"""

from __future__ import annotations

from statechart.records.run import ROOT_LEVEL

ESCALATED = "escalated"
"""The terminal every non-terminal state may reach without an edge being written."""
EXHAUSTED = "exhausted"
"""The terminal a sub-chart ends in when its budget runs out; its parent maps it."""
CANCELLED = "cancelled"
"""The root terminal `cancel()` ends a run in."""
IMPLICIT = (ESCALATED, EXHAUSTED)
"""Terminals every chart has whether or not it lists them."""
SUBSTATES = ("think", "act", "approve")
"""The built-in sub-states of every model state."""
ROOT = ROOT_LEVEL
"""The root chart's budget level, by name: in ledgers, `Event.exhausted` and spans."""
RESERVED = (*SUBSTATES, CANCELLED, ROOT)
"""Names no user state may take."""
NEXT_STATE = "next_state"
"""The tool a model calls to leave its state."""
