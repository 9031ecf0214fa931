"""The `statechart` app and what its commands share: options, the store, the model, errors.

Every command prints one clear line and exits non-zero on an error (`--debug` shows the
traceback). Charts are loaded by path: `statechart run agents/support_triage.py:chart`.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, TypeVar

import anyio
import typer
from pydantic import ValidationError

from statechart import tracing
from statechart.chart.chart import Chart
from statechart.cli.exits import COMMAND_ERROR, PIPE_CLOSED, error, say
from statechart.errors import ChartWarning, LoadError, ModelError, StatechartError
from statechart.io.loading import chart_source, load_chart
from statechart.models.base import Model
from statechart.models.registry import from_spec
from statechart.records.run import Run
from statechart.store.base import Store
from statechart.store.sqlite import SQLiteStore

T = TypeVar("T")
app = typer.Typer(
    help="Hierarchical statecharts for AI agents: run, inspect, approve and resume runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # click's help: typer's rich panels show flags as `--json <bool>`
)
_DEBUG = {"on": False}

Db = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="STATECHART_DB",
        help="The store: a SQLite file, or a PostgreSQL DSN (postgresql://HOST/DB).",
    ),
]
DB_DEFAULT = "statechart.db"
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model spec (openai:MODEL, anthropic:MODEL, ...); default: the agent's "
        "offline demo model, or on resume the model the run recorded.",
    ),
]


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="For openai:MODEL: any OpenAI-compatible server (vLLM, Ollama, "
            "llama.cpp, LM Studio), e.g. http://localhost:11434/v1",
        ),
    ] = None,
) -> None:
    """Run `statechart COMMAND --help` for each command's options and an example.

    Tracing needs no code: with OTEL_EXPORTER_OTLP_ENDPOINT set (e.g.
    http://localhost:4318, Jaeger's OTLP/HTTP port) every command that records a
    transition (run, resume, approve, reject, cancel, fork) exports its spans, and a
    run's spans from every process form one trace. See docs/tracing-jaeger.md.
    """
    _DEBUG["on"] = debug
    if base_url is not None:
        os.environ["OPENAI_BASE_URL"] = base_url


_STOP = {"asked": False}


def _interrupt(signum: int, frame: object) -> None:
    """The first Ctrl-C stops the run after the transition under way is stored; a second
    one interrupts at once."""
    if _STOP["asked"]:
        raise KeyboardInterrupt
    _STOP["asked"] = True
    typer.echo("stopping after this step (Ctrl-C again to interrupt now)", err=True)


_TRACING: dict[str, Any] = {}


def _trace() -> None:
    """Set up tracing from the `OTEL_*` variables: every command that records a transition
    calls it once its chart is loaded (a chart module may install its own provider, which
    then wins); `_run` flushes the spans before the command returns, however it ends."""
    provider = tracing.configure_from_environment()
    if provider is not None:
        _TRACING["provider"] = provider


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; a StatechartError (or bad input) is one line and exit code 1. A
    `ChartWarning` is one `warning:` line, printed once the command went through (a chart
    that fails to build shows only its error)."""
    previous = signal.signal(signal.SIGINT, _interrupt)
    shown, original = [], warnings.showwarning

    def keep(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, ChartWarning) and not _DEBUG["on"]:
            shown.append(str(message))
        else:
            original(message, category, *args, **kwargs)

    warnings.showwarning = keep
    try:
        result = anyio.run(fn)
        if _STOP["asked"]:
            raise KeyboardInterrupt
        for text in dict.fromkeys(shown):
            say(f"warning: {text}", "yellow", err=True)
        return result
    except KeyboardInterrupt:
        typer.echo("interrupted: the run keeps its last stored state; resume it to go on", err=True)
        raise typer.Exit(130) from None
    except BrokenPipeError:  # the reader went away (`| head`): stop as a pipe's writer does
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        typer.echo(
            "stopped: the output was closed; the run keeps its last stored state; resume it "
            "to go on",
            err=True,
        )
        raise typer.Exit(PIPE_CLOSED) from None
    except typer.Exit:
        raise
    except Exception as exc:
        if _DEBUG["on"]:
            raise
        error(_explained(exc))
        raise typer.Exit(COMMAND_ERROR) from None
    finally:
        warnings.showwarning = original
        signal.signal(signal.SIGINT, previous)
        provider = _TRACING.pop("provider", None)
        if provider is not None:
            provider.shutdown()  # flushes the batch: every span of this process is sent


def _explained(exc: BaseException) -> str:
    """An error as the lines a user reads: every field pydantic refused, each on its own
    line; any other error's whole message."""
    if isinstance(exc, ValidationError):
        return f"{exc.title} is not valid:\n" + "\n".join(
            f"  {'.'.join(map(str, e['loc'])) or '(value)'}: {e['msg']}" for e in exc.errors()
        )
    lines = [x.rstrip() for x in str(exc).strip().splitlines() if x.strip()]
    text = "\n".join(lines) if lines else type(exc).__name__
    return text if isinstance(exc, StatechartError) else f"{type(exc).__name__}: {text}"


def _object(text: str, option: str) -> dict[str, Any]:
    """A JSON object given on the command line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoadError(
            f'{option} is not JSON ({exc}); give an object, e.g. \'{{"ticket_id": "T-1001"}}\''
        ) from None
    if not isinstance(value, dict):
        raise LoadError(f"{option} must be a JSON object, not {type(value).__name__}")
    return value


def _model(spec: str | None, module: ModuleType | None, run: Run | None = None) -> Model:
    """The model to drive with: `--model`, else the run's recorded one, else the demo."""
    if spec is not None:
        try:
            return from_spec(spec)
        except ModelError:
            if ":" in spec and spec.split(":", 1)[1]:
                raise
            raise LoadError(
                f"--model {spec!r} is not a model this command can build: give "
                "openai:MODEL (with --base-url for any OpenAI-compatible server) or "
                "anthropic:MODEL, or leave --model out for the agent's offline demo model"
            ) from None
    if run is not None:
        demo = getattr(module, "demo_model", None)
        try:
            return from_spec(run.model, run.run_id)
        except StatechartError:
            if demo is None or demo().spec != run.model:
                raise LoadError(
                    f"run {run.run_id} was driven by model {run.model!r}, which this "
                    "command cannot build; pass --model openai:MODEL or anthropic:MODEL"
                ) from None
            found_demo: Model = demo()
            return found_demo
    demo = getattr(module, "demo_model", None)
    if demo is None:
        raise LoadError("the agent defines no demo_model(); pass --model")
    found: Model = demo()
    return found


def is_dsn(db: str) -> bool:
    """Whether `--db` names a PostgreSQL database rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def _use(db: str) -> None:
    """Tell agents where the store is (`STATECHART_DB`), so data files they keep (a
    helpdesk, a bank) live next to a SQLite store whatever the working directory."""
    os.environ["STATECHART_DB"] = db if is_dsn(db) else str(Path(db).resolve())


def _open(db: str) -> Store:
    """The store `--db` names, created if new: a PostgreSQL DSN or a SQLite file."""
    _use(db)
    if is_dsn(db):
        from statechart.store.postgres import PostgresStore

        return PostgresStore(db)
    return SQLiteStore(db)


def _existing(db: str) -> Store:
    """The store at `db`, which must exist (reading commands create no SQLite file)."""
    if not is_dsn(db) and not Path(db).is_file():
        raise LoadError(f"no store at {db}; start a run with `statechart run`, or pass --db")
    return _open(db)


async def _close(store: Store) -> None:
    """Close a store, whichever kind (PostgreSQL's close is a coroutine)."""
    closing = getattr(store, "close", None)
    if closing is not None:
        result = closing()
        if inspect.isawaitable(result):
            await result


ChartOpt = Annotated[
    str | None,
    typer.Option(
        "--chart",
        help="PATH.py:NAME or MODULE:NAME of the run's chart, for a run whose store does "
        "not record it (one started from Python); checked against the run's chart version.",
    ),
]


async def _chart_of(store: Store, run: Run, given: str | None = None) -> tuple[Chart, ModuleType]:
    """The run's chart: `--chart` (checked against the run's version, then remembered),
    else the source the store recorded."""
    if given is not None:
        chart, module = load_chart(given)
        if chart.version != run.chart_version:
            raise LoadError(
                f"--chart {given} is chart '{chart.name}' version {chart.version}, but run "
                f"{run.run_id} was stored under '{run.chart}' version {run.chart_version}; "
                "give the chart the run was started with"
            )
        await store.save_chart(chart.version, chart.describe(), chart_source(given))
        return chart, module
    source = await store.chart_source(run.chart_version)
    if source is None:
        raise LoadError(
            f"run {run.run_id} does not record where its chart '{run.chart}' came from (it "
            "was started from a chart built inside a function); pass --chart PATH.py:NAME "
            "or --chart MODULE:NAME"
        )
    return load_chart(source)
