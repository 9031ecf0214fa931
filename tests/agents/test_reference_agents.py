"""The reference agents build without a ChartWarning (they are what users copy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

AGENTS = sorted((Path(__file__).parents[2] / "agents").glob("*.py"))


@pytest.mark.parametrize("path", AGENTS, ids=[p.stem for p in AGENTS])
def test_reference_agent_builds_without_warnings(path: Path) -> None:
    code = (
        "import warnings\n"
        "from statechart.errors import ChartWarning\n"
        "warnings.simplefilter('error', ChartWarning)\n"
        "from statechart.io.loading import load_module\n"
        f"load_module(__import__('pathlib').Path({str(path)!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
