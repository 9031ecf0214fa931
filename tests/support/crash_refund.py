"""The refund agent the crash tests kill, its banks, and a fork server to run it in.

The chart is seed 002's shape: classify, gather (a `safe` lookup), resolve (the
refund), verify (code: asks the bank), done. The refund writes to a bank in
its own SQLite file, one variant per retry policy. `serve()` is a zygote: a
process that imports all this once and forks a real child per job, so killing
a driver costs a fork, not an interpreter start.
"""

from __future__ import annotations

import functools
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    FunctionModel,
    LeaseHeldError,
    Reply,
    Request,
    RunNotFoundError,
    SQLiteStore,
    State,
    Store,
    Tool,
    approve,
    call,
    drive,
    failpoints,
    reject,
    reply,
    resume,
    start,
    tool,
)
from statechart.engine import compiled

POLICIES = ("keyed", "reconcile", "never")
"""The refund tool's retry policy per variant; `control` is a plain bank with `safe`."""
LATENCY = 0.003
"""Seconds a bank or model call spends on the wire each way: random kills land inside."""
ROOT = Path(__file__).resolve().parents[2]


class Bank:
    """A payments system in its own SQLite file; `dedupe` makes it honour idempotency keys."""

    def __init__(self, path: str | os.PathLike[str], *, dedupe: bool = False) -> None:
        self.path = os.fspath(path)
        self.dedupe = dedupe
        self._db: dict[tuple[int, int], sqlite3.Connection] = {}

    def db(self) -> sqlite3.Connection:
        """One connection per process and thread: a forked child never uses its parent's,
        and a `def` tool runs in a worker thread (SQLite connections stay in theirs)."""
        key = (os.getpid(), threading.get_ident())
        db = self._db.get(key)
        if db is None:
            db = self._db[key] = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
        return db

    def create(self, orders: dict[str, int]) -> None:
        """Make the tables and the orders that may be refunded."""
        db = self.db()
        db.executescript(
            "CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, amount INT);"
            "CREATE TABLE IF NOT EXISTS refunds (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "order_id TEXT NOT NULL, amount INT NOT NULL, key TEXT UNIQUE);"
            "CREATE TABLE IF NOT EXISTS calls (n INTEGER PRIMARY KEY, order_id TEXT, "
            "key TEXT, outcome TEXT);"
        )
        db.execute("BEGIN")
        db.executemany("INSERT OR IGNORE INTO orders VALUES (?, ?)", orders.items())
        db.execute("COMMIT")

    def order(self, order_id: str) -> dict[str, Any]:
        found = (
            self.db().execute("SELECT amount FROM orders WHERE order_id=?", (order_id,)).fetchone()
        )
        return {"order_id": order_id, "amount": found[0]} if found else {}

    def refund(self, order_id: str, amount: int, key: str | None = None) -> str:
        """Issue a refund; a deduping bank answers a repeated key with the first refund."""
        time.sleep(LATENCY)
        db = self.db()
        db.execute("BEGIN IMMEDIATE")
        try:
            found = (
                db.execute("SELECT id FROM refunds WHERE key=?", (key,)).fetchone()
                if self.dedupe and key
                else None
            )
            outcome = "issued" if found is None else "deduped"
            if found is None:
                found = db.execute(
                    "INSERT INTO refunds (order_id, amount, key) VALUES (?, ?, ?) RETURNING id",
                    (order_id, amount, key if self.dedupe else None),
                ).fetchone()
            db.execute(
                "INSERT INTO calls (order_id, key, outcome) VALUES (?, ?, ?)",
                (order_id, key, outcome),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        time.sleep(LATENCY)
        return f"refund R{found[0]} of {amount} for {order_id}"

    def refunds(self, order_id: str | None = None) -> list[tuple[int, str]]:
        """(refund id, order id) of every refund issued, optionally for one order."""
        return (
            self.db()
            .execute(
                "SELECT id, order_id FROM refunds WHERE ?1 IS NULL OR order_id=?1 ORDER BY id",
                (order_id,),
            )
            .fetchall()
        )

    def find(self, order_id: str) -> str | None:
        """What a reconcile hook asks: the refund of this order, if one was issued."""
        found = self.refunds(order_id)
        return None if not found else f"refund R{found[0][0]} for {order_id} (found)"

    def deduped(self) -> int:
        return int(
            self.db().execute("SELECT count(*) FROM calls WHERE outcome='deduped'").fetchone()[0]
        )


class Refund(BaseModel):
    """The run's context."""

    order_id: str = ""
    category: str | None = None
    amount: int | None = None
    refund: str | None = None
    verified: bool = False


def refund_tool(policy: str, bank: Bank) -> Tool:
    """`issue_refund` under one retry policy (`control`: `safe` on a bank that never dedupes)."""

    def plain(order_id: str, amount: int) -> str:
        return bank.refund(order_id, amount)

    def keyed(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
        return bank.refund(order_id, amount, idempotency_key)

    hook = (lambda order_id, amount: bank.find(order_id)) if policy == "reconcile" else None
    return tool(
        retry={"control": "safe"}.get(policy, policy),
        name="issue_refund",  # type: ignore[arg-type]
        description="Refund an order.",
        reconcile=hook,
    )(keyed if policy == "keyed" else plain)


@functools.cache
def refund_chart(policy: str, bank_path: str) -> Chart:
    """The refund agent whose refund tool uses `policy` against the bank at `bank_path`."""
    bank = Bank(bank_path, dedupe=policy == "keyed")

    @tool(retry="safe")
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return json.dumps(bank.order(order_id))

    async def verify(ctx: Refund) -> Decision:
        """Code, not the model, says whether the order was refunded exactly once."""
        n = len(bank.refunds(ctx.order_id))
        if n == 1:
            return Decision("done", {"verified": True}, reason="one refund in the bank")
        return Decision("escalated", reason=f"{n} refunds in the bank for {ctx.order_id}")

    return Chart(
        "refund",
        context=Refund,
        budget=Budget(max_steps=40),
        states=(
            State("classify", reads=("order_id",), writes=("category",)),
            State("gather", tools=(lookup_order,), reads=("order_id",), writes=("amount",)),
            State(
                "resolve",
                tools=(refund_tool(policy, bank),),
                reads=("order_id", "amount"),
                writes=("refund",),
            ),
            State("verify", kind="code", handler=verify, writes=("verified",)),
            State("done", kind="terminal"),
        ),
        edges=(
            Edge("classify", "gather"),
            Edge("gather", "resolve"),
            Edge("resolve", "verify"),
            Edge("verify", "done"),
        ),
    )


async def refund_policy(request: Request) -> Reply:
    """The offline model: a fixed path, with call ids that a re-asked model repeats."""
    await anyio.sleep(LATENCY)  # a model takes a while to answer: kills land in its calls
    results = {m.tool_call_id: m.content for m in request.transcript if m.role == "tool"}
    done = {
        c.name: results[c.id] for m in request.transcript for c in m.tool_calls if c.id in results
    }
    ctx = request.context

    def say(name: str, **args: Any) -> Reply:
        return reply(call(name, f"{request.state}-{len(request.transcript)}", **args))

    if request.state == "classify":
        return say("next_state", target="gather", category="refund")
    if request.state == "gather":
        if "lookup_order" not in done:
            return say("lookup_order", order_id=ctx["order_id"])
        return say(
            "next_state", target="resolve", amount=json.loads(done["lookup_order"])["amount"]
        )
    if request.state == "resolve":
        if "issue_refund" not in done:
            return say("issue_refund", order_id=ctx["order_id"], amount=ctx["amount"])
        return say("next_state", target="verify", refund=done["issue_refund"])
    return say("next_state", target="escalated")


# -- what a child process does ------------------------------------------------------------

Job = dict[str, Any]
Barrier = Callable[[], None]


def refund_model() -> FunctionModel:
    return FunctionModel(refund_policy, spec="refund-demo")


def _open(job: Job) -> tuple[Chart, Store, FunctionModel]:
    # a snapshot every 3 events: kills land between events and the snapshots behind them
    store: Store
    if job["store"].startswith("postgresql://"):
        from statechart.store.postgres import PostgresStore

        store = PostgresStore(job["store"], snapshot_every=3)
    else:
        store = SQLiteStore(job["store"], snapshot_every=3)
    return (refund_chart(job["policy"], job["bank"]), store, refund_model())


async def _resume_when_free(
    job: Job, chart: Chart, store: Store, model: FunctionModel
) -> dict[str, Any]:
    """Resume, waiting out a dead holder's lease; says when it was refused and got in."""
    seen: dict[str, Any] = {"held": 0, "started": time.time(), "refused_at": None}
    deadline = time.monotonic() + job.get("patience", 10.0)
    while True:
        tried = time.time()
        try:
            run = await resume(chart, job["run_id"], store=store, model=model, lease_ttl=job["ttl"])
        except LeaseHeldError:
            seen["held"] += 1
            seen["refused_at"] = tried
            if time.monotonic() > deadline:
                raise
            await anyio.sleep(0.005)
            continue
        return {
            **seen,
            "got_in_at": tried,
            "status": run.status,
            "state": run.state,
            "reason": run.reason,
        }


async def op_drive(job: Job, barrier: Barrier) -> dict[str, Any]:
    """Start the run if it is not stored yet, then resume it until it waits or ends."""
    chart, store, model = _open(job)
    try:
        await store.load(job["run_id"])
    except RunNotFoundError:
        await start(
            chart,
            store=store,
            model=model,
            run_id=job["run_id"],
            context={"order_id": job["order_id"]},
        )
    barrier()
    return await _resume_when_free(job, chart, store, model)


async def op_operator(job: Job, barrier: Barrier) -> dict[str, Any]:
    """A person looks at the bank first: approve the call only if no refund went out."""
    chart, store, _ = _open(job)
    issued = Bank(job["bank"]).refunds(job["order_id"])
    if issued:
        await reject(
            chart,
            job["run_id"],
            store=store,
            by="operator",
            reason=f"the bank already shows refund R{issued[0][0]}",
        )
        return {"decision": "rejected"}
    await approve(chart, job["run_id"], store=store, by="operator")
    return {"decision": "approved"}


async def op_contend(job: Job, barrier: Barrier) -> dict[str, Any]:
    """Drive a stored run after the barrier; report the seqs this process appended."""
    chart, store, model = _open(job)
    await store.load(job["run_id"])
    barrier()
    seqs: list[int] = []
    try:
        async with aclosing(
            drive(
                chart, job["run_id"], store=store, model=model, lease_ttl=job["ttl"], resuming=True
            )
        ) as records:
            async for record in records:
                seqs.append(record.event.seq)
    except LeaseHeldError:
        return {"outcome": "lease_held", "seqs": seqs}
    return {"outcome": "drove" if seqs else "found_ended", "seqs": seqs}


OPS = {"drive": op_drive, "operator": op_operator, "contend": op_contend}


def _child(job: Job, out: int, go: int | None) -> None:
    """Run one job in a forked child and exit without touching the zygote's state."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        if job.get("failpoint"):
            failpoints._SEEN = 0
            failpoints._arm(job["failpoint"])

        def barrier() -> None:
            if go is not None:
                os.write(out, b"R")
                os.read(go, 1)

        payload = {"ok": True, **anyio.run(OPS[job["op"]], job, barrier)}
    except BaseException as exc:
        payload = {
            "ok": False,
            "error": type(exc).__name__,
            "message": str(exc)[:800],
            "traceback": traceback.format_exc()[-3000:],
        }
    os.write(out, json.dumps(payload).encode())
    os._exit(0)


# -- the zygote and its client -----------------------------------------------------------


def serve() -> None:
    """The zygote: read one JSON command per line on stdin, fork its jobs, report a line.

    It never opens a database or starts an event loop itself, so every child starts
    clean; it builds the charts before forking so children share the compiled machines.
    """
    for line in sys.stdin.buffer:  # one command at a time: EOF (the test ended) stops it
        cmd = json.loads(line)
        for job in cmd["jobs"]:
            _ = compiled(refund_chart(job["policy"], job["bank"]))
        os.write(1, json.dumps(_fork_all(cmd)).encode() + b"\n")


def _fork_all(cmd: dict[str, Any]) -> list[dict[str, Any]]:
    """Fork a child per job, release them together, kill them on schedule, reap them all."""
    go_r, go_w = os.pipe()
    kids: list[dict[str, Any]] = []
    try:
        for job in cmd["jobs"]:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child never returns into the zygote's loop
                try:
                    os.close(r)
                    os.close(go_w)
                    _child(job, w, go_r if cmd.get("barrier") else None)
                finally:
                    os._exit(70)
            os.close(w)
            kids.append(
                {
                    "pid": pid,
                    "out": r,
                    "fd": os.pidfd_open(pid),
                    "killed": False,
                    "timed_out": False,
                    "born": time.monotonic(),
                    "data": b"",
                }
            )
        if cmd.get("barrier"):
            for kid in kids:  # each says it is ready (or dies: EOF) before any is released
                if select.select([kid["out"]], [], [], cmd["timeout"])[0]:
                    kid["data"] += os.read(kid["out"], 1)
            os.write(go_w, b"g" * len(kids))
        _reap(kids, cmd.get("kill_after"), cmd["timeout"])
        return [_report(kid) for kid in kids]
    finally:
        for fd in (go_r, go_w):
            os.close(fd)
        for kid in kids:
            if "status" not in kid:
                os.kill(kid["pid"], signal.SIGKILL)
                os.waitpid(kid["pid"], 0)
            os.close(kid["fd"])
            os.close(kid["out"])


def _reap(kids: list[dict[str, Any]], kill_after: float | None, timeout: float) -> None:
    """Wait for every child; SIGKILL the living at `kill_after`, and all of them at `timeout`."""
    start_ = time.monotonic()
    alive = {kid["fd"]: kid for kid in kids}
    while alive:
        now = time.monotonic() - start_
        due = min(timeout, kill_after) if kill_after is not None else timeout
        ready = select.select(list(alive), [], [], max(due - now, 0))[0]
        for fd in ready:
            kid = alive.pop(fd)
            kid["status"] = os.waitpid(kid["pid"], 0)[1]
            kid["elapsed"] = time.monotonic() - kid["born"]
        if ready:
            continue
        for kid in alive.values():
            signal.pidfd_send_signal(kid["fd"], signal.SIGKILL)
            kid["killed" if kill_after is not None else "timed_out"] = True
        if kill_after is None:
            break
        kill_after = None
    for kid in alive.values():
        kid["status"] = os.waitpid(kid["pid"], 0)[1]
        kid["elapsed"] = time.monotonic() - kid["born"]


def _report(kid: dict[str, Any]) -> dict[str, Any]:
    while chunk := os.read(kid["out"], 65536):
        kid["data"] += chunk
    data = kid["data"].removeprefix(b"R")
    status = kid["status"]
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    out = json.loads(data) if data else {"ok": False, "error": "no output"}
    return {
        **out,
        "pid": kid["pid"],
        "signal": sig,
        "killed_by_us": kid["killed"],
        "timed_out": kid["timed_out"],
        "elapsed": kid["elapsed"],
    }


class Zygote:
    """The test's handle on the fork server: `run(jobs)` returns one report per job."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "STATECHART_FAILPOINT"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.support.crash_refund import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        self._buf = b""

    def run(
        self,
        jobs: list[Job],
        *,
        kill_after: float | None = None,
        barrier: bool = False,
        timeout: float = 20.0,
    ) -> list[dict[str, Any]]:
        """Fork `jobs` in the zygote; a child still alive after `timeout` fails the test."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        cmd = {"jobs": jobs, "kill_after": kill_after, "barrier": barrier, "timeout": timeout}
        self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if not select.select([fd], [], [], timeout + 10)[0]:
                raise TimeoutError(f"the zygote did not answer within {timeout + 10} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the zygote died (exit {self.proc.wait()})")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        reports: list[dict[str, Any]] = json.loads(line)
        for report in reports:
            assert not report["timed_out"], f"a child hung: {report}"
        return reports

    def close(self) -> None:
        """End the zygote (it exits on EOF; killed if it does not within 5 s)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
