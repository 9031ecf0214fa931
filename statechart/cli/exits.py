"""Exit codes and coloured output: what a script and a person read from a command.

Every command that drives a run exits by how the run came out, so a script can tell
`done` from `escalated` (documented in docs/cli.md). Colour only on a terminal, never
when piped or when `NO_COLOR` is set (rich decides both).
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.text import Text

from statechart.engine import RunOutcome

OK = 0
"""Ended in a terminal that is not a failure (or a command that drives nothing)."""
COMMAND_ERROR = 1
"""The command failed: a missing run, a bad chart, a store error, a model error."""
USAGE_ERROR = 2
"""The command line itself is wrong (click's own code for usage errors)."""
PIPE_CLOSED = 141
"""The reader of the output went away (`| head`): 128 + SIGPIPE, as a shell reports it."""
WAITING = 3
"""The run waits for a human: `approve` or `reject` it."""
FAILED = 4
"""Escalated, exhausted, or ended in a terminal declared `outcome="failure"`."""
CANCELLED = 5
"""The run was cancelled."""
SLEEPING = 6
"""The run sleeps until a failed call's next attempt: `resume` it then, or let a worker."""
DIVERGED = 7
"""`replay`: at least one recorded run diverges from the chart replayed against."""

CODES: dict[RunOutcome, int] = {
    "success": OK,
    "waiting": WAITING,
    "failure": FAILED,
    "cancelled": CANCELLED,
    "sleeping": SLEEPING,
    "running": OK,
}
STYLES: dict[RunOutcome, str] = {
    "success": "bold green",
    "waiting": "bold yellow",
    "failure": "bold red",
    "cancelled": "bold magenta",
    "sleeping": "bold cyan",
    "running": "bold",
}

STATUS_STYLES = {
    "running": "",
    "waiting": "yellow",
    "sleeping": "cyan",
    "ended": "",
    "blocked": "red",
}

_PLAIN = {"color_system": None} if os.environ.get("NO_COLOR") else {}
"""`NO_COLOR` set: no escape codes at all (rich alone would still send bold)."""
_OUT = Console(highlight=False, soft_wrap=True, **_PLAIN)  # type: ignore[arg-type]
_ERR = Console(stderr=True, highlight=False, soft_wrap=True, **_PLAIN)  # type: ignore[arg-type]


def terminal() -> Console | None:
    """A console on stdout for a live view, when stdout is a terminal that may be drawn
    on: not with `NO_COLOR` (no escape codes at all) nor `TERM=dumb`."""
    if _PLAIN or os.environ.get("TERM") == "dumb":
        return None
    console = Console(highlight=False)
    return console if console.is_terminal else None


def say(text: str, style: str = "", *, err: bool = False) -> None:
    """Print one line, styled on a terminal (the text is never read as markup)."""
    (_ERR if err else _OUT).print(Text(text, style=style))


def error(text: str) -> None:
    """`error: TEXT` on stderr, the prefix in red on a terminal."""
    _ERR.print(Text.assemble(("error:", "bold red"), " ", text))
