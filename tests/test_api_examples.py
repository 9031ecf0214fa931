"""The API reference renders these docstring examples, and every example in the docs must run."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import statechart

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
RUNNER = """
import sys, warnings
from statechart import ChartWarning
warnings.simplefilter("error", ChartWarning)  # the examples build charts as the docs advise
name, code = sys.stdin.read().split("\\n", 1)
exec(compile(code, name, "exec"), {"__name__": "api_example"})
"""


def documented() -> Iterator[tuple[str, Any]]:
    """Each public name, then its class's own public methods and properties (the API pages
    render them all)."""
    for name in statechart.__all__:
        found = getattr(statechart, name)
        yield name, found
        if inspect.isclass(found):
            for attr, value in vars(found).items():
                if not attr.startswith("_") and (
                    inspect.isfunction(value)
                    or isinstance(value, property | classmethod | staticmethod)
                ):
                    yield f"{name}.{attr}", value


def examples() -> list[tuple[str, str]]:
    out = []
    for name, found in documented():
        for index, code in enumerate(BLOCK.findall(inspect.getdoc(found) or "")):
            out.append((f"{name}[{index}]", textwrap.dedent(code)))
    return out


EXAMPLES = examples()


@pytest.mark.parametrize(("name", "code"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_api_example_runs(name: str, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=f"{name}\n{code}",
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "STATECHART_CHECK_STEPS": "1"},
    )
    assert done.returncode == 0, f"{name}:\n{code}\n{done.stderr}"
    assert not any(tmp_path.iterdir()), f"{name} wrote into the current directory"


def test_there_are_api_examples() -> None:
    assert len(EXAMPLES) >= 50
    assert {"watch[0]", "start[0]", "Chart[0]"} <= {name for name, _ in EXAMPLES}
