"""The PostgreSQL store's schema: numbered migrations, run once each under an advisory lock.

Version 1 is the SQLite store's shape (runs, bases, one row per transition, intents,
charts). Version 2 adds the run queue the workers share: a run's chart version, whether it
is ready for a worker, its chart-loading tries and backoff, `blocked` with the error, the
lease holder that wrote each event, and the log of leases taken and released.
"""

from __future__ import annotations

from typing import Any

from statechart.errors import SchemaVersionError

SCHEMA_VERSION = 3

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE runs (
            num BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            chart TEXT NOT NULL,
            status TEXT NOT NULL,
            state TEXT NOT NULL,
            seq BIGINT NOT NULL,
            snapshot JSONB NOT NULL,
            lease_holder TEXT,
            lease_expires DOUBLE PRECISION NOT NULL DEFAULT 0,
            lease_seq BIGINT,
            lease_process TEXT
        )""",
        "CREATE INDEX runs_by_status ON runs (status, chart)",
        """CREATE TABLE bases (
            run_id TEXT NOT NULL, seq BIGINT NOT NULL, snapshot JSONB NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE event_rows (
            id BIGINT PRIMARY KEY, time DOUBLE PRECISION NOT NULL, source TEXT NOT NULL,
            target TEXT NOT NULL, trigger TEXT NOT NULL, actor TEXT NOT NULL, reason TEXT,
            tool TEXT, refused TEXT, error TEXT, steps BIGINT NOT NULL,
            model_calls BIGINT NOT NULL, tool_calls BIGINT NOT NULL,
            input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
            cost_micros BIGINT NOT NULL, wall_ms BIGINT NOT NULL, intent TEXT, key TEXT,
            by TEXT, fingerprint TEXT, exhausted TEXT, edge TEXT, closes TEXT, span TEXT,
            visit BIGINT, messages JSONB, body JSONB NOT NULL, intent_state TEXT,
            intent_call TEXT, run_steps BIGINT, run_model_calls BIGINT,
            run_tool_calls BIGINT, run_input_tokens BIGINT, run_output_tokens BIGINT,
            run_cost_micros BIGINT, run_wall_ms BIGINT
        )""",
        """CREATE TABLE intent_rows (
            run_id TEXT NOT NULL, seq BIGINT NOT NULL, call_id TEXT NOT NULL,
            state TEXT NOT NULL, tool TEXT NOT NULL, call TEXT NOT NULL, key TEXT
        )""",
        """CREATE TABLE charts (
            version TEXT PRIMARY KEY, description TEXT NOT NULL, source TEXT
        )""",
    ),
    2: (
        "ALTER TABLE runs ADD COLUMN chart_version TEXT",
        "UPDATE runs SET chart_version = snapshot->>'chart_version'",
        "ALTER TABLE runs ADD COLUMN ready BOOLEAN NOT NULL DEFAULT FALSE",
        # runs stored before the queue existed: any running one nobody holds was submitted
        "UPDATE runs SET ready = (status = 'running' AND lease_holder IS NULL)",
        "ALTER TABLE runs ADD COLUMN tries INT NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN next_try DOUBLE PRECISION NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN problem TEXT",
        "ALTER TABLE runs ADD COLUMN blocked BOOLEAN NOT NULL DEFAULT FALSE",
        "CREATE INDEX runs_runnable ON runs (num) WHERE status = 'running' AND NOT blocked",
        "ALTER TABLE event_rows ADD COLUMN holder TEXT",
        """CREATE TABLE leases (
            n BIGINT GENERATED ALWAYS AS IDENTITY,
            run_id TEXT NOT NULL, holder TEXT NOT NULL, acquired DOUBLE PRECISION NOT NULL,
            seq BIGINT NOT NULL, took_over_from TEXT, released DOUBLE PRECISION,
            clean BOOLEAN, PRIMARY KEY (run_id, holder)
        )""",
    ),
    3: (
        # sleeping and waiting runs by the time their timer is due: what a worker wakes
        "CREATE INDEX runs_waking ON runs (((snapshot->>'wake')::float8)) "
        "WHERE status IN ('sleeping', 'waiting') AND NOT blocked",
    ),
}
"""Numbered migrations (`statechart_schema` says which ran); add a version by appending,
never edit a released one."""


async def migrate(conn: Any) -> None:
    """Bring the database up to `SCHEMA_VERSION` in one transaction; refuse a newer one.
    Concurrent openers serialise on an advisory lock."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(7446134)")
        await conn.execute("CREATE TABLE IF NOT EXISTS statechart_schema (version INT NOT NULL)")
        found = await (await conn.execute("SELECT max(version) FROM statechart_schema")).fetchone()
        current = found[0] or 0
        if current > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the database has statechart schema {current}; this package knows up to "
                f"{SCHEMA_VERSION}: upgrade statechart"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement)
            await conn.execute("INSERT INTO statechart_schema (version) VALUES (%s)", (version,))
