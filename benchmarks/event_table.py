"""Which SQLite table shape writes the fewest WAL frames per appended event row.

A standalone script (never collected as a test): the measurements behind the
events table of schema 5 (docs/decisions.md). Each shape gets `--rows` appends,
one transaction each (WAL, `synchronous=NORMAL`, no checkpoint during the run),
of rows of a given size, for one run appending alone and for `--runs` runs
appending in turn; the WAL's growth gives the frames (pages) each commit wrote.

- `rowid+index`: the schema 4 shape, a rowid table plus a UNIQUE (run_id, seq) index;
- `without_rowid`: `PRIMARY KEY (run_id, seq) WITHOUT ROWID`, what issue 16 proposed;
- `without_rowid_int`: the same with an integer run number instead of the text id;
- `intkey`: a rowid table keyed `(run number << 32) | seq`, what schema 5 uses.

    python benchmarks/event_table.py            # about half a minute
    python benchmarks/event_table.py --quick
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path

SHAPES = {
    "rowid+index": (
        "CREATE TABLE e (run_id TEXT, seq INTEGER, body TEXT)",
        "CREATE UNIQUE INDEX e_by_run ON e (run_id, seq)",
    ),
    "without_rowid": (
        "CREATE TABLE e (run_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (run_id, seq)) "
        "WITHOUT ROWID",
    ),
    "without_rowid_int": (
        "CREATE TABLE e (run INTEGER, seq INTEGER, body TEXT, PRIMARY KEY (run, seq)) "
        "WITHOUT ROWID",
    ),
    "intkey": ("CREATE TABLE e (id INTEGER PRIMARY KEY, body TEXT)",),
}


def insert(db: sqlite3.Connection, shape: str, run: int, seq: int, body: str) -> None:
    if shape == "intkey":
        db.execute("INSERT INTO e VALUES (?, ?)", ((run << 32) | seq, body))
    elif shape == "without_rowid_int":
        db.execute("INSERT INTO e VALUES (?, ?, ?)", (run, seq, body))
    else:
        db.execute("INSERT INTO e VALUES (?, ?, ?)", (f"run-{run:06d}-0123456789abcdef", seq, body))


def measure(shape: str, size: int, rows: int, runs: int, where: Path) -> dict[str, float]:
    path = where / f"{shape}-{size}-{runs}.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    for statement in SHAPES[shape]:
        db.execute(statement)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    wal = Path(f"{path}-wal")
    before = wal.stat().st_size if wal.exists() else 32
    body = "x" * size
    t0 = time.perf_counter()
    for seq in range(1, rows // runs + 1):
        for run in range(1, runs + 1):
            db.execute("BEGIN IMMEDIATE")
            insert(db, shape, run, seq, body)
            db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    n = (rows // runs) * runs
    frames = (wal.stat().st_size - before) / (page + 24) / n
    db.close()
    os.remove(path)
    return {"frames": frames, "us": elapsed / n * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1200)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rows = 120 if args.quick else args.rows
    with tempfile.TemporaryDirectory() as tmp:
        print("| shape | row bytes | runs appending | WAL frames per commit | µs per commit |")
        print("|---|---|---|---|---|")
        for runs in (1, args.runs):
            for size in (300, 600, 900, 1300, 2500):
                for shape in SHAPES:
                    got = measure(shape, size, rows, runs, Path(tmp))
                    print(f"| {shape} | {size} | {runs} | {got['frames']:.2f} | {got['us']:.1f} |")


if __name__ == "__main__":
    main()
