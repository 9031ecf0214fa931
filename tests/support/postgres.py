"""A fresh PostgreSQL database per test on the local server (trust auth, database `test`),
dropped afterwards. Without a server the test skips with the reason, except under CI
(`CI=true`), where a missing server is a failure."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

ADMIN_DSN = os.environ.get("STATECHART_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test")


@contextmanager
def fresh_database() -> Iterator[str]:
    """The DSN of a new, empty database, dropped when the block ends."""
    import psycopg

    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required under CI and is not reachable: {exc}")
        pytest.skip(f"no PostgreSQL at {ADMIN_DSN} ({exc}); CI=true makes this a failure")
    name = f"statechart_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def emptied(dsn: str) -> str:
    """`dsn`, its statechart tables emptied (for one database shared by many examples)."""
    import psycopg

    with (
        psycopg.connect(dsn, autocommit=True) as db,
        contextlib.suppress(psycopg.errors.UndefinedTable),  # not migrated yet: empty
    ):
        db.execute("TRUNCATE runs, bases, event_rows, intent_rows, charts, leases")
    return dsn
