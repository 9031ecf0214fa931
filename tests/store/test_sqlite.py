"""The SQLite store: its settings, its schema version, plain-SQL audits, bad files,
append-only intents and a busy database."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from statechart import (
    ConflictError,
    CorruptRowError,
    SchemaVersionError,
    ScriptedModel,
    SQLiteStore,
    StatechartError,
    StoreError,
    call,
    drive,
    reply,
    resume,
    run_to_end,
    start,
    to_dict,
    tool,
)
from statechart.store.schema import SCHEMA_VERSION
from tests.engine.test_advance import chart, finish
from tests.support.durable import FINISH, never_refund, pay_chart
from tests.support.helpers import run_script
from tests.support.stored_v0_1 import without_added

pytestmark = pytest.mark.anyio


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("durability", "synchronous"), [("process", 1), ("power", 2)])
def test_durability_sets_wal_and_synchronous(
    tmp_path: Path, durability: str, synchronous: int
) -> None:
    store = SQLiteStore(tmp_path / "runs.db", durability=durability)  # type: ignore[arg-type]
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == synchronous
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


def test_an_unknown_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use 'process' or 'power'"):
        SQLiteStore(tmp_path / "runs.db", durability="disk")  # type: ignore[arg-type]


def test_a_newer_schema_is_refused_and_the_file_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.execute("CREATE TABLE runs (run_id TEXT)")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        SQLiteStore(path)
    assert digest(path) == before
    assert not (tmp_path / "runs.db-wal").exists()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are not the runs you are looking for\n" * 100)
    before = digest(path)
    with pytest.raises(StoreError, match="cannot be opened as a statechart store"):
        SQLiteStore(path)
    assert digest(path) == before


def test_another_programs_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(StoreError, match="SQLite database of another program"):
        SQLiteStore(path)
    assert digest(path) == before


async def test_two_connections_are_fenced_by_seq(tmp_path: Path) -> None:
    """Two processes' connections on one file: the second append at a seq conflicts."""
    path = tmp_path / "runs.db"
    one, two = SQLiteStore(path), SQLiteStore(path)
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=one
    )
    with pytest.raises(ConflictError):
        await two.append(steps[-1])
    assert (await two.load(end.run_id)).snapshot == end
    one.close()
    two.close()


