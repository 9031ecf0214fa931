"""`statechart run, runs, show, resume, approve, reject, cancel, fork, check, diagram`."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shlex
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal

import typer
from msgspec.structs import replace

from statechart.chart.chart import Chart
from statechart.cli.app import (
    _STOP,
    DB_DEFAULT,
    ChartOpt,
    Db,
    ModelOpt,
    _chart_of,
    _close,
    _existing,
    _model,
    _object,
    _run,
    _trace,
    app,
)
from statechart.cli.exits import (
    CODES,
    OK,
    STATUS_STYLES,
    STYLES,
    USAGE_ERROR,
    error,
    say,
    terminal,
)
from statechart.cli.live import LiveView, json_line, step_line
from statechart.cli.starting import InputFileOpt, InputOpt, Target, started
from statechart.engine import compiled, outcome_of
from statechart.engine.timers import clock_time
from statechart.errors import LeaseHeldError, LoadError, StatechartError
from statechart.io import audit, diagram
from statechart.io.loading import load_chart
from statechart.models.base import Model
from statechart.records.codec import to_dict
from statechart.records.live import LiveEvent
from statechart.records.run import Run, Status, Step
from statechart.runtime.api import approve as approve_run
from statechart.runtime.api import cancel as cancel_run
from statechart.runtime.api import fork as fork_run
from statechart.runtime.api import reject as reject_run
from statechart.runtime.current import current, load_run
from statechart.runtime.driver import drive_to_end
from statechart.runtime.live import Callback, Sink, Tee
from statechart.runtime.relay import relay_for
from statechart.store.base import Store
from statechart.store.postgres import PostgresStore
from statechart.store.queue import RunQueue

View = Literal["auto", "json"]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="One JSON object per line for each live event.")
]


async def _drive(
    chart: Chart, run_id: str, store: Store, model: Model, *, resuming: bool, view: View = "auto"
) -> Run:
    """Drive the run, showing it: live on a terminal (state, budget bars, the model's text
    as it streams), one JSON line per live event with `json`, else a line per step."""
    console = terminal()
    live: LiveView | None = None
    shown: Callable[[LiveEvent], None] | None = None
    if view == "json":

        def shown(event: LiveEvent) -> None:
            sys.stdout.write(json_line(event) + "\n")
            sys.stdout.flush()

    elif console is not None:
        live = LiveView(chart, (await store.load(run_id)).snapshot, console)
        shown = live.on

    def each(record: Step) -> bool:
        if shown is None:
            typer.echo(step_line(record, chart))
        return bool(_STOP["asked"])  # Ctrl-C: the step is stored; stop before the next one

    compiled(chart)
    gc.collect()
    gc.freeze()  # this process's modules and chart outlive the run: keep them out of the
    # cyclic GC's passes (docs/performance.md: its full passes cost ~1/3 of a transition)
    relay = relay_for(store)  # an inspector elsewhere on this machine sees it live too
    sinks: list[Sink] = [s for s in (relay, Callback(shown) if shown else None) if s]
    try:
        with live if live is not None else contextlib.nullcontext():
            last = await drive_to_end(
                chart,
                run_id,
                store=store,
                model=model,
                resuming=resuming,
                each=each,
                on=Tee(*sinks) if sinks else None,
            )
    finally:
        if relay is not None:
            relay.close()
    return last if last is not None else await load_run(chart, run_id, store=store)


async def _live(store: Store, run_id: str) -> Run:
    """The run as it is now: folded with its chart when the snapshot is behind and the
    chart loads; else the snapshot with the live state and seq of its last event."""
    loaded = await store.load(run_id)
    if not loaded.tail:
        return loaded.snapshot
    with contextlib.suppress(StatechartError):
        return current((await _chart_of(store, loaded.snapshot))[0], loaded)
    return replace(loaded.snapshot, state=loaded.state, seq=loaded.seq)


def _finish(chart: Chart, run: Run, db: str, *, err: bool = False) -> int:
    """Print how the run came out (and, when it waits, how to decide), on stderr with
    `err` (stdout holds JSON lines then); its exit code."""
    outcome = outcome_of(compiled(chart), run)
    why = run.reason if run.reason and not run.reason.startswith("ended in") else ""
    say(
        f"run {run.run_id}: {run.status} in '{run.state}'" + (f" ({why})" if why else ""),
        STYLES[outcome],
        err=err,
    )
    if run.status == "sleeping" and run.wake is not None:
        say(
            f"resume once it is due ({clock_time(run.wake)}): statechart resume "
            f"{shlex.quote(run.run_id)} --db {shlex.quote(str(db))}",
            err=err,
        )
    if run.status == "waiting":
        base = os.environ.get("OPENAI_BASE_URL") if run.model.startswith("openai:") else None
        cmd = f"statechart --base-url {shlex.quote(base)}" if base else "statechart"
        rid, where = shlex.quote(run.run_id), shlex.quote(str(db))
        say(
            f"approve: {cmd} approve {rid} --db {where}\n"
            f"reject:  {cmd} reject {rid} --reason '...' --db {where}",
            err=err,
        )
    return CODES[outcome]


@app.command()
def run(
    target: Target,
    input: InputOpt = None,
    input_file: InputFileOpt = None,
    db: Db = DB_DEFAULT,
    model: ModelOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Choose the id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a run and drive it until it ends or waits for a human.

    On a terminal it shows the run live: its state, a bar per budget cap and the model's
    text as it streams; piped, a line per step; with --json, one JSON object per line
    for each live event (call_started, token, progress, step, waiting, ended).

    Example: statechart run agents/support_triage.py:chart --input '{"ticket_id": "T-1001"}'

    Tracing: set OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 (Jaeger, Phoenix or
    any OpenTelemetry collector) and optionally OTEL_SERVICE_NAME; the run, its approval
    and its resume are then one trace, from any process. OTEL_TRACES_EXPORTER=console
    prints spans; OTEL_SDK_DISABLED=true turns it all off.
    """

    async def go() -> int:
        chart, store, chosen, first = await started(
            target, input, input_file, db, model, run_id, existing_ok=False
        )
        typer.echo(f"run {first.run_id} of {chart.name} on {db}, model {chosen.spec}", err=as_json)
        view: View = "json" if as_json else "auto"
        last = await _drive(chart, first.run_id, store, chosen, resuming=False, view=view)
        code = _finish(chart, last, db, err=as_json)
        await _close(store)
        return code

    raise typer.Exit(_run(go))


