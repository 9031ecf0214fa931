"""Every Python block in docs/ and README.md runs, in order, each page in one namespace
(a page reads top to bottom, so a later block may use what an earlier one defined), each
page in its own process (a page may configure process-wide things such as tracing).

A `ChartWarning` fails the page: the examples build charts as the docs advise.

A ```` ```console exec ```` block runs too, in the same order: each `$ statechart ...` line
as the real command, and every other non-blank line of the block must appear in what the
command before it printed (`...` lines are skipped)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
BLOCK = re.compile(r"```(python|console exec)\n(.*?)```", re.S)
RUNNER = """
import json, shlex, subprocess, sys, warnings
from statechart import ChartWarning
warnings.simplefilter("error", ChartWarning)  # docs show charts built as concepts.md advises
page, codes = json.loads(sys.stdin.read())
namespace = {"__name__": "docs_page"}
for index, (kind, code) in enumerate(codes):
    if kind == "python":
        exec(compile(code, f"{page}[{index}]", "exec"), namespace)
        continue
    printed = None
    for line in code.splitlines():
        if line.startswith("$ statechart "):
            done = subprocess.run([sys.executable, "-m", "statechart.cli",
                                   *shlex.split(line[len("$ statechart "):])],
                                  capture_output=True, text=True)
            assert done.returncode == 0, f"{page}[{index}]: {line}: {done.stderr}"
            printed = done.stdout
        elif line.strip() and line.strip() != "...":
            assert printed is not None and line in printed, (
                f"{page}[{index}]: {line!r} is not in what the command printed:\\n{printed}")
"""


def pages() -> list[tuple[str, list[str]]]:
    out = []
    for page in PAGES:
        found = BLOCK.findall(page.read_text())
        if found:
            out.append((page.relative_to(ROOT).as_posix(), found))
    return out


@pytest.mark.parametrize(("page", "codes"), pages(), ids=lambda v: str(v)[:40])
def test_doc_examples_run(page: str, codes: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps([page, codes]),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, f"{page}:\n{done.stderr}"


def test_there_are_examples() -> None:
    found = dict(pages())
    assert "docs/concepts.md" in found and "docs/persistence.md" in found
