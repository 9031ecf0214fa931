"""The SQLite schema, as numbered migrations (`PRAGMA user_version` says which ran).

A database is brought up to `SCHEMA_VERSION` when opened, one migration per
transaction; a database from a newer schema is refused. Add a version by
appending to `MIGRATIONS`; never edit a released one.
"""

from __future__ import annotations

import sqlite3

from statechart.errors import SchemaVersionError, StoreError

BACKSTOP_PAGES = 10_000
"""WAL pages after which SQLite checkpoints inside a COMMIT (the background one is first)."""

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
    3: (
        # Who holds a lease, as the kernel knows it (`store/process.py`): a resumer on the
        # same machine may take over at once from a holder that is surely dead.
        "ALTER TABLE runs ADD COLUMN lease_process TEXT",
        # The root chart's budget level is named `root` (it was `""`): in ledgers of
        # snapshots and replay bases, in `exhausted` labels and in exhaustion triggers.
        *(
            f"""UPDATE {table} SET snapshot = json_remove(json_set(snapshot, '$.ledger.root',
                json_extract(snapshot, '$.ledger.""')), '$.ledger.""')
                WHERE json_type(snapshot, '$.ledger.""') IS NOT NULL"""
            for table in ("runs", "bases")
        ),
        "UPDATE events SET exhausted = 'root' || exhausted WHERE exhausted LIKE ':%'",
        "UPDATE events SET trigger = 'exhaust:root' WHERE trigger = 'exhaust:'",
        # Events may now carry `usage_missing` and `breach` in their JSON body: no DDL.
    ),
    4: (
        # Ported sub-charts: snapshots may hold `contexts`, events `scope`, `inputs` and
        # `outputs` (JSON). No DDL: the version keeps older code, which would fold them
        # wrongly, from opening a file that has them.
    ),
    5: (
        # One row per transition and nothing else: the runs row (snapshot, status, state)
        # is written behind (on a status change, every K events, on release), so each run
        # gets a number and its events are keyed (number << 32) | seq in one b-tree.
        """CREATE TABLE runs5 (
            num INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            chart TEXT NOT NULL,
            status TEXT NOT NULL,
            state TEXT NOT NULL,
            seq INTEGER NOT NULL,
            snapshot TEXT NOT NULL,
            lease_holder TEXT,
            lease_expires REAL NOT NULL DEFAULT 0,
            lease_seq INTEGER,
            lease_process TEXT
        )""",
        """INSERT INTO runs5 (run_id, chart, status, state, seq, snapshot, lease_holder,
            lease_expires, lease_seq, lease_process)
            SELECT run_id, chart, status, state, seq, snapshot, lease_holder, lease_expires,
                   CASE WHEN lease_holder IS NOT NULL AND lease_seq IS NOT NULL
                        AND lease_seq <> seq THEN -1 ELSE lease_seq END,
                   lease_process FROM runs ORDER BY rowid""",
        # (`lease_seq` was the holder's last append; it is now -1 once another writer came
        # after the holder, which is what a holder behind the run's seq meant.)
        # The event, the intent it records (`intent`, `key`, `intent_state`,
        # `intent_call`) or completes (`closes`), the transcript messages it adds, and the
        # run's cumulative root spending after it (`run_*`: NULL on rows migrated from
        # schema 4, whose runs rows were written at every event).
        """CREATE TABLE event_rows (
            id INTEGER PRIMARY KEY,
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
            body TEXT NOT NULL,
            intent_state TEXT,
            intent_call TEXT,
            run_steps INTEGER,
            run_model_calls INTEGER,
            run_tool_calls INTEGER,
            run_input_tokens INTEGER,
            run_output_tokens INTEGER,
            run_cost_micros INTEGER,
            run_wall_ms INTEGER
        )""",
        """INSERT INTO event_rows (id, time, source, target, trigger, actor, reason, tool,
            refused, error, steps, model_calls, tool_calls, input_tokens, output_tokens,
            cost_micros, wall_ms, intent, key, by, fingerprint, exhausted, edge, closes, span,
            visit, messages, body)
            SELECT (r.num << 32) | e.seq, e.time, e.source, e.target, e.trigger, e.actor,
                   e.reason, e.tool, e.refused, e.error, e.steps, e.model_calls, e.tool_calls,
                   e.input_tokens, e.output_tokens, e.cost_micros, e.wall_ms, e.intent, e.key,
                   e.by, e.fingerprint, e.exhausted, e.edge, e.closes, e.span, e.visit,
                   e.messages, e.body
            FROM events e JOIN runs5 r ON r.run_id = e.run_id""",
        "DROP VIEW intents",
        "DROP TABLE events",
        "DROP TABLE runs",
        "ALTER TABLE runs5 RENAME TO runs",
        "CREATE INDEX runs_by_status ON runs (status, chart)",
        # For plain SQL, as before: events by run id and seq, intents with completions.
        f"""CREATE VIEW events AS
            SELECT r.run_id, e.id & {(1 << 32) - 1} AS seq, e.*
            FROM event_rows e JOIN runs r ON r.num = e.id >> 32""",
        # `intent_rows` now holds only the intents a run starts with (a fork's) and those
        # of schema 4; an event row records the rest.
        f"""CREATE VIEW intents AS
            WITH recorded AS (
                SELECT run_id, call_id, seq, state, tool, call, key FROM intent_rows
                UNION ALL
                SELECT r.run_id, e.intent, e.id & {(1 << 32) - 1}, e.intent_state,
                       json_extract(e.intent_call, '$.name'), e.intent_call, e.key
                FROM event_rows e JOIN runs r ON r.num = e.id >> 32
                WHERE e.intent_call IS NOT NULL
            )
            SELECT i.*, (SELECT min(e.seq) FROM events e WHERE e.run_id = i.run_id
                         AND e.seq > i.seq AND e.closes = i.call_id) AS completed_seq
            FROM recorded i""",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)


def open_schema(db: sqlite3.Connection, path: str, durability: str) -> None:
    """Check that `db` is a statechart store this package can read (or a new file), set its
    pragmas, and migrate it to `SCHEMA_VERSION`; raises without changing a foreign file."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        db.close()
        raise StoreError(
            f"{path} is an SQLite database of another program (it has tables but no "
            "statechart schema version); choose another file (nothing was changed)"
        )
    if version > SCHEMA_VERSION:
        db.close()
        raise SchemaVersionError(
            f"{path} has schema version {version}, newer than this statechart's "
            f"{SCHEMA_VERSION}; upgrade statechart to open it (nothing was changed)"
        )
    db.execute("PRAGMA journal_mode=WAL")
    # The background checkpointer keeps the WAL short; SQLite's own checkpoint, inside
    # some COMMIT, is only the backstop for when it falls behind.
    db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
    db.execute(f"PRAGMA synchronous={'FULL' if durability == 'power' else 'NORMAL'}")
    for target in range(version + 1, SCHEMA_VERSION + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            now = db.execute("PRAGMA user_version").fetchone()[0]
            if now < target:  # another process may have migrated meanwhile
                for statement in MIGRATIONS[target]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={target}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


class transaction:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` when the block raises."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
