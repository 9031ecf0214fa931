"""One line of a run listing: what `statechart runs` and any dashboard show of a run, live.

Read from the run's indexed columns and its last event (which carries the state and the
whole run's spending after it), never from a snapshot that may be written behind.
"""

from __future__ import annotations

from statechart.records.record import Record
from statechart.records.run import Status
from statechart.records.spent import ZERO, Spent


class RunSummary(Record, frozen=True):
    """A stored run as a listing shows it: where it is now and what it has spent.

    Example:
        ```python
        # in async code, with any store
        for s in await store.summaries(status="running"):
            print(s.run_id, s.state, s.seq, s.spent.steps, s.spent.tokens, s.spent.cost_micros)
        ```
    """

    run_id: str
    chart: str
    """The chart's name."""
    status: Status
    """Exact: every change of status writes the run's row."""
    state: str
    """The state its last event left it in."""
    seq: int
    """Its last event's seq."""
    spent: Spent = ZERO
    """What the whole run has spent, as of its last event."""
    reason: str = ""
    """Why it waits or how it ended (empty while running)."""
    created_at: float = 0.0
    updated_at: float | None = None
    """When its last event happened (None before its first)."""
    parent_run: str | None = None
    """The run it was forked from."""
    blocked: str | None = None
    """Why no worker will drive it (its chart failed to load too often), when blocked."""
    wake: float | None = None
    """While `sleeping` or `waiting`: when its next timer is due (epoch seconds): a failed
    call's next attempt, or an `after=` edge."""


class RunPage(Record, frozen=True):
    """One page of a run listing, newest first, and how many runs match in all.

    Example:
        ```python
        # in async code, with any store: the second page of 50 waiting runs
        page = await store.page(status="waiting", limit=50, offset=50)
        print(page.total, [s.run_id for s in page.rows])
        ```
    """

    rows: tuple[RunSummary, ...]
    total: int
    """Runs that match the filters, on every page."""
