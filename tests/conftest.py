"""Shared fixtures: every async test runs on both anyio backends (asyncio and trio)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from statechart.engine import transition
from tests.support.durable import CALLS

# Every compiled step is compared with the general one, here and in subprocesses
# (statechart/engine/transition.py): the whole suite is a differential test of it. The
# package is imported before this file runs (pytest's warning filters name one of its
# classes), so the flag is set on the module as well as in the environment.
os.environ["STATECHART_CHECK_STEPS"] = "1"
transition.CHECKED = True


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    """A fresh SQLite store path; the refund tools of tests/support/durable.py start clean."""
    CALLS.clear()
    yield tmp_path / "runs.db"


@pytest.fixture
async def pg_store() -> AsyncIterator[Any]:
    """A `PostgresStore` on a fresh database of the local server (skipped without one, a
    failure under CI); a module using it sets `anyio_backend` to asyncio (psycopg's)."""
    from statechart.store.postgres import PostgresStore
    from tests.support.postgres import fresh_database

    with fresh_database() as dsn:
        found = PostgresStore(dsn)
        yield found
        await found.close()
