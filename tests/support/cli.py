"""Run the `statechart` command as a real process, in an environment where the reference
agents keep their SQLite files in the working directory and no provider base URL leaks in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{ROOT}/agents/support_triage.py:chart"
DESK = f"{ROOT}/agents/refund_desk.py:chart"
DEEP = f"{ROOT}/agents/deep_research.py:chart"
TICKET = '{"ticket_id": "T-1001"}'
ORDER = '{"order_id": "A-7"}'


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment without the agents' and adapters' overrides, plus `extra`."""
    out = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "SUPPORT_TRIAGE_HELPDESK",
            "REFUND_DESK_BANK",
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
        )
    }
    return {**out, "PYTHONPATH": str(ROOT), **extra}


OK, ERROR, USAGE, WAITING, FAILED, CANCELLED = 0, 1, 2, 3, 4, 5
"""The exit codes of docs/cli.md, spelled out here so a change to them fails the tests."""


def run_cli(
    cwd: Path,
    *args: str,
    code: int | None = OK,
    environ: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`statechart ARGS` in `cwd`; it must exit with `code` (None: the caller checks)."""
    done = subprocess.run(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ if environ is not None else cli_env(),
    )
    if code is not None:
        assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done


def waiting_id(out: str) -> str:
    """The run id from the `approve: statechart approve RUN ...` line of `run`'s output."""
    (line,) = [x for x in out.splitlines() if x.startswith("approve: ")]
    return line.split()[3]
