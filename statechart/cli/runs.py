"""`statechart run, runs, show, resume, approve, reject, cancel, fork, check, diagram`."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from statechart.chart.chart import Chart
from statechart.cli.app import (
    _STOP,
    DB_DEFAULT,
    Db,
    ModelOpt,
    _chart_of,
    _existing,
    _model,
    _object,
    _run,
    _use,
    app,
)
from statechart.engine.tables import compiled
from statechart.errors import LoadError
from statechart.io import audit, diagram
from statechart.io.loading import load_chart
from statechart.models.base import Model
from statechart.records.run import Run, Status, Step
from statechart.records.spent import spent_of
from statechart.runtime.api import approve as approve_run
from statechart.runtime.api import cancel as cancel_run
from statechart.runtime.api import fork as fork_run
from statechart.runtime.api import reject as reject_run
from statechart.runtime.api import start
from statechart.runtime.driver import drive
from statechart.store.sqlite import SQLiteStore


def _progress(record: Step, chart: Chart) -> None:
    """One line per transition: the step, the move, and every budget around the state the
    move left, as spent (left)."""
    e, run = record.event, record.run
    parts = []
    for level in compiled(chart).levels_of(e.source):
        spent = run.ledger.get(level.path)
        used = {kind: spent_of(spent, kind) if spent else 0 for kind in level.caps}
        caps = "  ".join(
            f"{kind} {used[kind]} ({max(cap - used[kind], 0)} left)"
            for kind, cap in level.caps.items()
        )
        parts.append(f"{level.path}: {caps}" if level.path else caps)
    note = e.refused or e.reason or ""
    budget = " | ".join(parts)
    typer.echo(f"{e.seq:>4}  {e.source} -> {e.target}  [{budget}]" + (f"  {note}" if note else ""))


async def _drive(
    chart: Chart, run_id: str, store: SQLiteStore, model: Model, *, resuming: bool
) -> Run:
    last = None
    async with contextlib.aclosing(
        drive(chart, run_id, store=store, model=model, resuming=resuming)
    ) as records:
        async for record in records:
            _progress(record, chart)
            last = record.run
            if _STOP["asked"]:  # Ctrl-C: the step is stored; stop before the next one
                break
    return last if last is not None else await store.load(run_id)


def _outcome(run: Run, db: Path) -> None:
    why = run.reason if run.reason and not run.reason.startswith("ended in") else ""
    typer.echo(f"run {run.run_id}: {run.status} in '{run.state}'" + (f" ({why})" if why else ""))
    if run.status == "waiting":
        base = os.environ.get("OPENAI_BASE_URL") if run.model.startswith("openai:") else None
        cmd = f"statechart --base-url {base}" if base else "statechart"
        typer.echo(
            f"approve: {cmd} approve {run.run_id} --db {db}\n"
            f"reject:  {cmd} reject {run.run_id} --reason '...' --db {db}"
        )


@app.command()
def run(
    target: Annotated[str, typer.Argument(help="PATH.py:CHART of the agent.")],
    input: Annotated[str | None, typer.Option("--input", help="The context, as JSON.")] = None,
    input_file: Annotated[Path | None, typer.Option("--input-file", help="JSON file.")] = None,
    db: Db = DB_DEFAULT,
    model: ModelOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Choose the id.")] = None,
) -> None:
    """Start a run and drive it until it ends or waits for a human.

    Example: statechart run agents/support_triage.py:chart --input '{"ticket_id": "T-1001"}'
    """

    async def go() -> None:
        _use(db)
        chart, module = load_chart(target)
        text = input_file.read_text() if input_file else input or "{}"
        context = _object(text, "--input-file" if input_file else "--input")
        store = SQLiteStore(db)
        chosen = _model(model, module)
        first = await start(chart, store=store, model=chosen, context=context, run_id=run_id)
        path, _, name = target.rpartition(":")
        await store.save_chart(chart.version, chart.describe(), f"{Path(path).resolve()}:{name}")
        typer.echo(f"run {first.run_id} of {chart.name} on {db}, model {chosen.spec}")
        _outcome(await _drive(chart, first.run_id, store, chosen, resuming=False), db)
        store.close()

    _run(go)


@app.command()
def runs(
    db: Db = DB_DEFAULT,
    status: Annotated[str | None, typer.Option(help="running, waiting or ended")] = None,
    chart: Annotated[str | None, typer.Option(help="Only runs of this chart name.")] = None,
) -> None:
    """List stored runs. Example: statechart runs --status waiting"""
    if status not in (None, "running", "waiting", "ended"):
        typer.echo(f"error: --status {status}: use running, waiting or ended", err=True)
        raise typer.Exit(1)

    async def go() -> None:
        store = _existing(db)
        found: Status | None = status  # type: ignore[assignment]
        for r in await store.runs(status=found, chart=chart):
            typer.echo(f"{r.run_id}  {r.chart:<20} {r.status:<8} {r.state:<32} seq {r.seq}")
        store.close()

    _run(go)


@app.command()
def show(
    run_id: str,
    db: Db = DB_DEFAULT,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """The audit timeline of a run. Example: statechart show RUN_ID --json"""

    async def go() -> None:
        store = _existing(db)
        found, events = await store.load(run_id), await store.events(run_id)
        if as_json:
            t = audit.totals(events)
            typer.echo(
                json.dumps(
                    {
                        "run": found.model_dump(mode="json"),
                        "events": audit.timeline(events),
                        "totals": t.model_dump(),
                    },
                    indent=2,
                )
            )
        else:
            typer.echo(audit.render(found, events))
        store.close()

    _run(go)


@app.command()
def resume(run_id: str, db: Db = DB_DEFAULT, model: ModelOpt = None) -> None:
    """Drive a stored run on from where it is. Example: statechart resume RUN_ID"""

    async def go() -> None:
        store = _existing(db)
        found = await store.load(run_id)
        chart, module = await _chart_of(store, found)
        chosen = _model(model, module, found)
        _outcome(await _drive(chart, run_id, store, chosen, resuming=True), db)
        store.close()

    _run(go)


@app.command()
def approve(
    run_id: str,
    db: Db = DB_DEFAULT,
    by: Annotated[str, typer.Option(help="Who approves.")] = "cli",
    note: Annotated[str, typer.Option(help="Why.")] = "",
    edit: Annotated[str | None, typer.Option(help="JSON edits to the pending call.")] = None,
    no_resume: Annotated[bool, typer.Option("--no-resume", help="Only record it.")] = False,
    model: ModelOpt = None,
) -> None:
    """Approve what a run waits for, then resume it.

    Example: statechart approve RUN_ID --note 'checked' --edit '{"amount": 15}'
    """

    async def go() -> None:
        store = _existing(db)
        found = await store.load(run_id)
        chart, module = await _chart_of(store, found)
        edits = _object(edit, "--edit") if edit else None
        chosen = None if no_resume else _model(model, module, found)  # fail before deciding
        await approve_run(chart, run_id, store=store, by=by, note=note, edits=edits)
        typer.echo(f"approved by {by}")
        if chosen is not None:
            _outcome(await _drive(chart, run_id, store, chosen, resuming=True), db)
        store.close()

    _run(go)


@app.command()
def reject(
    run_id: str,
    reason: Annotated[str, typer.Option(help="Why (the model hears it).")],
    db: Db = DB_DEFAULT,
    by: Annotated[str, typer.Option(help="Who rejects.")] = "cli",
) -> None:
    """Reject what a run waits for. Example: statechart reject RUN_ID --reason 'tone'"""

    async def go() -> None:
        store = _existing(db)
        chart, _ = await _chart_of(store, await store.load(run_id))
        record = await reject_run(chart, run_id, store=store, by=by, reason=reason)
        typer.echo(
            f"rejected by {by}; now {record.run.status} in '{record.run.state}'; "
            f"continue with: statechart resume {run_id} --db {db}"
        )
        store.close()

    _run(go)


@app.command()
def cancel(
    run_id: str,
    reason: Annotated[str, typer.Option(help="Why.")],
    db: Db = DB_DEFAULT,
    by: Annotated[str, typer.Option(help="Who cancels.")] = "cli",
) -> None:
    """End a run in `cancelled`. Example: statechart cancel RUN_ID --reason 'duplicate'"""

    async def go() -> None:
        store = _existing(db)
        chart, _ = await _chart_of(store, await store.load(run_id))
        await cancel_run(chart, run_id, store=store, reason=reason, by=by)
        typer.echo(f"run {run_id} cancelled")
        store.close()

    _run(go)


@app.command()
def fork(
    run_id: str,
    at: Annotated[int, typer.Option("--at", help="The seq to fork after.")],
    db: Db = DB_DEFAULT,
) -> None:
    """Start a new run from a run's state after event SEQ. Example: statechart fork RUN --at 4"""

    async def go() -> None:
        store = _existing(db)
        found = await store.load(run_id)
        chart, _ = await _chart_of(store, found)
        child = await fork_run(chart, run_id, at, store=store)
        typer.echo(
            f"run {child.run_id} forked from {run_id} at seq {at}, in '{child.state}'; "
            f"drive it with: statechart resume {child.run_id} --db {db}"
        )
        store.close()

    _run(go)


