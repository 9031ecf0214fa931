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
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_to_end, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()  # or any other store: the same listing
            run = await start(chart, store=store, model=model)
            await run_to_end(chart, run, store=store, model=model)
            for s in await store.summaries(status="ended"):
                print(s.run_id, s.state, s.seq, s.spent.steps, s.spent.tokens, s.spent.cost_micros)
                assert (s.state, s.seq, s.spent.steps) == ("done", 2, 2)


        anyio.run(main)
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
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )


        async def main() -> None:
            store = MemoryStore()
            for n in range(5):
                await start(chart, store=store, model=ScriptedModel([]), run_id=f"run-{n}")
            page = await store.page(status="running", limit=2, offset=2)  # the second page of 2
            assert page.total == 5 and len(page.rows) == 2
            print(page.total, [s.run_id for s in page.rows])


        anyio.run(main)
        ```
    """

    rows: tuple[RunSummary, ...]
    total: int
    """Runs that match the filters, on every page."""
