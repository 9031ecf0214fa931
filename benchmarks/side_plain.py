"""The floor: the workload as a plain `while` loop, in memory and with one SQLite row per step.

A messages list; call the (scripted, async) model; run the tool it asks for;
append the result; repeat until the model answers without a tool call. One
"transition" is one loop step: a model call or a tool call (2N + 1 for N tool
calls). The durable variant writes each step as one JSON row, in its own
transaction, to a WAL database with `synchronous=NORMAL` (statechart's
`durability="process"`).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from durable import fetch
from side_common import remove_db, tool_calls

Message = dict[str, Any]
TOOLS: dict[str, Callable[..., str]] = {"fetch": fetch}


class PlainModel:
    """A scripted async model: `fetch(n)` for n = first..calls, then a final answer."""

    def __init__(self, calls: int, *, first: int = 1, latency: float = 0.0) -> None:
        self.calls, self.count, self.latency = calls, first - 1, latency

    async def complete(self, messages: list[Message]) -> Message:
        if self.latency:
            await anyio.sleep(self.latency)
        self.count += 1
        if self.count <= self.calls:
            n = self.count
            return {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{n}", "name": "fetch", "args": {"n": n}}],
            }
        return {"role": "assistant", "content": "done"}


class Rows:
    """One row per step, one transaction per row (WAL, synchronous=NORMAL)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS steps (run_id TEXT NOT NULL, "
            "seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))"
        )
        self.seq = 0

    def write(self, run_id: str, message: Message) -> None:
        self.seq += 1
        self.db.execute("BEGIN")
        self.db.execute(
            "INSERT INTO steps VALUES (?, ?, ?)", (run_id, self.seq, json.dumps(message))
        )
        self.db.execute("COMMIT")

    def read(self, run_id: str) -> list[Message]:
        rows = self.db.execute("SELECT body FROM steps WHERE run_id = ? ORDER BY seq", (run_id,))
        out = [json.loads(body) for (body,) in rows]
        self.seq = len(out)
        return out

    def close(self) -> None:
        self.db.close()


async def plain_loop(
    model: PlainModel,
    messages: list[Message],
    *,
    rows: Rows | None = None,
    run_id: str = "r",
    limit: int | None = None,
) -> int:
    """The agent loop; returns the steps made (stops early after `limit` steps)."""
    n = 0
    while limit is None or n < limit:
        reply = await model.complete(messages)
        messages.append(reply)
        n += 1
        if rows is not None:
            rows.write(run_id, reply)
        calls = reply.get("tool_calls")
        if not calls or n == limit:
            break
        for call in calls:
            result = TOOLS[call["name"]](**call["args"])
            message = {"role": "tool", "tool_call_id": call["id"], "content": result}
            messages.append(message)
            n += 1
            if rows is not None:
                rows.write(run_id, message)
    return n


def start_messages() -> list[Message]:
    return [{"role": "user", "content": "fetch the records"}]


async def plain_once(
    steps: int, path: Path | None = None, keep: list[Callable[[], None]] | None = None
) -> tuple[float, int]:
    """Seconds for the whole workload and steps made; durable when `path` is given.

    With `keep`, the database stays open and its closer is appended there.
    """
    rows = None
    if path is not None:
        if keep is None:
            remove_db(path)
        rows = Rows(path)
    model = PlainModel(tool_calls(steps))
    t0 = time.perf_counter()
    n = await plain_loop(model, start_messages(), rows=rows)
    elapsed = time.perf_counter() - t0
    if rows is not None and keep is not None:
        keep.append(rows.close)
    elif rows is not None and path is not None:
        rows.close()
        remove_db(path)
    return elapsed, n


async def plain_stopped(steps: int, path: Path) -> None:
    """A durable run of a longer workload stopped after `steps` steps."""
    remove_db(path)
    rows = Rows(path)
    await plain_loop(PlainModel(2 * steps), start_messages(), rows=rows, limit=steps)
    rows.close()


async def plain_resume(steps: int, source: Path, copy: Path) -> dict[str, float]:
    """Milliseconds of two passes on fresh copies: open + read the rows back; and from
    nothing to the first new step (open, read, one step). Nothing to build."""
    clock = time.perf_counter
    remove_db(copy)
    shutil.copyfile(source, copy)
    t0 = clock()
    rows = Rows(copy)
    t1 = clock()
    messages = start_messages() + rows.read("r")
    t2 = clock()
    rows.close()
    if len(messages) != steps + 1:
        raise SystemExit(f"plain resume read {len(messages) - 1} steps, not {steps}")
    remove_db(copy)
    shutil.copyfile(source, copy)
    t3 = clock()
    rows = Rows(copy)
    messages = start_messages() + rows.read("r")
    done_calls = sum(1 for m in messages if m["role"] == "tool")
    model = PlainModel(2 * steps, first=done_calls + 1)
    await plain_loop(model, messages, rows=rows, limit=1)
    t4 = clock()
    rows.close()
    remove_db(copy)
    return {
        "open_ms": (t1 - t0) * 1e3,
        "state_ms": (t2 - t1) * 1e3,
        "first_step_ms": (t4 - t3) * 1e3,
    }