@app.command()
def runs(
    db: Db = DB_DEFAULT,
    status: Annotated[str | None, typer.Option(help="running, waiting, sleeping or ended")] = None,
    chart: Annotated[str | None, typer.Option(help="Only runs of this chart name.")] = None,
    search: Annotated[str | None, typer.Option(help="Only runs whose id contains this.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.", min=1)] = 100,
    offset: Annotated[int, typer.Option(help="Skip this many of the newest.", min=0)] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """List stored runs, newest first. Example: statechart runs --status waiting"""
    if status not in (None, "running", "waiting", "sleeping", "ended"):
        error(f"--status {status!r}: use running, waiting, sleeping or ended")
        raise typer.Exit(USAGE_ERROR)

    async def go() -> None:
        store = _existing(db)
        found: Status | None = status  # type: ignore[assignment]
        page = await store.page(
            status=found, chart=chart, search=search, limit=limit, offset=offset
        )
        listed = page.rows
        await _close(store)
        if page.total > offset + len(listed) or offset:
            typer.echo(
                f"runs {offset + 1 if listed else offset}-{offset + len(listed)} of "
                f"{page.total}, newest first (--limit, --offset for more)",
                err=True,
            )
        if as_json:
            rows = [
                {k: getattr(r, k) for k in ("run_id", "chart", "status", "state", "seq")}
                | {"reason": r.reason, "created_at": r.created_at, "updated_at": r.updated_at}
                | {"steps": r.spent.steps, "tokens": r.spent.tokens}
                | {"cost_micros": r.spent.cost_micros, "blocked": r.blocked, "wake": r.wake}
                for r in listed
            ]
            typer.echo(json.dumps(rows, indent=2))
            return
        width = max([32, *(len(r.run_id) for r in listed)])
        say(
            f"{'RUN':<{width}}  {'CHART':<20} {'STATUS':<8} {'STATE':<32} {'SEQ':>5} "
            f"{'STEPS':>5} {'TOKENS':>8} {'COST $':>10}",
            "bold",
        )
        for r in listed:
            shown = "blocked" if r.blocked else r.status
            say(
                f"{r.run_id:<{width}}  {r.chart:<20} {shown:<8} {r.state:<32} {r.seq:>5} "
                f"{r.spent.steps:>5} {r.spent.tokens:>8} {r.spent.cost_micros / 1e6:>10.6f}"
                + (f"  {r.blocked}" if r.blocked else "")
                + (f"  wakes {clock_time(r.wake)}" if r.wake is not None else ""),
                STATUS_STYLES[shown],
            )

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
        found, events = await _live(store, run_id), await store.events(run_id)
        tries, problem, blocked = (
            await RunQueue(store).blocked(run_id)
            if isinstance(store, PostgresStore)
            else (0, None, False)
        )
        if as_json:
            t = audit.totals(events)
            typer.echo(
                json.dumps(
                    {
                        "run": to_dict(found),
                        "events": audit.timeline(events),
                        "totals": to_dict(t),
                        "blocked": problem if blocked else None,
                    },
                    indent=2,
                )
            )
        else:
            typer.echo(audit.render(found, events))
            if blocked:
                say(
                    f"blocked after {tries} tries: {problem}\nonce its chart loads: "
                    f"statechart unblock {shlex.quote(run_id)} --db {shlex.quote(db)}",
                    "red",
                )
        await _close(store)

    _run(go)


@app.command()
def resume(
    run_id: str,
    db: Db = DB_DEFAULT,
    model: ModelOpt = None,
    chart: ChartOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Drive a stored run on from where it is, shown as `run` shows it.

    Example: statechart resume RUN_ID --json"""

    async def go() -> int:
        store = _existing(db)
        loaded = await store.load(run_id)
        charted, module = await _chart_of(store, loaded.snapshot, chart)
        _trace()
        chosen = _model(model, module, current(charted, loaded))
        view: View = "json" if as_json else "auto"
        last = await _drive(charted, run_id, store, chosen, resuming=True, view=view)
        code = _finish(charted, last, db, err=as_json)
        await _close(store)
        return code

    raise typer.Exit(_run(go))


RegionOpt = Annotated[
    str | None,
    typer.Option(help="In a parallel state: the waiting region (when several wait)."),
]


@app.command()
def approve(
    run_id: str,
    db: Db = DB_DEFAULT,
    by: Annotated[str, typer.Option(help="Who approves.")] = "cli",
    note: Annotated[str, typer.Option(help="Why.")] = "",
    edit: Annotated[str | None, typer.Option(help="JSON edits to the pending call.")] = None,
    no_resume: Annotated[bool, typer.Option("--no-resume", help="Only record it.")] = False,
    model: ModelOpt = None,
    given: ChartOpt = None,
    region: RegionOpt = None,
) -> None:
    """Approve what a run waits for, then resume it.

    Example: statechart approve RUN_ID --note 'checked' --edit '{"amount": 15}'
    """

    async def go() -> int:
        store = _existing(db)
        loaded = await store.load(run_id)
        chart, module = await _chart_of(store, loaded.snapshot, given)
        _trace()
        found = current(chart, loaded)
        edits = _object(edit, "--edit") if edit else None
        chosen = None if no_resume else _model(model, module, found)  # fail before deciding
        await approve_run(chart, run_id, store=store, by=by, note=note, edits=edits, region=region)
        typer.echo(f"approved by {by}")
        if chosen is None:  # only recorded: the command drove nothing
            await _close(store)
            return OK
        try:
            last = await _drive(chart, run_id, store, chosen, resuming=True)
        except LeaseHeldError as exc:  # a worker woke on the approval and drives it
            typer.echo(f"not resumed here: {exc}")
            await _close(store)
            return OK
        code = _finish(chart, last, db)
        await _close(store)
        return code

    raise typer.Exit(_run(go))


@app.command()
def reject(
    run_id: str,
    reason: Annotated[str, typer.Option(help="Why (the model hears it).")],
    db: Db = DB_DEFAULT,
    by: Annotated[str, typer.Option(help="Who rejects.")] = "cli",
    given: ChartOpt = None,
    region: RegionOpt = None,
) -> None:
    """Reject what a run waits for. Example: statechart reject RUN_ID --reason 'tone'"""

    async def go() -> None:
        store = _existing(db)
        chart, _ = await _chart_of(store, (await store.load(run_id)).snapshot, given)
        _trace()
        record = await reject_run(chart, run_id, store=store, by=by, reason=reason, region=region)
        now = f"rejected by {by}; now {record.run.status} in '{record.run.state}'"
        if record.run.status == "ended":
            typer.echo(now)
        elif isinstance(store, PostgresStore):  # the rejection queued it for the workers
            typer.echo(f"{now}; a worker continues it")
        else:
            typer.echo(
                f"{now}; continue with: statechart resume {shlex.quote(run_id)} "
                f"--db {shlex.quote(str(db))}"
            )
        await _close(store)

    _run(go)


@app.command()
def cancel(
    run_id: str,
    reason: Annotated[str, typer.Option(help="Why.")],
    db: Db = DB_DEFAULT,
    by: Annotated[str, typer.Option(help="Who cancels.")] = "cli",
    given: ChartOpt = None,
) -> None:
    """End a run in `cancelled`. Example: statechart cancel RUN_ID --reason 'duplicate'"""

    async def go() -> None:
        store = _existing(db)
        chart, _ = await _chart_of(store, (await store.load(run_id)).snapshot, given)
        _trace()
        await cancel_run(chart, run_id, store=store, reason=reason, by=by)
        typer.echo(f"run {run_id} cancelled")
        await _close(store)

    _run(go)


@app.command()
def fork(
    run_id: str,
    at: Annotated[int, typer.Option("--at", help="The seq to fork after.")],
    db: Db = DB_DEFAULT,
    given: ChartOpt = None,
) -> None:
    """Start a new run from a run's state after event SEQ. Example: statechart fork RUN --at 4"""

    async def go() -> None:
        store = _existing(db)
        chart, _ = await _chart_of(store, (await store.load(run_id)).snapshot, given)
        _trace()
        child = await fork_run(chart, run_id, at, store=store)
        typer.echo(
            f"run {child.run_id} forked from {run_id} at seq {at}, in '{child.state}'; "
            f"drive it with: statechart resume {shlex.quote(child.run_id)} "
            f"--db {shlex.quote(str(db))}"
        )
        await _close(store)

    _run(go)


@app.command()
def check(
    target: Annotated[str, typer.Argument(help="PATH.py:NAME, MODULE:NAME or registered NAME")],
) -> None:
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
    target: Annotated[
        str | None, typer.Argument(help="PATH.py:NAME, MODULE:NAME or registered NAME")
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Mark this run.")] = None,
    db: Db = DB_DEFAULT,
) -> None:
    """Print a Mermaid diagram. Example: statechart diagram agents/support_triage.py:chart"""

    async def go() -> None:
        found: Run | None = None
        events: list[Any] = []
        if run_id is not None:
            store = _existing(db)
            loaded, events = await store.load(run_id), await store.events(run_id)
            chart = (
                (await _chart_of(store, loaded.snapshot))[0]
                if target is None
                else load_chart(target)[0]
            )
            found = current(chart, loaded)
            await _close(store)
        elif target is not None:
            chart = load_chart(target)[0]
        else:
            raise LoadError("give PATH.py:CHART, or --run RUN_ID")
        typer.echo(diagram.mermaid(chart, found, events), nl=False)

    _run(go)
