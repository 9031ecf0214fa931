"""The run as it is now: its last snapshot with the events after it folded in.

Stores write a running run's snapshot behind its events (docs/persistence.md), so
`Store.load` returns the snapshot and the tail; only the chart can fold the tail.
"""

from __future__ import annotations

from statechart.chart.chart import Chart
from statechart.engine.replay import replay
from statechart.engine.tables import compiled
from statechart.errors import ChartChangedError, CorruptRowError
from statechart.records.run import Run
from statechart.store.base import Loaded, Store


async def load_run(chart: Chart, run_id: str, *, store: Store) -> Run:
    """The stored run `run_id` as it is now, its tail folded with `chart`.

    Args:
        chart: The chart the run is stored under (the same version).
        run_id: The run.
        store: Where it is stored.

    Returns:
        The run after its last stored event.

    Raises:
        RunNotFoundError: No such run.
        ChartChangedError: The run has events after its snapshot and was stored under
            another chart version (resume it with its own chart first).

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, drive, load_run, reply, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            async for record in drive(chart, run, store=store, model=model):
                # what any other task or process sees while this one drives the run
                now = await load_run(chart, run.run_id, store=store)
                print(now.state, now.seq, now.ledger["root"].steps)
                assert (now.state, now.seq) == (record.run.state, record.run.seq)


        anyio.run(main)
        ```
    """
    return current(chart, await store.load(run_id))


def current(chart: Chart, loaded: Loaded) -> Run:
    """`loaded`'s snapshot with its tail folded in (the snapshot itself when none)."""
    snapshot = loaded.snapshot
    if not loaded.tail:
        return snapshot
    if snapshot.chart_version != chart.version:
        raise ChartChangedError(
            f"run {snapshot.run_id} has {len(loaded.tail)} events after its last snapshot "
            f"(seq {snapshot.seq}) under chart version {snapshot.chart_version}, but this "
            f"chart is version {chart.version}: only its own chart can fold them; resume it "
            "with that chart first (which stores its snapshot), then migrate"
        )
    try:
        return replay(compiled(chart), snapshot, loaded.tail)
    except (ValueError, KeyError) as exc:
        raise CorruptRowError(
            f"the events of run {snapshot.run_id} after seq {snapshot.seq} do not fold onto "
            f"its snapshot ({exc}); restore the file from a backup or fork the run before "
            "that seq"
        ) from None
