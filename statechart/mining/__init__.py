"""Mining charts from loop traces: matrices, rare edges, repeats, proposals, shadow, drift."""

from statechart.errors import TraceFormatError
from statechart.mining.drift import Drift, EdgeDrift, SourceDrift, chi2_sf, drift, holm
from statechart.mining.matrix import Edge, Mined, Repeat, mine, state_visits, transition_counts
from statechart.mining.propose import Phase, Proposal, propose
from statechart.mining.shadow import Refusal, Shadow, ShadowRun, replay_all, run_shadowed
from statechart.mining.synthetic import Synthetic, synthetic_traces
from statechart.mining.traces import (
    END,
    START,
    Call,
    Trace,
    read_jsonl,
    read_store,
    write_jsonl,
)

__all__ = [
    "END",
    "START",
    "Call",
    "Drift",
    "Edge",
    "EdgeDrift",
    "Mined",
    "Phase",
    "Proposal",
    "Refusal",
    "Repeat",
    "Shadow",
    "ShadowRun",
    "SourceDrift",
    "Synthetic",
    "Trace",
    "TraceFormatError",
    "chi2_sf",
    "drift",
    "holm",
    "mine",
    "propose",
    "read_jsonl",
    "read_store",
    "replay_all",
    "run_shadowed",
    "state_visits",
    "synthetic_traces",
    "transition_counts",
    "write_jsonl",
]
