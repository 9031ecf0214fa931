"""The SQLite schema, as numbered migrations (`PRAGMA user_version` says which ran).

A database is brought up to `SCHEMA_VERSION` when opened, one migration per
transaction; a database from a newer schema is refused. Add a version by
appending to `MIGRATIONS`; never edit a released one.
"""

from __future__ import annotations

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # The latest snapshot of each run (bounded fields only) and its lease.
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            chart TEXT NOT NULL,
            status TEXT NOT NULL,
            state TEXT NOT NULL,
            seq INTEGER NOT NULL,
            snapshot TEXT NOT NULL,
            lease_holder TEXT,
            lease_expires REAL NOT NULL DEFAULT 0,
            lease_seq INTEGER
        )""",
        "CREATE INDEX runs_by_status ON runs (status, chart)",
        # Whole snapshots replay starts from: a run's first, and any migration.
        """CREATE TABLE bases (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            snapshot TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        # One row per transition, never updated: the event, the transcript messages it
        # added (`messages`, keyed by `visit`), the intent it recorded (`intent`, `key`) or
        # completed (`closes`).
        """CREATE TABLE events (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            time REAL NOT NULL,
            source TEXT NOT NULL,
            target TEXT NOT NULL,
            trigger TEXT NOT NULL,
            actor TEXT NOT NULL,
            reason TEXT,
            tool TEXT,
            refused TEXT,
            error TEXT,
            steps INTEGER NOT NULL,
            model_calls INTEGER NOT NULL,
            tool_calls INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_micros INTEGER NOT NULL,
            wall_ms INTEGER NOT NULL,
            intent TEXT,
            key TEXT,
            by TEXT,
            fingerprint TEXT,
            exhausted TEXT,
            edge TEXT,
            closes TEXT,
            span TEXT,
            visit INTEGER,
            messages TEXT,
            body TEXT NOT NULL
        )""",
        "CREATE UNIQUE INDEX events_by_run ON events (run_id, seq)",
        # Tool calls recorded before they run (insert only; `closes` in events completes them).
        """CREATE TABLE intent_rows (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            call_id TEXT NOT NULL,
            state TEXT NOT NULL,
            tool TEXT NOT NULL,
            call TEXT NOT NULL,
            key TEXT,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        # For plain SQL: each intent with the seq of the event that completed it, if any.
        """CREATE VIEW intents AS
            SELECT i.run_id, i.call_id, i.seq, i.state, i.tool, i.call, i.key,
                   (SELECT min(e.seq) FROM events e WHERE e.run_id = i.run_id
                    AND e.seq > i.seq AND e.closes = i.call_id) AS completed_seq
            FROM intent_rows i""",
        # Structure of each chart version runs were started on, to explain a change.
        "CREATE TABLE charts (version TEXT PRIMARY KEY, description TEXT NOT NULL)",
    ),
    2: (
        # Where a chart version was loaded from (`path.py:name`), so the CLI can resume,
        # approve or draw a run without being told its chart again.
        "ALTER TABLE charts ADD COLUMN source TEXT",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)
