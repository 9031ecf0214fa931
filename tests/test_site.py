"""The API site (mkdocs + mkdocstrings, `mkdocs.yml`) builds with `--strict`, documents every
name `statechart` exports, and has every page of docs/ in its nav.

`--strict` turns every warning into a failure: a broken link or anchor, a page missing from
the nav (`validation:` in mkdocs.yml), an object mkdocstrings cannot resolve, and griffe's
docstring warnings (a documented parameter the signature does not have). The site is built
once for the module, into a temporary directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import statechart

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
OBJECT_ID = re.compile(r'id="(statechart\.[\w.]+)"')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return done, out


def built(site: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    done, out = site
    if done.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{done.stderr}")
    return out


def test_site_builds_strict(site: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, _ = site
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr}"
    assert "WARNING" not in done.stderr, done.stderr


def test_every_public_name_is_documented(
    site: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    out = built(site)
    ids: set[str] = set()
    for page in (out / "api").rglob("*.html"):
        ids.update(OBJECT_ID.findall(page.read_text()))
    missing = [name for name in statechart.__all__ if f"statechart.{name}" not in ids]
    assert not missing, f"add `::: statechart.NAME` to a page in docs/api/ for: {missing}"


def nav_pages(nav: Any) -> set[str]:
    """Every page a nav (as mkdocs loaded it: lists, {title: item}, or a bare path) names."""
    if isinstance(nav, str):
        return set() if "://" in nav else {nav}
    if isinstance(nav, dict):
        return set().union(*(nav_pages(item) for item in nav.values()))
    if isinstance(nav, list):
        return set().union(*(nav_pages(item) for item in nav))
    return set()


def test_every_docs_page_is_in_the_nav(
    site: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    in_nav = nav_pages(config["nav"])
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    assert not pages - in_nav, f"add to the nav in mkdocs.yml: {sorted(pages - in_nav)}"
    assert not in_nav - pages, f"the nav names pages docs/ lacks: {sorted(in_nav - pages)}"
    done, _ = site
    assert 'not included in the "nav"' not in done.stderr, done.stderr
