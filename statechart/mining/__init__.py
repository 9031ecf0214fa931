"""Mining charts from loop traces: matrices, rare edges, repeats, proposals, shadow, drift."""

from .drift import Drift, EdgeDrift, SourceDrift, chi2_sf, drift, holm
from .matrix import Edge, Mined, Repeat, mine, state_visits, transition_counts
from .propose import Phase, Proposal, propose
from .shadow import Refusal, Shadow, ShadowRun, replay_all, run_shadowed
from .synthetic import Synthetic, synthetic_traces
from .traces import (
    END,
    START,
    Call,
    Trace,
    TraceFormatError,
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
