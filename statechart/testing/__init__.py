"""A testing kit for charts: a pytest plugin (fixtures `memory_store`, `scripted_model`,
`statechart_cassette`; option `--statechart-record`), assertions that read well, and, in
`statechart.testing.strategies`, hypothesis strategies of adversarial model replies."""

from statechart.testing.assertions import (
    Ran,
    assert_called,
    assert_not_called,
    assert_path,
    assert_within_budget,
    calls_of,
    path_of,
)
from statechart.testing.cassettes import Cassette

__all__ = [
    "Cassette",
    "Ran",
    "assert_called",
    "assert_not_called",
    "assert_path",
    "assert_within_budget",
    "calls_of",
    "path_of",
]