@app.command()
def check(target: Annotated[str, typer.Argument(help="PATH.py:CHART")]) -> None:
    """Validate a chart (as a lint). Example: statechart check agents/support_triage.py:chart"""

    async def go() -> None:
        chart, _ = load_chart(target)
        compiled_chart = compiled(chart)
        typer.echo(
            f"ok: {chart.name} version {chart.version}: {len(compiled_chart.nodes)} states, "
            f"{len(compiled_chart.transitions)} transitions"
        )

    _run(go)


@app.command("diagram")
def draw(
    target: Annotated[str | None, typer.Argument(help="PATH.py:CHART")] = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Mark this run.")] = None,
    db: Db = DB_DEFAULT,
) -> None:
    """Print a Mermaid diagram. Example: statechart diagram agents/support_triage.py:chart"""

    async def go() -> None:
        found: Run | None = None
        events: list[Any] = []
        if run_id is not None:
            store = _existing(db)
            found, events = await store.load(run_id), await store.events(run_id)
            chart = (await _chart_of(store, found))[0] if target is None else load_chart(target)[0]
            store.close()
        elif target is not None:
            chart = load_chart(target)[0]
        else:
            raise LoadError("give PATH.py:CHART, or --run RUN_ID")
        typer.echo(diagram.mermaid(chart, found, events), nl=False)

    _run(go)
