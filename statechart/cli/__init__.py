"""The `statechart` command: run, inspect, decide on, resume, draw and mine runs."""

from statechart.cli import charts, mining, replaying, runs, starting, ui, worker  # noqa: F401  (each registers its commands on `app`)
from statechart.cli.app import app


def entry() -> None:
    """The console script."""
    app(prog_name="statechart")


__all__ = ["app", "entry"]
