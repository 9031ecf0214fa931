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
        # One row per transition; never updated.
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
            body TEXT NOT NULL
        )""",
        "CREATE UNIQUE INDEX events_by_run ON events (run_id, seq)",
        # Transcript deltas, one row per step that appended messages, keyed by visit.
        """CREATE TABLE transcript (
            run_id TEXT NOT NULL,
            visit INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            body TEXT NOT NULL
        )""",
        "CREATE UNIQUE INDEX transcript_by_visit ON transcript (run_id, visit, seq)",
        # Tool calls recorded before they run; completed_seq once they left the queue.
        """CREATE TABLE intents (
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            tool TEXT NOT NULL,
            call TEXT NOT NULL,
            key TEXT,
            completed_seq INTEGER,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        "CREATE INDEX intents_open ON intents (run_id) WHERE completed_seq IS NULL",
        # Structure of each chart version runs were started on, to explain a change.
        "CREATE TABLE charts (version TEXT PRIMARY KEY, description TEXT NOT NULL)",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)
