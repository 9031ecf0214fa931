"""`statechart replay`: recorded runs re-driven against a changed chart, with no model and
no tool called; says which runs agree, and where and why the others diverge."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from statechart.cli.app import DB_DEFAULT, Db, _close, _existing, _run, app
from statechart.cli.exits import DIVERGED, OK, USAGE_ERROR, error, say
from statechart.io.loading import load_chart
from statechart.rerun import replay

__all__ = ["app", "replay_command"]


def since_time(text: str) -> float:
    """Epoch seconds of an ISO date or date-time (`2026-12-01`, `2026-12-01T09:30`); a
    time without a zone is UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: use an ISO date, e.g. 2026-12-01") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def renames_of(pairs: list[str]) -> dict[str, str]:
    """`OLD=NEW` pairs as a mapping."""
    found: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise typer.BadParameter(f"--rename {pair!r}: use OLD=NEW, e.g. research=study")
        found[old] = new
    return found


@app.command("replay")
def replay_command(
    run_ids: Annotated[list[str] | None, typer.Argument(help="Runs to replay.")] = None,
    against: Annotated[
        str, typer.Option("--against", help="The changed chart: PATH.py:NAME or MODULE:NAME.")
    ] = "",
    chart: Annotated[
        str | None,
        typer.Option(
            "--chart",
            help="Replay the runs of this chart name (default: the --against chart's name).",
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only runs started on or after this date.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every run in the store.")] = False,
    rename: Annotated[
        list[str] | None,
        typer.Option("--rename", help="OLD=NEW: a state renamed since the runs (repeatable)."),
    ] = None,
    run_handlers: Annotated[
        bool,
        typer.Option(
            "--run-handlers",
            help="Run code states' handlers again (they may do I/O) instead of serving "
            "their recorded decisions.",
        ),
    ] = False,
    db: Db = DB_DEFAULT,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
) -> None:
    """Replay recorded runs against a changed chart. Exit 0 only when none diverges (7).
    Example: statechart replay --against agents/support_triage.py:chart"""
    if not against:
        error("--against PATH.py:NAME is required: the chart to replay the runs against")
        raise typer.Exit(USAGE_ERROR)
    if run_ids and (chart or since or every):
        error("give run ids, or --chart/--since, or --all; not both")
        raise typer.Exit(USAGE_ERROR)
    if every and chart:
        error("--all replays every run; leave out --chart")
        raise typer.Exit(USAGE_ERROR)
    after = since_time(since) if since is not None else None
    mapping = renames_of(rename or [])

    async def go() -> int:
        new_chart = load_chart(against)[0]
        store = _existing(db)
        try:
            name = None if every else (chart or new_chart.name)
            report = await replay(
                new_chart,
                run_ids or None,
                store=store,
                chart_name=name,
                since=after,
                renames=mapping,
                run_handlers=run_handlers,
            )
        finally:
            await _close(store)
        typer.echo(report.json() if as_json else report.table())
        if not report.verdicts:
            say("warning: no recorded run matched; nothing was replayed", err=True)
        return OK if report.ok else DIVERGED

    raise typer.Exit(_run(go))
