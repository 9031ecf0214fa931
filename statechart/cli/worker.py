"""`statechart worker` (claim and drive runs from a PostgreSQL store) and `unblock`."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Annotated

import anyio
import typer

from statechart.cli.app import DB_DEFAULT, Db, _close, _run, _trace, _use, app, is_dsn
from statechart.errors import LoadError
from statechart.runtime.worker import Worker, WorkerSettings
from statechart.store.postgres import PostgresStore
from statechart.store.queue import RunQueue


def _postgres(db: str, *, pool_size: int = 4, same_host_takeover: bool = True) -> PostgresStore:
    if not is_dsn(db):
        raise LoadError(
            f"--db {db} is a SQLite file; workers share a PostgreSQL store: pass "
            "--db postgresql://HOST/DB (or set STATECHART_DB)"
        )
    _use(db)
    return PostgresStore(db, max_connections=pool_size, same_host_takeover=same_host_takeover)


@app.command()
def worker(
    db: Db = DB_DEFAULT,
    concurrency: Annotated[int, typer.Option(help="Runs driven at once.", min=1)] = 8,
    agents: Annotated[
        Path | None,
        typer.Option(help="Folder of chart files runs may name (besides registered charts)."),
    ] = None,
    lease_ttl: Annotated[
        float, typer.Option(help="Seconds a claim lasts unless renewed.", min=0.1)
    ] = 30.0,
    poll: Annotated[
        float | None,
        typer.Option(help="Seconds between claim queries; default a quarter of --lease-ttl."),
    ] = None,
    max_tries: Annotated[
        int, typer.Option(help="Failures in a row before a run is blocked.", min=1)
    ] = 5,
    backoff: Annotated[float, typer.Option(help="Seconds before the first retry.")] = 2.0,
    instant_takeover: Annotated[
        bool,
        typer.Option(
            help="Take over at once a run whose holder is a dead process on this machine "
            "(off: wait out its lease, as across machines)."
        ),
    ] = True,
    pool_size: Annotated[
        int, typer.Option(help="Database connections the worker's drives share.", min=1)
    ] = 4,
    quiet: Annotated[bool, typer.Option(help="Log warnings and errors only.")] = False,
) -> None:
    """Claim runnable runs from a PostgreSQL store and drive up to --concurrency at once.

    Wakes when a run is submitted, approved, rejected or cancelled; polls for leases that
    expired (a killed worker's runs). SIGTERM or Ctrl-C drains: each run stops after the
    step under way is stored and goes back to the queue; a second signal stops at once.

    Example: statechart worker --db postgresql://127.0.0.1/agents --agents agents
    """
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    if agents is not None and not agents.is_dir():
        raise typer.BadParameter(f"{agents} is not a folder", param_hint="--agents")
    settings = WorkerSettings(
        concurrency=concurrency,
        lease_ttl=lease_ttl,
        poll=poll,
        agents=agents,
        max_tries=max_tries,
        backoff=backoff,
    )

    async def go() -> None:
        store = _postgres(db, pool_size=pool_size, same_host_takeover=instant_takeover)
        await store.open()  # a DSN that leads nowhere: one error line, at once
        _trace()
        found = Worker(store, settings)
        stop = anyio.Event()
        typer.echo(
            f"worker {settings.name}: concurrency {concurrency}, lease TTL {lease_ttl:g} s, "
            f"poll {settings.every:g} s, agents {agents or '(registered charts only)'}",
            err=True,
        )
        async with anyio.create_task_group() as tg:

            async def signals() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                    async for _ in received:
                        if stop.is_set():
                            tg.cancel_scope.cancel()  # a second signal: stop now
                            return
                        typer.echo("draining: each run stops after its step", err=True)
                        stop.set()

            tg.start_soon(signals)
            await found.run(stop)
            tg.cancel_scope.cancel()
        await _close(store)
        typer.echo(f"worker {settings.name} stopped after {found.driven} drives", err=True)

    _run(go)


@app.command()
def unblock(run_id: str, db: Db = DB_DEFAULT) -> None:
    """Let workers try a blocked run again (once its chart loads). Example: statechart
    unblock RUN_ID --db postgresql://127.0.0.1/agents"""

    async def go() -> None:
        store = _postgres(db)
        done = await RunQueue(store).unblock(run_id)
        await _close(store)
        if not done:
            raise LoadError(
                f"run {run_id} is not a running, sleeping or waiting run in {db}; "
                "nothing to unblock"
            )
        typer.echo(f"run {run_id} is ready for a worker again")

    _run(go)
