"""Every Python block in docs/ and README.md runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks() -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        for i, code in enumerate(BLOCK.findall(page.read_text())):
            out.append((page.relative_to(ROOT).as_posix(), i, code))
    return out


@pytest.mark.parametrize(("page", "index", "code"), blocks(), ids=lambda v: str(v)[:40])
def test_doc_example_runs(page: str, index: int, code: str) -> None:
    namespace: dict[str, object] = {"__name__": f"docs_{index}"}
    exec(compile(code, f"{page}[{index}]", "exec"), namespace)


def test_there_are_examples() -> None:
    assert any(page == "docs/concepts.md" for page, _, _ in blocks())
