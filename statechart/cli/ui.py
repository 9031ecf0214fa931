"""`statechart ui`: serve the run inspector on 127.0.0.1."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from statechart.cli.app import DB_DEFAULT, Db, _close, _existing, _run, app
from statechart.errors import LoadError


@app.command()
def ui(
    db: Db = DB_DEFAULT,
    host: Annotated[str, typer.Option(help="Address to bind; keep the loopback one.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    agents: Annotated[
        Path | None,
        typer.Option(help="Folder of chart files runs may name (besides registered charts)."),
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Token decisions need; default: a new random one.")
    ] = None,
    trace_url: Annotated[
        str | None,
        typer.Option(help="Link to a run's trace, e.g. 'http://localhost:16686/trace/{trace_id}'."),
    ] = None,
) -> None:
    """Inspect runs in the browser: the runs table, each run's diagram, timeline, budgets,
    transcripts and context; approve, reject, cancel and fork from the page.

    Example: statechart ui --db statechart.db --agents agents
    """
    try:
        import uvicorn

        from statechart.ui import create_app
    except ImportError:
        raise LoadError(
            "statechart ui needs the ui extra: pip install 'statechart-agents[ui]'"
        ) from None
    chosen = token or secrets.token_urlsafe(16)

    async def go() -> None:
        store = _existing(db)
        served = create_app(
            store,
            token=chosen,
            host=host,
            port=port,
            agents=agents,
            trace_url=trace_url,
            db=db,
        )
        config = uvicorn.Config(served, host=host, port=port, log_level="warning")
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"statechart ui on {db}: http://{shown}:{port}/?token={chosen}", err=True)
        if host not in ("127.0.0.1", "localhost", "::1"):
            typer.echo(
                f"warning: {host} is not the loopback address: anyone who can reach it can "
                "read every run (decisions still need the token)",
                err=True,
            )
        typer.echo("(the token in the link lets this browser decide; Ctrl-C stops)", err=True)
        try:
            await uvicorn.Server(config).serve()
        finally:
            await _close(store)

    _run(go)
