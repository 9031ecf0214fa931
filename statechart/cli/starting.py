"""Starting runs from the command line: `submit` stores a run ready to drive, and `run`
(cli/runs.py) starts one the same way before driving it."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from statechart import failpoints
from statechart.chart.chart import Chart
from statechart.cli.app import (
    DB_DEFAULT,
    Db,
    ModelOpt,
    _close,
    _model,
    _object,
    _open,
    _run,
    _trace,
    _use,
    app,
)
from statechart.errors import ConflictError, LoadError, RunNotFoundError
from statechart.io.loading import builds_by_function, chart_source, load_chart
from statechart.models.base import Model
from statechart.records.run import Run
from statechart.runtime.api import start
from statechart.store.base import Store
from statechart.store.postgres import PostgresStore
from statechart.store.queue import RunQueue

Target = Annotated[
    str, typer.Argument(help="PATH.py:NAME or MODULE:NAME of the chart, or a registered NAME.")
]
InputOpt = Annotated[str | None, typer.Option("--input", help="The context, as JSON.")]
InputFileOpt = Annotated[Path | None, typer.Option("--input-file", help="JSON file.")]


async def started(
    target: str,
    input: str | None,
    input_file: Path | None,
    db: str,
    model: str | None,
    run_id: str | None,
    *,
    existing_ok: bool,
    queued: bool = False,
) -> tuple[Chart, Store, Model, Run]:
    """Check chart, input and model, then store the chart's source and a new run (or, when
    `existing_ok`, find the run `run_id` names, if it exists with the same chart); `queued`
    makes a new run on a PostgreSQL store ready for workers as it is created."""
    _use(db)
    chart, module = load_chart(target)
    text = input_file.read_text() if input_file else input or "{}"
    option = "--input-file" if input_file else "--input"
    context = _object(text, option)
    _known_fields(chart, context, option)
    chart.context.model_validate(context)  # every check before the store file exists
    chosen = _model(model, module)
    _trace()
    store = _open(db)
    if queued and isinstance(store, PostgresStore):
        if builds_by_function(target, module):
            raise LoadError(
                f"{target} names a function; a worker loads only Chart objects from files: "
                "name the Chart (e.g. PATH.py:chart), or register the function in a package"
            )
        store.queue_created = True  # ready in the transaction that creates it
    if existing_ok and run_id is not None:
        try:
            found = (await store.load(run_id)).snapshot
        except RunNotFoundError:
            found = None
        if found is not None:
            if found.chart != chart.name:
                raise ConflictError(
                    f"run {run_id} exists and is a run of {found.chart}, not {chart.name}; "
                    "choose another --run-id"
                )
            return chart, store, chosen, found
    # the chart's source first: a kill between the two writes leaves no run behind
    await store.save_chart(chart.version, chart.describe(), chart_source(target))
    failpoints.hit("cli.run.chart_saved")
    first = await start(chart, store=store, model=chosen, context=context, run_id=run_id)
    return chart, store, chosen, first


@app.command()
def submit(
    target: Target,
    input: InputOpt = None,
    input_file: InputFileOpt = None,
    db: Db = DB_DEFAULT,
    model: ModelOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Choose the id; submitting it again is a no-op.")
    ] = None,
) -> None:
    """Store a run ready to drive, without driving it; print its id.

    The same --run-id twice returns the first run. On a PostgreSQL store the run is queued
    for `statechart worker`; on SQLite, drive it with `statechart resume RUN_ID`.

    Example: statechart submit agents/refund_desk.py:chart --input '{"order_id": "A-7"}'
    """

    async def go() -> None:
        _, store, _, found = await started(
            target, input, input_file, db, model, run_id, existing_ok=True, queued=True
        )
        queued = False
        if isinstance(store, PostgresStore):  # again for a run submitted before: a no-op
            queued = await RunQueue(store).enqueue(found.run_id)
        await _close(store)
        typer.echo(found.run_id)
        how = f"statechart resume {shlex.quote(found.run_id)} --db {shlex.quote(db)}"
        typer.echo(
            "submitted; a `statechart worker` on this database drives it (or: " + how + ")"
            if queued
            else f"submitted; drive it with: {how}",
            err=True,
        )

    _run(go)


def _known_fields(chart: Chart, context: dict[str, Any], option: str) -> None:
    """Refuse keys the chart's context does not have (a misspelt field would otherwise be
    dropped, and the run go on without it), unless the context type allows extras."""
    fields = chart.context.model_fields
    unknown = sorted(set(context) - set(fields))
    if unknown and chart.context.model_config.get("extra") != "allow":
        raise LoadError(
            f"{option} names {', '.join(unknown)}, which chart {chart.name}'s context does not "
            f"have; it takes: {', '.join(fields) or '(no fields)'}"
        )
