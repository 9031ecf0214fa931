"""The `statechart` app and what its commands share: options, the store, the model, errors.

Every command prints one clear line and exits non-zero on an error (`--debug` shows the
traceback). Charts are loaded by path: `statechart run agents/support_triage.py:chart`.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, TypeVar

import anyio
import typer

from statechart.chart.chart import Chart
from statechart.errors import LoadError, StatechartError
from statechart.io.loading import load_chart
from statechart.models.base import Model
from statechart.models.registry import from_spec
from statechart.records.run import Run
from statechart.store.sqlite import SQLiteStore

T = TypeVar("T")
app = typer.Typer(
    help="Hierarchical statecharts for AI agents: run, inspect, approve and resume runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
_DEBUG = {"on": False}

Db = Annotated[Path, typer.Option("--db", help="The SQLite store.")]
DB_DEFAULT = Path("statechart.db")
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
    """Run `statechart COMMAND --help` for each command's options and an example."""
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


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; a StatechartError (or bad input) is one line and exit code 1."""
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        result = anyio.run(fn)
        if _STOP["asked"]:
            raise KeyboardInterrupt
        return result
    except KeyboardInterrupt:
        typer.echo("interrupted: the run keeps its last stored state; resume it to go on", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:
        if _DEBUG["on"]:
            raise
        lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
        text = ": ".join(lines[:2]) if lines else type(exc).__name__
        if not isinstance(exc, StatechartError):
            text = f"{type(exc).__name__}: {text}"
        typer.echo(f"error: {text}", err=True)
        raise typer.Exit(1) from None
    finally:
        signal.signal(signal.SIGINT, previous)


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
        return from_spec(spec)
    if run is not None:
        demo = getattr(module, "demo_model", None)
        try:
            return from_spec(run.model, run.run_id)
        except StatechartError:
            if demo is None or demo().spec != run.model:
                raise
            found_demo: Model = demo()
            return found_demo
    demo = getattr(module, "demo_model", None)
    if demo is None:
        raise LoadError("the agent defines no demo_model(); pass --model")
    found: Model = demo()
    return found


def _use(db: Path) -> None:
    """Tell agents where the store is (`STATECHART_DB`), so data files they keep (a
    helpdesk, a bank) live next to it whatever the working directory."""
    os.environ["STATECHART_DB"] = str(db.resolve())


def _existing(db: Path) -> SQLiteStore:
    """The store at `db`, which must exist (reading commands create nothing)."""
    _use(db)
    if not db.is_file():
        raise LoadError(f"no store at {db}; start a run with `statechart run`, or pass --db")
    return SQLiteStore(db)


async def _chart_of(store: SQLiteStore, run: Run) -> tuple[Chart, ModuleType]:
    source = await store.chart_source(run.chart_version)
    if source is None:
        raise LoadError(
            f"run {run.run_id} does not record where its chart came from; it was "
            "not started by this command"
        )
    return load_chart(source)
