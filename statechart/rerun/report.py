"""Many recorded runs replayed against a chart: the verdicts, a summary, a table and JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from statechart.chart.chart import Chart
from statechart.errors import RunNotFoundError
from statechart.records.codec import to_dict
from statechart.records.record import Record
from statechart.records.summary import RunSummary
from statechart.rerun.cassette import Recording, Renames
from statechart.rerun.lockstep import Lockstep
from statechart.rerun.verdict import KINDS, Verdict
from statechart.store.base import Store


class ReplayReport(Record, frozen=True):
    """The verdict of every run replayed against `chart` (its `version`), in order.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, replay, reply, run_to_end, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )


        async def main() -> None:
            store = MemoryStore()
            model = ScriptedModel([reply(call("next_state", target="done"))])
            run = await run_to_end(chart, await start(chart, store=store, model=model),
                                   store=store, model=model)
            report = await replay(chart, store=store)  # against itself: it agrees
            assert report.ok and report.counts() == {"agree": 1}
            closed = chart.with_edges(Edge("greet", "done", guard=lambda facts: "closed"))
            (verdict,) = (await replay(closed, store=store)).verdicts  # the guard refuses now
            assert (verdict.outcome, verdict.kind, verdict.seq) == ("diverge", "guard_refused", 2)


        anyio.run(main)
        ```
    """

    chart: str
    version: str
    verdicts: tuple[Verdict, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no run diverges (runs that cannot be said do not count)."""
        return not any(v.outcome == "diverge" for v in self.verdicts)

    def counts(self) -> dict[str, int]:
        """Runs per outcome, a divergence counted by its kind (`diverge:edge_illegal`)."""
        found = Counter(
            f"diverge:{v.kind}" if v.outcome == "diverge" else v.outcome for v in self.verdicts
        )
        order = ["agree", *(f"diverge:{k}" for k in KINDS), "cannot_say"]
        return {k: found[k] for k in order if found[k]}

    def table(self) -> str:
        """The summary as text: a line per outcome, then a line per run that did not agree."""
        n = len(self.verdicts)
        lines = [f"replayed {n} run(s) against {self.chart} {self.version}", ""]
        lines.append(f"{'outcome':<32} {'runs':>6}")
        for key, count in self.counts().items():
            lines.append(f"{key:<32} {count:>6}")
        others = [v for v in self.verdicts if v.outcome != "agree"]
        if others:
            lines += ["", f"{'run':<34} {'kind':<18} {'seq':>4}  {'state':<20} detail"]
            for v in others:
                kind = v.kind or v.outcome
                seq = "" if v.seq is None else str(v.seq)
                lines.append(f"{v.run_id:<34} {kind:<18} {seq:>4}  {v.state or '':<20} {v.detail}")
        return "\n".join(lines)

    def json(self) -> str:
        """The report as JSON: the counts, and every verdict."""
        body: dict[str, Any] = {
            "chart": self.chart,
            "version": self.version,
            "runs": len(self.verdicts),
            "ok": self.ok,
            "counts": self.counts(),
            "verdicts": [to_dict(v) for v in self.verdicts],
        }
        return json.dumps(body, indent=2)


async def recording(store: Store, summary: RunSummary) -> Recording:
    """The recorded run behind `summary`, read from `store`."""
    base = await store.base(summary.run_id, at=0)
    events = await store.events(summary.run_id)
    return Recording(base=base, events=tuple(events), status=summary.status)


async def selected(
    store: Store,
    runs: Sequence[str] | None = None,
    *,
    chart_name: str | None = None,
    since: float | None = None,
) -> list[RunSummary]:
    """The runs to replay: those named (in the order given), else those of `chart_name`
    (every chart when None) created at or after `since` (epoch seconds), oldest first."""
    if runs:
        known = {s.run_id: s for s in await store.summaries()}
        missing = [r for r in runs if r not in known]
        if missing:
            raise RunNotFoundError(f"no run {', '.join(missing)} in this store; nothing replayed")
        return [known[r] for r in runs]
    found = await store.summaries(chart=chart_name)
    return [s for s in found if since is None or s.created_at >= since]


async def replay(
    chart: Chart,
    runs: Sequence[str] | None = None,
    *,
    store: Store,
    chart_name: str | None = None,
    since: float | None = None,
    renames: Mapping[str, str] | None = None,
    run_handlers: bool = False,
) -> ReplayReport:
    """Re-drive recorded runs against `chart`, their model replies, tool results and code
    states' decisions the cassette: no model, no tool, no handler is called (guards run).

    Args:
        chart: The chart to check, usually a changed version of the runs' own.
        runs: Run ids to replay; by default every run of `chart_name` (every run when
            that is None too).
        store: Where the recorded runs are.
        chart_name: Replay the runs of this chart (by name).
        since: Only runs created at or after this time (epoch seconds).
        renames: State paths of the recorded chart mapped onto `chart`'s
            (`{"research": "study"}`): the replay's migration for renamed states.
        run_handlers: Run code states' handlers again instead of serving what they
            decided in the record (to check a changed handler; they may do I/O).

    Returns:
        A verdict per run: `agree`, `diverge` (the kind, the seq and the state where it
        parts from its record) or `cannot_say` (why it could not be replayed).

    Raises:
        RunNotFoundError: A run named in `runs` is not in `store`.
    """
    mapping = Renames(renames)
    verdicts = []
    for summary in await selected(store, runs, chart_name=chart_name, since=since):
        if summary.parent_run is not None:
            verdicts.append(forked(summary))
            continue
        recorded = await recording(store, summary)
        verdicts.append(await replay_one(chart, recorded, mapping, run_handlers=run_handlers))
    return ReplayReport(chart=chart.name, version=chart.version, verdicts=tuple(verdicts))


def forked(summary: RunSummary) -> Verdict:
    """A fork starts from its parent's state, not from a first context: not replayed."""
    return Verdict(
        run_id=summary.run_id,
        outcome="cannot_say",
        detail=f"run {summary.run_id} is a fork of {summary.parent_run}: replay the run it "
        "was forked from",
    )


async def replay_one(
    chart: Chart, recorded: Recording, renames: Renames, *, run_handlers: bool = False
) -> Verdict:
    """The verdict of one recorded run replayed against `chart`."""
    return await Lockstep(chart, recorded, renames, run_handlers=run_handlers).run()
