"""Shared fixtures: every async test runs on both anyio backends (asyncio and trio)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.durable import CALLS


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    """A fresh SQLite store path; the refund tools of tests/support/durable.py start clean."""
    CALLS.clear()
    yield tmp_path / "runs.db"
