"""Replay recorded runs against a changed chart: the recorded model replies and tool
results are the cassette, and each run is said to agree or where and why it diverges."""

from statechart.rerun.cassette import Recording, Renames
from statechart.rerun.report import ReplayReport, replay, replay_one, selected
from statechart.rerun.verdict import KINDS, Kind, Verdict

__all__ = [
    "KINDS",
    "Kind",
    "Recording",
    "Renames",
    "ReplayReport",
    "Verdict",
    "replay",
    "replay_one",
    "selected",
]
