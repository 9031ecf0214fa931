"""A background WAL checkpointer: copies the WAL into the database off the hot path.

SQLite's automatic checkpoint runs inside the COMMIT of whichever append
crosses the threshold, so one transition in a hundred pays milliseconds.
This thread, on its own connection, runs a PASSIVE checkpoint (it never
blocks writers or readers) every `every` appends; sqlite3 releases the GIL
while it works, so on a second core the appends do not wait for it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading


class Checkpointer:
    """Checkpoints one database file's WAL when poked; `close()` stops it."""

    def __init__(self, path: str, every: int = 200) -> None:
        self.path = path
        self.every = every
        self._count = 0
        self.checkpoints = 0
        """Checkpoints that ran to the end."""
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"checkpoint {path}", daemon=True)
        self._thread.start()

    def appended(self) -> None:
        """Count one committed append; wake the thread every `every` of them."""
        self._count += 1
        if self._count >= self.every:
            self._count = 0
            self._wake.set()

    def _run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                # busy or closing: the next poke, or SQLite's own checkpoint, will do it
                with contextlib.suppress(sqlite3.Error):
                    busy, _, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.checkpoints += not busy
        finally:
            db.close()

    def close(self) -> None:
        """Stop the thread and wait for it."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=10)