async def test_what_did_it_do_and_what_did_each_step_cost_is_one_query(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    rows = store._db.execute(
        "SELECT seq, source, target, actor, tool, reason, input_tokens + output_tokens, "
        "cost_micros FROM events WHERE run_id = ? ORDER BY seq",
        (end.run_id,),
    ).fetchall()
    assert [r[0] for r in rows] == list(range(1, end.seq + 1))
    assert [(r[1], r[2], r[3]) for r in rows] == [
        (s.event.source, s.event.target, s.event.actor) for s in steps
    ]
    assert [r[4] for r in rows] == [  # the calls a reply proposed, then each call run
        "search_kb",
        "search_kb",
        "next_state",
        "next_state",
        "next_state",
        "next_state",
    ]
    store.close()


async def corrupt_and_check(tmp_path: Path, sql: str, match: str) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    c = chart()
    model = ScriptedModel([reply(call("search_kb", "c1", query="q"))])
    run = await start(c, store=store, model=model, run_id="r1")
    async with contextlib.aclosing(drive(c, run.run_id, store=store, model=model)) as steps:
        async for record in steps:
            if record.event.seq == 2:
                break
    store._db.execute(sql)
    store.close()
    store = SQLiteStore(path)
    counts = store._db.execute("SELECT count(*) FROM events").fetchone()
    with pytest.raises(CorruptRowError, match=match):
        await resume(c, "r1", store=store, model=ScriptedModel([]))
    assert store._db.execute("SELECT count(*) FROM events").fetchone() == counts
    store.close()


async def test_a_truncated_snapshot_is_a_clear_error_and_nothing_changes(tmp_path: Path) -> None:
    await corrupt_and_check(
        tmp_path,
        "UPDATE runs SET snapshot = substr(snapshot, 1, 40)",
        "runs row of run r1 is corrupt or truncated",
    )


async def test_a_corrupt_transcript_row_is_a_clear_error(tmp_path: Path) -> None:
    await corrupt_and_check(
        tmp_path,
        'UPDATE event_rows SET messages = \'[{"role": "wizard"}]\' WHERE messages IS NOT NULL',
        "transcript of run r1 at seq 1 is corrupt",
    )


async def test_a_corrupt_event_row_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    end, _, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    store._db.execute("UPDATE event_rows SET body = '{\"calls\": [' WHERE id % 4294967296 = 1")
    with pytest.raises(CorruptRowError, match=f"events row of run {end.run_id} at seq 1"):
        await store.events(end.run_id)
    store._db.execute("UPDATE event_rows SET body = '[1, 2]' WHERE id % 4294967296 = 1")
    with pytest.raises(CorruptRowError, match="not a JSON object"):
        await store.events(end.run_id)
    store._db.execute("UPDATE event_rows SET body = '{}' WHERE id % 4294967296 = 1")
    for column, value, said in (
        ("steps", "'x'", "column steps holds str, not an integer"),
        ("source", "X'0102'", "column source holds bytes, not text"),
        ("visit", "'abc'", "column visit holds str, not an integer"),
    ):
        good = store._db.execute(
            f"SELECT {column} FROM event_rows WHERE id % 4294967296 = 2"
        ).fetchone()[0]
        store._db.execute(f"UPDATE event_rows SET {column} = {value} WHERE id % 4294967296 = 2")
        with pytest.raises(CorruptRowError, match=f"seq 2 is corrupt.*{said}"):
            await store.events(end.run_id)
        store._db.execute(f"UPDATE event_rows SET {column} = ? WHERE id % 4294967296 = 2", (good,))
    assert len(await store.events(end.run_id)) == end.seq  # restored: it reads again
    store.close()


async def test_writes_can_run_off_the_event_loop(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db", offload=True)
    end, steps, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    assert end.state == "done"
    assert await store.events(end.run_id) == [s.event for s in steps]
    store.close()


async def test_the_wal_is_checkpointed_off_the_hot_path(tmp_path: Path) -> None:
    """Without the background checkpointer the WAL would only be copied back past
    BACKSTOP_PAGES; with it, the WAL stays a few appends' worth of pages."""
    from statechart.store.schema import BACKSTOP_PAGES

    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    store._checkpointer.every = 20
    for i in range(60):
        await run_script(
            chart(), [reply(call("search_kb", "c1", query=f"q{i}")), *finish()], store=store
        )
    wal = (tmp_path / "runs.db-wal").stat().st_size
    store.close()
    assert store._checkpointer.checkpoints >= 1
    assert wal < BACKSTOP_PAGES * 4096 / 4


def test_a_version_1_database_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    from statechart.store.schema import MIGRATIONS

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for statement in MIGRATIONS[1]:
        db.execute(statement)
    db.execute("INSERT INTO charts (version, description) VALUES ('v-old', 'chart old')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    store = SQLiteStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    rows = store._db.execute("SELECT version, description, source FROM charts").fetchall()
    assert rows == [("v-old", "chart old", None)]
    store.close()


async def test_the_chart_source_is_kept_per_version(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    await store.save_chart("v1", "chart x", "agents/x.py:chart")
    await store.save_chart("v1", "chart x")  # a later start without a source keeps it
    assert await store.chart_source("v1") == "agents/x.py:chart"
    assert await store.chart_source("v2") is None
    store.close()


async def test_intent_rows_are_never_overwritten_by_a_reused_call_id(db: Path) -> None:
    """The intents table is append-only: a second call reusing a call id (some
    OpenAI-compatible servers number ids per reply, `call_0`) adds a row and keeps the first."""
    refunds: list[str] = []

    @tool(retry="keyed")
    async def refund(order: str, idempotency_key: str | None = None) -> str:
        """Refund."""
        refunds.append(order)
        return f"refunded {order}"

    c = pay_chart(refund)
    store = SQLiteStore(db)
    model = ScriptedModel(
        [
            reply(call("refund", "call_0", order="o1")),
            reply(call("refund", "call_0", order="o2")),
            FINISH,
        ]
    )
    await start(c, store=store, model=model, run_id="r1")
    end = await run_to_end(c, "r1", store=store, model=model)
    assert end.state == "done" and refunds == ["o1", "o2"]
    intents = await store.intents("r1")
    assert [i.call.arguments for i in intents] == [{"order": "o1"}, {"order": "o2"}]


async def test_a_busy_database_is_a_statechart_error_naming_the_run(db: Path) -> None:
    """A database locked by another connection past the store's timeout surfaces as a
    StatechartError naming the run, not a bare sqlite3 error."""
    c = pay_chart(never_refund())
    store = SQLiteStore(db, timeout=0.05)
    await start(c, store=store, model=ScriptedModel([]), run_id="r1")
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock (e.g. a backup)
    try:
        with pytest.raises(StatechartError, match="r1"):
            await resume(c, "r1", store=store, model=ScriptedModel([FINISH]))
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_a_store_written_before_the_layout_change_loads_and_resumes(tmp_path: Path) -> None:
    """A SQLite file written by statechart before the layout change (no stored name
    changed) loads as it was: its log folds to its snapshot, its chart version still
    matches, and the run waiting for approval is approved and resumed to `done` with the
    refund run once, under the key recorded in the file."""
    import shutil

    from statechart import approve, resume
    from statechart.engine import compiled, replay
    from tests.support import stored_before

    path = tmp_path / "before.db"
    shutil.copyfile(Path(__file__).parent / "data" / "before_layout.db", path)
    store = SQLiteStore(path)
    run = (await store.load(stored_before.RUN_ID)).snapshot
    chart = stored_before.chart()
    assert run.chart_version == chart.version
    assert (run.status, run.state, run.seq) == ("waiting", "pay.approve", 6)
    events = await store.events(run.run_id)
    base = await store.base(run.run_id)
    assert base.seq == 0
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert replay(compiled(chart), base, events) == run
    key = run.pending[0].key
    assert key is not None
    await approve(chart, run.run_id, store=store, by="ops")
    end = await resume(chart, run.run_id, store=store, model=stored_before.model_after_approval())
    assert (end.state, end.status) == ("done", "ended")
    ran = [e for e in await store.events(run.run_id) if e.trigger == "results"]
    refunds = [e for e in ran if e.call is not None and e.call.name == "refund"]
    assert [e.result for e in refunds] == ["refunded 1250 for T-1"]
    intents = [i for i in await store.intents(run.run_id) if i.call.name == "refund"]
    assert [i.key for i in intents] == [key]
    store.close()


async def test_a_schema_2_file_is_migrated_root_named_and_its_runs_go_on(tmp_path: Path) -> None:
    """A file written at schema 2 (root level `""`, no lease process) opens at schema 3:
    its ledgers and exhaustion labels name the root `root` in SQL and in records, its
    event logs still replay to their snapshots, and its waiting run finishes. Its lease,
    left by a driver with no recorded process, is still waited out (no takeover)."""
    import shutil

    from statechart import LeaseHeldError, approve, resume
    from statechart.engine import compiled, replay
    from tests.support import stored_schema2 as old

    path = tmp_path / "schema2.db"
    shutil.copyfile(Path(__file__).parent / "data" / "schema_2.db", path)
    store = SQLiteStore(path)
    db = store._db
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    ledgers = dict(db.execute("SELECT run_id, json_extract(snapshot, '$.ledger') FROM runs"))
    assert json.loads(ledgers[old.EXHAUSTED_ID]) == {
        "root": {"steps": 12, "model_calls": 6, "tool_calls": 6, "wall_ms": 1}
    }
    assert db.execute(
        "SELECT exhausted, trigger FROM events WHERE exhausted IS NOT NULL"
    ).fetchall() == [("root:steps", "exhaust:root")]
    assert not db.execute("SELECT 1 FROM runs WHERE snapshot LIKE '%\"\":%'").fetchall()
    chart = old.chart()
    for run_id in (old.EXHAUSTED_ID, old.WAITING_ID):
        run = (await store.load(run_id)).snapshot
        assert replay(compiled(chart), await store.base(run_id), await store.events(run_id)) == run
    done = (await store.load(old.EXHAUSTED_ID)).snapshot
    assert done.ledger["root"].steps == 12 and "" not in done.ledger
    assert (await store.events(old.EXHAUSTED_ID))[-1].exhausted == "root:steps"
    await approve(chart, old.WAITING_ID, store=store, by="ops")
    with pytest.raises(LeaseHeldError):
        await resume(chart, old.WAITING_ID, store=store, model=old.after_approval())
    db.execute("UPDATE runs SET lease_expires=0 WHERE run_id=?", (old.WAITING_ID,))
    end = await resume(chart, old.WAITING_ID, store=store, model=old.after_approval())
    assert (end.state, end.status, end.ledger["root"].model_calls) == ("done", "ended", 2)
    store.close()


def test_legacy_root_names_load_in_records() -> None:
    """A record written before the root was named (JSON from any store) still loads."""
    from statechart import Event, Run
    from statechart.records.codec import convert

    run = convert(
        Run,
        {
            "run_id": "r",
            "chart": "c",
            "chart_version": "v",
            "model": "m",
            "state": "a",
            "ledger": {"": {"steps": 3}, "a": {"steps": 1}},
        },
    )
    assert run.ledger["root"].steps == 3 and run.ledger["a"].steps == 1 and "" not in run.ledger
    event = convert(
        Event,
        {
            "run_id": "r",
            "seq": 1,
            "time": 0,
            "source": "a",
            "target": "escalated",
            "trigger": "exhaust:",
            "actor": "system",
            "exhausted": ":steps",
        },
    )
    assert event.exhausted == "root:steps"


async def test_a_schema_4_file_is_migrated_to_one_row_per_transition_and_its_runs_go_on(
    tmp_path: Path,
) -> None:
    """A file written at schema 4 (events beside intent rows, a snapshot per event) opens
    at schema 5: every event, intent, transcript and fingerprint reads back as the code
    that wrote it read them, the SQL views keep their columns, the run killed with an intent
    recorded is taken over and finished without running anything twice, and the waiting
    run is approved and finished; new events then land in `event_rows` alone."""
    import shutil

    from statechart import approve, resume
    from statechart.engine import compiled, replay
    from tests.support import stored_schema4 as old

    data = Path(__file__).parent / "data"
    path = tmp_path / "schema4.db"
    shutil.copyfile(data / "schema_4.db", path)
    seen = json.loads((data / "schema_4.json").read_text())
    store = SQLiteStore(path)
    db = store._db
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    chart = old.chart()
    for run_id in old.RUNS:
        was = seen[run_id]
        loaded = await store.load(run_id)
        assert loaded.tail == () and without_added(to_dict(loaded.snapshot)) == was["run"]
        events = await store.events(run_id)
        assert [without_added(to_dict(e)) for e in events] == was["events"]
        assert [to_dict(i) for i in await store.intents(run_id)] == was["intents"]
        assert [to_dict(m) for m in await store.transcript(run_id, 1)] == (was["transcript"])
        assert sorted(await store.fingerprints(run_id)) == was["fingerprints"]
        assert replay(compiled(chart), await store.base(run_id), events) == loaded.snapshot
        sql = db.execute(
            "SELECT seq, trigger, target FROM events WHERE run_id=? ORDER BY seq", (run_id,)
        ).fetchall()
        assert sql == [(e["seq"], e["trigger"], e["target"]) for e in was["events"]]
    open_ = db.execute(
        "SELECT run_id, call_id FROM intents WHERE completed_seq IS NULL ORDER BY run_id"
    ).fetchall()
    assert open_ == [(old.KILLED_ID, "l2"), (old.WAITING_ID, "s1")]

    end = await resume(chart, old.KILLED_ID, store=store, model=old.after_approval())
    events = await store.events(old.KILLED_ID)
    assert [e.trigger for e in events[3:5]] == ["takeover", "next_call"]
    assert end.state == "done" and [e.call.id for e in events if e.fingerprint] == [
        "l1",
        "l2",
        "l3",
    ]
    await approve(chart, old.WAITING_ID, store=store, by="ops")
    end = await resume(chart, old.WAITING_ID, store=store, model=old.after_approval())
    assert (end.state, end.status) == ("done", "ended")
    assert (await store.load(old.WAITING_ID)).snapshot == end
    appended = 0
    for run_id in old.RUNS:
        appended += len(await store.events(run_id)) - len(seen[run_id]["events"])
    assert appended and db.execute(
        "SELECT count(*) FROM event_rows WHERE run_steps IS NOT NULL"
    ).fetchone() == (appended,)
    assert db.execute("SELECT count(*) FROM intent_rows").fetchone() == (
        sum(len(seen[run_id]["intents"]) for run_id in old.RUNS),  # none added
    )
    store.close()


def test_schema_5_marks_a_lease_whose_holder_was_not_the_last_writer(tmp_path: Path) -> None:
    """At schema 4 `lease_seq` was the holder's last append: a killed holder behind the
    run's seq means a person wrote after it (an approval). Migrated, that lease says
    another writer came (`-1`), so taking it over records no takeover of the approved
    call; a holder that was the last writer keeps its seq."""
    import anyio

    from statechart.store.schema import MIGRATIONS

    path = tmp_path / "four.db"
    db = sqlite3.connect(path)
    for version in range(1, 5):
        for statement in MIGRATIONS[version]:
            db.execute(statement)
    for run_id, seq, lease_seq in (("approved", 5, 4), ("killed", 7, 7)):
        db.execute(
            "INSERT INTO runs (run_id, chart, status, state, seq, snapshot, lease_holder, "
            "lease_expires, lease_seq) VALUES (?, 'c', 'running', 'a', ?, '{}', 'dead#1', 0, ?)",
            (run_id, seq, lease_seq),
        )
    db.execute("PRAGMA user_version=4")
    db.commit()
    db.close()
    store = SQLiteStore(path)
    rows = dict(store._db.execute("SELECT run_id, lease_seq FROM runs").fetchall())
    assert rows == {"approved": -1, "killed": 7}
    approved = anyio.run(store.acquire, "approved", "b")
    killed = anyio.run(store.acquire, "killed", "b")
    assert (approved.took_over, approved.previous_seq) == (True, None)
    assert (killed.took_over, killed.previous_seq) == (True, 7)
    store.close()


async def test_lock_advice_only_for_a_lock_and_malformed_json_is_a_corrupt_row(
    tmp_path: Path,
) -> None:
    """Another process holding the database past the timeout gets the timeout advice; a
    row holding malformed JSON that SQL reads (a listing's `json_extract`) is a
    `CorruptRowError`, not that advice."""
    import sqlite3

    from statechart import StoreError

    path = tmp_path / "runs.db"
    store = SQLiteStore(path, timeout=0.2)
    end, _, _, _ = await run_script(
        chart(), [reply(call("search_kb", "c1", query="q")), *finish()], store=store
    )
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write lock, held
    with pytest.raises(StoreError, match="longer than the 0 s timeout"):
        await store.acquire(end.run_id, "me")
    other.execute("ROLLBACK")
    other.execute("UPDATE runs SET snapshot = '{bad'")
    with pytest.raises(CorruptRowError, match="malformed JSON") as caught:
        await store.summaries()
    assert "timeout" not in str(caught.value)
    other.close()
    store.close()
