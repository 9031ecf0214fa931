"""Runs written by statechart 0.1 (commit ef623c0, records as pydantic models), kept as
fixtures so later code can be tested to still read rows that 0.1 wrote:

- `tests/store/data/v0_1.db`: an SQLite store (schema 5, left in WAL mode and
  checkpointed into the one file, like `schema_4.db`), with what 0.1 read back from it in
  `tests/store/data/v0_1.json`;
- `tests/store/data/v0_1_postgres.sql`: the same runs written to a PostgreSQL store (schema
  2), as `pg_dump --inserts --no-owner --no-privileges` printed the database, with what 0.1
  read back from it in `tests/store/data/v0_1_postgres.json`. Recent pg_dump releases (from
  13.22, 14.19, 15.14, 16.10, 17.6 on; it was written by 15.20) print the psql-only
  meta-commands `\\restrict KEY` and `\\unrestrict KEY` around the dump (KEY is
  random per dump); every line starting with a backslash is dropped when the file is
  written, so the file is plain SQL: restore it into an empty database by executing its
  whole text as one `execute` on an autocommit psycopg connection (no parameters, so it
  goes as one simple query). It sets the session's `search_path` to '' (the tables are
  `public.*`): open the store on another connection.

Each JSON file maps every run id of `RUNS` to `{"run", "events", "intents", "transcripts",
"fingerprints"}` as 0.1 read them back from a freshly opened store (`run` is the snapshot
`load` returned, with an empty tail; `transcripts` maps each visit seq, as a string, to
its messages), plus `"summaries"`: `store.summaries()`. Times (`time`, `created_at`,
`updated_at`, `wall_ms`), trace and span ids, lease holders and process identities come
out differently on every regeneration; everything else is fixed (fixed run and call ids,
scripted models; the idempotency keys derive from those), and the two JSON files agree
but for those.

The runs, all of `chart()` (`gather` -> a ported `research` sub-chart -> `resolve` with a
keyed refund behind approval -> the code state `check` -> `done`):

- `DONE_ID`: a duplicate call refused, a guard refusal, context patches (the root's and
  the sub-chart's `scope`), the sub-chart's `inputs`/`outputs`, a keyed refund approved
  with edited arguments, a switch of model (`Event.model`), a code state's patch; ended.
- `WAITING_ID`: waits for approval of its keyed refund (pending call with its key, open
  intent); `after_approval()` finishes it once approved.
- `REJECTED_ID`: a fork of the waiting run at its last event (inherited open intent),
  rejected, then ended in `failed` through an edge with `max_traversals`.
- `APPROVED_ID`: another fork of the waiting run there, approved and not resumed (its
  pending call `approved_by`); `after_approval()` finishes it with its parent's key.
- `EXHAUSTED_ID`: a reply calling no tool (a `user` nudge), a call with malformed
  arguments (kept as the raw text) refused, a failing tool (`error`) in a reply without
  usage (`usage_missing`), then a reply over the strict token cap of `gather` (`breach`,
  `Run.breached`), routed by the exhaustion (`exhausted`, `Run.routed`) to `failed`.
- `FORK_ID`: a fork of the done run after its first proposal, in `gather.act` with its
  head call in doubt (`Run.doubt`, inherited intent), never driven; `fork_finishing()`
  drives it to `failed`.
- `KILLED_ID`: its driver died while running a call inside the ported sub-chart (a tool
  raised a `BaseException`): the intent is open, the lease left behind (expired), the
  sub-chart's context in `Run.contexts`; `after_takeover()` finishes it.
- `CANCELLED_ID`: written last, with tracing on (`Run.trace`, `Event.span`); cancelled by
  a person after one call.

This module must import with later code too: its module level, `chart()`, `RUNS` and the
model factories use only `from statechart import ...` (and pydantic contexts, as charts
declare them); `main` and the functions it calls run only on 0.1.

Regenerate (only ever from a checkout of commit ef623c0, here /work/v01, with this file
copied into its tests/support/; run from the checkout's directory, or the working tree's
package shadows it), then check with `tests/store/test_v0_1_rows.py`:

    cp /work/main/tests/support/stored_v0_1.py /work/v01/tests/support/ && \\
    cd /work/v01 && createdb -h 127.0.0.1 v01_fixture && \\
    PYTHONPATH=/work/v01 /work/main/.venv/bin/python -m tests.support.stored_v0_1 \\
        /work/main/tests/store/data/v0_1.db /work/main/tests/store/data/v0_1.json \\
        --postgres postgresql://127.0.0.1:5432/v01_fixture \\
        /work/main/tests/store/data/v0_1_postgres.sql; \\
    dropdb -h 127.0.0.1 v01_fixture
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    Facts,
    ScriptedModel,
    State,
    ToolCall,
    Usage,
    call,
    reply,
    tool,
)

DONE_ID = "v01-done"
WAITING_ID = "v01-waiting"
REJECTED_ID = "v01-rejected"
APPROVED_ID = "v01-approved"
EXHAUSTED_ID = "v01-exhausted"
FORK_ID = "v01-fork"
KILLED_ID = "v01-killed"
CANCELLED_ID = "v01-cancelled"
RUNS = (
    DONE_ID,
    WAITING_ID,
    REJECTED_ID,
    APPROVED_ID,
    EXHAUSTED_ID,
    FORK_ID,
    KILLED_ID,
    CANCELLED_ID,
)
"""In the order they were created (`summaries()` lists them so)."""

USED = Usage(input_tokens=30, output_tokens=10, cost_micros=7)
"""What each scripted reply reports (below the strict cap's worst case of `gather`)."""


class Killed(BaseException):
    """Stands for the driver's process dying while a call runs (not an `Exception`, so the
    driver does not record it as the call's error: it releases the lease unclean)."""


_KILL: list[str] = []
"""Questions `search` dies on, once each; set only while the fixtures are written."""


class Ticket(BaseModel):
    order_id: str = ""
    facts: str | None = None
    findings: str | None = None
    resolution: str | None = None


class Notes(BaseModel):
    question: str = ""
    findings: str | None = None


@tool(retry="safe")
def lookup(order_id: str) -> dict[str, Any]:
    """Look an order up: its amount and status."""
    return {"outcome": "hit", "order_id": order_id, "amount_cents": 2000, "status": "charged"}


@tool(retry="safe")
def ledger(order_id: str) -> str:
    """Read the payments ledger of an order (its backend is down)."""
    raise RuntimeError(f"ledger backend unavailable for {order_id}")


@tool(retry="safe")
def search(question: str) -> str:
    """Search the payment notes."""
    if question in _KILL:
        _KILL.remove(question)
        raise Killed(f"the driver died while searching {question!r}")
    return f"notes about {question}: one duplicate charge"


@tool(retry="keyed", needs_approval=True)
def refund(order_id: str, amount_cents: int, idempotency_key: str) -> dict[str, Any]:
    """Refund an order through the payments API (deduplicated by idempotency key)."""
    return {
        "outcome": "refunded",
        "order_id": order_id,
        "amount_cents": amount_cents,
        "key": idempotency_key,
    }


def facts_first(facts: Facts) -> str | None:
    return None if getattr(facts.context, "facts", None) else "write the facts first"


async def verify(ticket: Ticket) -> Decision:
    return Decision("done", {"resolution": f"verified: {ticket.resolution}"}, reason="on record")


def research() -> Chart:
    """The ported sub-chart: its own `Notes` context."""
    return Chart(
        "research",
        context=Notes,
        states=(
            State(
                "dig",
                tools=(search,),
                reads=("question",),
                writes=("findings",),
                instructions="Search the notes, then write the findings.",
            ),
            State("done", kind="terminal"),
        ),
        edges=(Edge("dig", "done"),),
    )


def chart() -> Chart:
    """gather -> research (ported sub-chart) -> resolve (keyed refund, needs approval) ->
    check (code) -> done; gather and resolve may give up in `failed`."""
    return Chart(
        "v01",
        context=Ticket,
        budget=Budget(max_steps=40),
        states=(
            State(
                "gather",
                tools=(lookup, ledger),
                reads=("order_id",),
                writes=("facts",),
                instructions="Gather the facts of the order.",
                budget=Budget(max_tokens=20_000, strict=True),
                on_exhausted="failed",
            ),
            State(
                "research",
                kind="chart",
                chart=research,
                input={"question": "order_id"},
                output={"findings": "findings"},
                exits={"done": "resolve"},
            ),
            State(
                "resolve",
                tools=(refund,),
                reads=("order_id", "facts", "findings"),
                writes=("resolution",),
                instructions="Refund the order if the facts justify it.",
            ),
            State("check", kind="code", handler=verify, writes=("resolution",)),
            State("done", kind="terminal"),
            State("failed", kind="terminal", outcome="failure"),
        ),
        edges=(
            Edge("gather", "research", guard=facts_first),
            Edge("gather", "failed"),
            Edge("resolve", "check"),
            Edge("resolve", "failed", max_traversals=1),
            Edge("check", "done"),
        ),
    )


def _to_research(facts: str, findings: str) -> list[Any]:
    return [
        reply(call("next_state", "n1", target="research", facts=facts), usage=USED),
        reply(call("next_state", "n2", target="done", findings=findings), usage=USED),
    ]


def done_first() -> ScriptedModel:
    """DONE_ID up to its approval."""
    return ScriptedModel(
        [
            reply(
                call("lookup", "l1", order_id="A-7"),
                call("lookup", "l2", order_id="A-7"),
                content="Looking the order up.",
                usage=USED,
            ),
            reply(call("next_state", "n0", target="research"), usage=USED),
            reply(call("next_state", "n1", target="research", facts="charged twice"), usage=USED),
            reply(call("search", "s1", question="A-7"), usage=USED),
            reply(call("next_state", "n2", target="done", findings="a duplicate"), usage=USED),
            reply(call("refund", "r1", order_id="A-7", amount_cents=2000), usage=USED),
        ]
    )


def done_second() -> ScriptedModel:
    """DONE_ID after its approval, under another model spec."""
    return ScriptedModel(
        [reply(call("next_state", "n3", target="check", resolution="refunded 1500"), usage=USED)],
        spec="scripted:second",
    )


def to_approval() -> ScriptedModel:
    """WAITING_ID up to its approval."""
    return ScriptedModel(
        [
            *_to_research("charged twice", "one duplicate"),
            reply(call("refund", "r1", order_id="B-9", amount_cents=500), usage=USED),
        ]
    )


def after_approval() -> ScriptedModel:
    """WAITING_ID once its refund is approved: to `check`, then `done`."""
    return ScriptedModel(
        [reply(call("next_state", "n3", target="check", resolution="refunded 500"), usage=USED)]
    )


def after_rejection() -> ScriptedModel:
    """REJECTED_ID once its refund is rejected: gives up."""
    return ScriptedModel([reply(call("next_state", "n3", target="failed"), usage=USED)])


def exhausting() -> ScriptedModel:
    """EXHAUSTED_ID: a reply calling nothing, one with malformed arguments, a failing call
    in a reply without usage, then a reply over the strict cap."""
    return ScriptedModel(
        [
            reply(content="The ledger may be down.", usage=USED),
            reply(ToolCall(id="g0", name="lookup", arguments='{"order_id": '), usage=USED),
            reply(
                call("ledger", "g1", order_id="D-1"),
                usage=Usage(input_tokens=30, output_tokens=10, missing=True),
            ),
            reply(
                call("lookup", "g2", order_id="D-1"),
                usage=Usage(input_tokens=60_000, output_tokens=10, cost_micros=900),
            ),
        ]
    )


def fork_finishing() -> ScriptedModel:
    """FORK_ID, driven: its two lookups run (the second refused again), then it gives up."""
    return ScriptedModel([reply(call("next_state", "n9", target="failed"), usage=USED)])


def to_kill() -> ScriptedModel:
    """KILLED_ID: into the sub-chart, two searches; the driver dies in the second."""
    return ScriptedModel(
        [
            reply(call("next_state", "n1", target="research", facts="charged"), usage=USED),
            reply(
                call("search", "s1", question="G-5"),
                call("search", "s2", question="G-5 again"),
                usage=USED,
            ),
        ]
    )


def after_takeover() -> ScriptedModel:
    """KILLED_ID taken over: the second search runs again, then to `check` and `done`."""
    return ScriptedModel(
        [
            reply(call("next_state", "n2", target="done", findings="nothing new"), usage=USED),
            reply(call("next_state", "n3", target="check", resolution="no refund"), usage=USED),
        ]
    )


def cancelling() -> ScriptedModel:
    """CANCELLED_ID: one lookup (then a person cancels it)."""
    return ScriptedModel([reply(call("lookup", "l1", order_id="F-3"), usage=USED)])


# -- writing (statechart 0.1 only) --------------------------------------------------------


async def _untraced(store: Any) -> None:
    import contextlib

    from statechart import approve, drive, fork, reject, resume, run_to_end, start

    c = chart()
    model = done_first()
    run = await start(c, store=store, model=model, context={"order_id": "A-7"}, run_id=DONE_ID)
    end = await run_to_end(c, run, store=store, model=model)
    assert end.status == "waiting", end
    await approve(c, DONE_ID, store=store, by="ops", note="less", edits={"amount_cents": 1500})
    end = await resume(c, DONE_ID, store=store, model=done_second())
    assert (end.state, end.status) == ("done", "ended"), end

    model = to_approval()
    run = await start(c, store=store, model=model, context={"order_id": "B-9"}, run_id=WAITING_ID)
    waiting = await run_to_end(c, run, store=store, model=model)
    assert waiting.status == "waiting" and waiting.pending[0].key, waiting

    await fork(c, WAITING_ID, waiting.seq, store=store, new_run_id=REJECTED_ID)
    await reject(c, REJECTED_ID, store=store, by="ops", reason="refund at most 100 cents")
    end = await resume(c, REJECTED_ID, store=store, model=after_rejection())
    assert (end.state, end.traversals) == ("failed", {"resolve->failed": 1}), end

    await fork(c, WAITING_ID, waiting.seq, store=store, new_run_id=APPROVED_ID)
    await approve(c, APPROVED_ID, store=store, by="ops", note="fine")

    model = exhausting()
    run = await start(c, store=store, model=model, context={"order_id": "D-1"}, run_id=EXHAUSTED_ID)
    end = await run_to_end(c, run, store=store, model=model)
    assert end.state == "failed" and end.breached and end.routed, end

    first = next(e for e in await store.events(DONE_ID) if e.trigger == "propose")
    forked = await fork(c, DONE_ID, first.seq, store=store, new_run_id=FORK_ID)
    assert forked.doubt == "l1", forked

    model = to_kill()
    run = await start(c, store=store, model=model, context={"order_id": "G-5"}, run_id=KILLED_ID)
    _KILL.append("G-5 again")
    try:
        async with contextlib.aclosing(drive(c, run, store=store, model=model)) as steps:
            async for _ in steps:
                pass
        raise AssertionError("the driver was to die in search s2")
    except Killed:
        pass


async def _traced(store: Any) -> None:
    import contextlib

    from statechart import cancel, drive, start

    c = chart()
    model = cancelling()
    run = await start(c, store=store, model=model, context={"order_id": "F-3"}, run_id=CANCELLED_ID)
    async with contextlib.aclosing(drive(c, run, store=store, model=model)) as steps:
        async for record in steps:
            if record.event.seq == 2:
                break
    await cancel(c, CANCELLED_ID, store=store, reason="a duplicate ticket", by="ops")


async def read_back(store: Any) -> dict[str, Any]:
    """Every run as `store` reads it back, and its summaries (JSON values, 0.1's dumps)."""
    seen: dict[str, Any] = {}
    for run_id in RUNS:
        loaded = await store.load(run_id)
        assert loaded.tail == (), (run_id, loaded.tail)
        events = await store.events(run_id)
        visits = {e.visit for e in events if e.visit is not None}
        if loaded.snapshot.visit is not None:
            visits.add(loaded.snapshot.visit.seq)
        seen[run_id] = {
            "run": loaded.snapshot.model_dump(mode="json"),
            "events": [e.model_dump(mode="json") for e in events],
            "intents": [i.model_dump(mode="json") for i in await store.intents(run_id)],
            "transcripts": {
                str(v): [m.model_dump(mode="json") for m in await store.transcript(run_id, v)]
                for v in sorted(visits)
            },
            "fingerprints": sorted(await store.fingerprints(run_id)),
        }
    seen["summaries"] = [s.model_dump(mode="json") for s in await store.summaries()]
    return seen


def _write_json(path: str, seen: dict[str, Any]) -> None:
    import json
    from pathlib import Path

    Path(path).write_text(json.dumps(seen, indent=1, sort_keys=True) + "\n")


async def main(sqlite_path: str, json_path: str, dsn: str | None, sql_path: str | None) -> None:
    import os
    import sqlite3
    import subprocess
    from pathlib import Path

    from statechart import SQLiteStore
    from statechart.store.postgres import PostgresStore
    from statechart.tracing import configure

    for suffix in ("", "-wal", "-shm"):
        Path(sqlite_path + suffix).unlink(missing_ok=True)
    stores: list[Any] = [SQLiteStore(sqlite_path)]
    if dsn is not None:
        stores.append(PostgresStore(dsn))
    for store in stores:
        await _untraced(store)
    provider = configure(exporter="none")  # from here on every run is traced
    for store in stores:
        await _traced(store)
    provider.shutdown()
    stores[0].close()
    if dsn is not None:
        await stores[1].close()

    sqlite = SQLiteStore(sqlite_path)
    _write_json(json_path, await read_back(sqlite))
    sqlite.close()
    db = sqlite3.connect(sqlite_path)
    assert db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    db.close()
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(sqlite_path + suffix), suffix

    if dsn is not None and sql_path is not None:
        postgres = PostgresStore(dsn)
        _write_json(str(Path(sql_path).with_suffix(".json")), await read_back(postgres))
        await postgres.close()
        dump = subprocess.run(
            ["pg_dump", "--inserts", "--no-owner", "--no-privileges", "--dbname", dsn],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        lines = [line for line in dump.splitlines() if not line.startswith("\\")]
        Path(sql_path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    import argparse

    import anyio

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sqlite_path")
    parser.add_argument("json_path")
    parser.add_argument("--postgres", nargs=2, metavar=("DSN", "SQL_PATH"))
    args = parser.parse_args()
    dsn, sql = args.postgres or (None, None)
    anyio.run(main, args.sqlite_path, args.json_path, dsn, sql)


ADDED: dict[str, Any] = {
    "wake": None,
    "attempt": 0,
    "timeout": None,
    "timers": {},
    "history": {},
    "remembered": {},
    "regions": {},
}
"""Fields the records gained after 0.2.0 (issues #28 and #30), with their defaults: data
written before has none of them, and reads back with these values."""


def without_added(dumped: Any) -> Any:
    """A record's JSON values without the fields it gained since, when at their defaults."""
    if not isinstance(dumped, dict):
        return dumped
    return {k: v for k, v in dumped.items() if not (k in ADDED and v == ADDED[k])}
