"""Durable transitions: `SQLiteStore` side by side with `MemoryStore` and a bare trigger.

A standalone script (never collected as a test). The workload is one model
state that calls a `safe` tool N times (each result ~500 characters, each call
with distinct arguments) and then calls `next_state` to a terminal: 2N + 2
transitions, driven by `statechart.run_to_end` with a `FunctionModel`, so only
framework and store cost is measured. Each figure is taken `--repeats` times,
the stores interleaved round by round; the report gives the median and the
spread (min-max):

- µs per transition at each run length on the memory store, on `SQLiteStore`
  with `durability="process"` (WAL, `synchronous=NORMAL`), the same with
  `offload=True`, and with `durability="power"`; and a bare `transitions`
  trigger on the same compiled machine (the floor of `overhead.py`), with the
  paired ratios. Each SQLite sample is two runs in one new file: the first
  (`*_new_file`, its WAL grows from nothing) and a second (the steady state of
  a database that already holds runs, reported without a suffix);
- bytes per transition on SQLite: the process's `wchar` (bytes handed to
  `write()`) and `write_bytes` (bytes sent to the block layer) from
  `/proc/self/io`, over the run alone and over the run plus a full
  `wal_checkpoint` and `os.sync()`; the growth of main file + `-wal` over the
  run, and of the main file once checkpointed; and the WAL frames each
  transition writes, by table;
- many runs in one event loop (a simulated model latency per call): total wall
  time and how late a 1 ms ticker wakes up (the loop's stalls), with and
  without `offload`;
- resume: opening the store, `load`, `load_session`, reading the run's events,
  and the time to the first step of `drive(..., resuming=True)`, for a run
  stopped after N transitions.

    python benchmarks/durable.py                # full run, about three minutes
    python benchmarks/durable.py --quick        # smoke run, a few seconds
    python benchmarks/durable.py --profile      # also a cProfile on stderr
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import shutil
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import pydantic
from overhead import floor_once  # the same bare-trigger floor, side by side

import statechart as sc

TARGET_PROCESS_US = 120.0
TARGET_FLAT = 0.20
"""Bytes per transition at the longest run within this fraction of the shortest."""
TARGET_FRAMES = 1.5
"""WAL frames (pages) written per transition, on average, at 200 steps (issue #16)."""
RESULT_CHARS = 500
FILLER = " ".join(f"field{i}=value{i * 7 % 1000:03d};" for i in range(80))
KINDS = ("memory", "process", "process_offload", "power")
SQLITE_KINDS = ("process", "power")
LOOP_KINDS = ("memory", "process", "process_offload", "power", "power_offload")
TICK = 0.001
DASH = "\u2013"
BYTES_ROWS = (  # what the report shows; the JSON has every store and counter
    (
        "process_new_file",
        (
            "wchar_run",
            "write_bytes_run",
            "wchar_total",
            "write_bytes_total",
            "files_before_checkpoint",
            "main_after_checkpoint",
        ),
    ),
    (
        "process",
        ("wchar_total", "write_bytes_total", "files_before_checkpoint", "main_after_checkpoint"),
    ),
    ("power_new_file", ("write_bytes_total",)),
)
FLAT_KEYS = ("wchar_total", "write_bytes_total", "main_after_checkpoint")
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "durable.json"


class Ctx(pydantic.BaseModel):
    note: str | None = None


def fetch(n: int) -> str:
    """A `safe` tool whose ~500-character result differs with its argument."""
    head = f"record {n}: "
    return head + FILLER[: RESULT_CHARS - len(head)]


FETCH = sc.tool(retry="safe", inline=True)(
    fetch
)  # pure and quick: on the loop, as the others run it


def make_chart(steps: int) -> sc.Chart:
    """One model state calling `fetch` up to `steps // 2 - 1` times, then `done`.

    Every tool call is two transitions (think -> act -> think) and the final
    `next_state` two more, so a run of `steps` transitions fits with headroom.
    """
    calls = steps // 2 - 1
    return sc.Chart(
        "durable",
        states=(
            sc.State(
                "work",
                tools=(FETCH,),
                writes=("note",),
                instructions="Fetch, then finish.",
                max_iterations=calls + 2,
                max_calls={"fetch": calls + 1},
            ),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"),),
        context=Ctx,
        budget=sc.Budget(max_steps=steps * 2),
    )


Policy = Callable[[sc.Request], sc.Reply | Awaitable[sc.Reply]]


def make_policy(steps: int, *, first: int = 1, latency: float = 0.0) -> Policy:
    """`fetch(n)` with a new `n` each call until `steps` transitions, then `next_state`.

    `first` continues a resumed run's numbering; `latency` makes each reply an
    `await anyio.sleep(latency)` away, like a model behind a network.
    """
    calls = steps // 2 - 1
    count = first - 1

    def decide(request: sc.Request) -> sc.Reply:
        nonlocal count
        count += 1
        if count <= calls:
            return sc.reply(sc.call("fetch", f"c{count}", n=count))
        return sc.reply(sc.call("next_state", f"c{count}", target="done", note="ok"))

    async def slow(request: sc.Request) -> sc.Reply:
        await anyio.sleep(latency)
        return decide(request)

    return slow if latency else decide


class _Lean(sc.FunctionModel):
    """A FunctionModel that does not keep every request (that list is not framework cost)."""

    async def complete(self, request: sc.Request) -> sc.Reply:
        out = await super().complete(request)
        self.requests.clear()
        return out


_CHARTS: dict[int, sc.Chart] = {}


def chart_for(steps: int) -> sc.Chart:
    if steps not in _CHARTS:
        _CHARTS[steps] = make_chart(steps)
    return _CHARTS[steps]


# -- stores, files and /proc/self/io -------------------------------------------------------


def open_store(kind: str, path: Path) -> sc.MemoryStore | sc.SQLiteStore:
    """`memory`, or SQLite with `process`/`power` durability (`_offload`: worker threads)."""
    if kind == "memory":
        return sc.MemoryStore(encode=False)  # no persistence: records kept as objects
    durability: Literal["process", "power"] = "power" if kind.startswith("power") else "process"
    return sc.SQLiteStore(path, durability=durability, offload=kind.endswith("_offload"))


def proc_io() -> dict[str, int]:
    """This process's I/O counters (Linux); empty elsewhere."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


def file_bytes(path: Path) -> int:
    """Main database file plus its `-wal` (the `-shm` index is shared memory, not data)."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def checkpoint(path: Path, mode: str = "TRUNCATE") -> None:
    """`PRAGMA wal_checkpoint(mode)` from a second connection (the store stays open).

    The store's background checkpointer may be mid-checkpoint: retry for a moment."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        for _ in range(200):
            busy, _, _ = db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            if not busy:
                return
            time.sleep(0.005)
    raise SystemExit(f"checkpoint of {path} was blocked")


def remove_db(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


def io_delta(after: dict[str, int], before: dict[str, int], key: str) -> int | None:
    return after[key] - before[key] if key in after and key in before else None


# -- one driven run ------------------------------------------------------------------------


async def driven_once(kind: str, steps: int, workdir: Path) -> list[dict[str, Any]]:
    """One run on a new store; on SQLite, then a second run in the same file.

    The first run pays for a new database file (its WAL grows from nothing);
    the second is the steady state of a database that already holds runs.
    """
    path = workdir / f"{kind}-{steps}.db"
    remove_db(path)
    store = open_store(kind, path)
    if not isinstance(store, sc.SQLiteStore):
        return [await measured_run(store, path, steps, last=True)]
    out = [
        await measured_run(store, path, steps, last=False),
        await measured_run(store, path, steps, last=True),
    ]
    store.close()
    remove_db(path)
    return out


async def measured_run(
    store: sc.MemoryStore | sc.SQLiteStore,
    path: Path,
    steps: int,
    *,
    last: bool,
) -> dict[str, Any]:
    """µs per transition of `run_to_end`; on SQLite, also the bytes it wrote.

    The write counters cover the run, then the run plus a full checkpoint
    (`TRUNCATE` after the `last` run in the file, `RESTART` before another,
    so the WAL keeps its size) and `os.sync()`.
    """
    chart = chart_for(steps)
    model = _Lean(make_policy(steps))
    run = await sc.start(chart, store=store, model=model)
    durable = isinstance(store, sc.SQLiteStore)
    if durable:
        checkpoint(path, "RESTART")
        os.sync()
        main0, files0, io0 = path.stat().st_size, file_bytes(path), proc_io()
    gc.collect()
    t0 = time.perf_counter()
    end = await sc.run_to_end(chart, run, store=store, model=model)
    elapsed = time.perf_counter() - t0
    if end.state != "done":
        raise SystemExit(f"run of {steps} ended in {end.state!r}: {end.reason}")
    n = end.seq - run.seq
    out: dict[str, Any] = {"us": elapsed / n * 1e6, "transitions": n}
    if durable:
        io1, files1 = proc_io(), file_bytes(path)
        checkpoint(path, "TRUNCATE" if last else "RESTART")
        main2 = path.stat().st_size
        os.sync()
        io2 = proc_io()
        out["bytes"] = {
            "wchar_run": io_delta(io1, io0, "wchar"),
            "write_bytes_run": io_delta(io1, io0, "write_bytes"),
            "wchar_total": io_delta(io2, io0, "wchar"),
            "write_bytes_total": io_delta(io2, io0, "write_bytes"),
            "files_before_checkpoint": files1 - files0,
            "main_after_checkpoint": main2 - main0,
        }
    return out


async def per_transition(sizes: Iterable[int], repeats: int, workdir: Path) -> dict[str, Any]:
    """Every store at every run length, interleaved: rounds of µs and of bytes.

    On SQLite, `kind` is the second run in a file and `kind_new_file` the first.
    """
    us: dict[int, dict[str, list[float]]] = {}
    written: dict[int, dict[str, dict[str, list[float]]]] = {}
    for steps in sizes:
        for kind in KINDS:  # warm-up: compile the chart, validators, SQLite
            await driven_once(kind, min(steps, 200), workdir)
        us[steps], written[steps] = {"floor": []}, {}
        for i in range(repeats):
            for kind in KINDS[i % len(KINDS) :] + KINDS[: i % len(KINDS)]:
                found = await driven_once(kind, steps, workdir)
                names = [kind] if len(found) == 1 else [f"{kind}_new_file", kind]
                for name, sample in zip(names, found, strict=True):
                    us[steps].setdefault(name, []).append(sample["us"])
                    for key, value in sample.get("bytes", {}).items():
                        if value is not None:
                            per = written[steps].setdefault(name, {}).setdefault(key, [])
                            per.append(value / sample["transitions"])
            n = found[-1]["transitions"]
            us[steps]["floor"].append(floor_once(chart_for(steps), n) / n * 1e6)
    return {"us": us, "bytes": written}


async def wal_pages(steps: int, workdir: Path) -> dict[str, float]:
    """WAL frames per transition by table (a run in a new file), from the frame headers.

    A second connection holds a read transaction from before the run, so no
    checkpoint can reset the WAL: it then holds every page each commit wrote.
    Pages are named by table with the `dbstat` virtual table, when SQLite has it.
    Each frame is a page plus a 24-byte header, so frames x (page size + 24) = `wchar_run`.
    """
    chart = chart_for(steps)
    path = workdir / f"pages-{steps}.db"
    remove_db(path)
    store = sc.SQLiteStore(path)
    model = _Lean(make_policy(steps))
    run = await sc.start(chart, store=store, model=model)
    checkpoint(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM runs").fetchone()
        end = await sc.run_to_end(chart, run, store=store, model=model)
        wal = Path(f"{path}-wal").read_bytes()
        reader.execute("COMMIT")
        try:
            names = dict(reader.execute("SELECT pageno, name FROM dbstat"))
        except sqlite3.OperationalError:
            names = {}
    store.close()
    remove_db(path)
    (size,) = struct.unpack(">I", wal[8:12])
    counts: dict[str, int] = {}
    for offset in range(32, len(wal) - 23, size + 24):
        (page,) = struct.unpack(">I", wal[offset : offset + 4])
        name = "header" if page == 1 else names.get(page, "other")
        counts[name] = counts.get(name, 0) + 1
    n = end.seq - run.seq
    return {
        "total": r(sum(counts.values()) / n),
        **{k: r(v / n) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])},
    }


# -- many runs in one event loop -----------------------------------------------------------


async def ticker(done: anyio.Event, late: list[float]) -> None:
    """Sleeps `TICK` over and over, recording how late each wake-up is (the loop's stalls)."""
    clock = time.perf_counter
    while not done.is_set():
        t0 = clock()
        await anyio.sleep(TICK)
        late.append(clock() - t0 - TICK)


async def loop_once(
    kind: str,
    runs: int,
    steps: int,
    latency: float,
    workdir: Path,
) -> dict[str, float]:
    """`runs` concurrent runs on one store in one event loop, each model call `latency` away."""
    chart = chart_for(steps)
    path = workdir / f"loop-{kind}.db"
    remove_db(path)
    store = open_store(kind, path)
    started = []
    for i in range(runs):
        model = _Lean(make_policy(steps, latency=latency))
        started.append((await sc.start(chart, store=store, model=model, run_id=f"r{i}"), model))
    ended: list[sc.Run] = []

    async def one(run: sc.Run, model: sc.Model) -> None:
        ended.append(await sc.run_to_end(chart, run, store=store, model=model))

    late: list[float] = []
    done = anyio.Event()
    gc.collect()
    t0 = time.perf_counter()
    async with anyio.create_task_group() as outer:
        outer.start_soon(ticker, done, late)
        async with anyio.create_task_group() as tg:
            for run, model in started:
                tg.start_soon(one, run, model)
        wall = time.perf_counter() - t0
        done.set()
    if isinstance(store, sc.SQLiteStore):
        store.close()
    remove_db(path)
    if len(ended) != runs or any(r.state != "done" for r in ended):
        raise SystemExit(f"{kind}: not every concurrent run reached 'done'")
    transitions = sum(r.seq for r in ended)
    late.sort()
    return {
        "wall_s": wall,
        "transitions_per_s": transitions / wall,
        "max_stall_ms": late[-1] * 1e3,
        "p99_stall_ms": late[int(len(late) * 0.99)] * 1e3,
    }


async def concurrency(
    runs: int,
    steps: int,
    latencies: list[float],
    repeats: int,
    workdir: Path,
) -> dict[str, dict[str, dict[str, list[float]]]]:
    """`loop_once` for every store kind at every model latency, interleaved."""
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for latency in latencies:
        found = out[f"{latency * 1e3:g}ms"] = {k: {} for k in LOOP_KINDS}
        for kind in LOOP_KINDS:  # warm-up
            await loop_once(kind, 2, 20, latency, workdir)
        for i in range(repeats):
            for kind in LOOP_KINDS[i % len(LOOP_KINDS) :] + LOOP_KINDS[: i % len(LOOP_KINDS)]:
                for key, value in (await loop_once(kind, runs, steps, latency, workdir)).items():
                    found[kind].setdefault(key, []).append(value)
    return out


# -- resume --------------------------------------------------------------------------------


async def stopped_run(steps: int, path: Path) -> str:
    """A run of a longer chart driven for `steps` transitions and stopped; its id."""
    chart = chart_for(2 * steps)
    store = sc.SQLiteStore(path)
    model = _Lean(make_policy(2 * steps))
    run = await sc.start(chart, store=store, model=model, run_id="stopped")
    n = 0
    driven = sc.drive(chart, run, store=store, model=model)
    async with contextlib.aclosing(cast(AsyncGenerator[sc.Step, None], driven)) as records:
        async for _ in records:
            n += 1
            if n == steps:
                break
    store.close()
    return run.run_id


async def resume_once(steps: int, source: Path, run_id: str, workdir: Path) -> dict[str, float]:
    """Milliseconds to open, load, rebuild the session, and reach the first resumed step."""
    chart = chart_for(2 * steps)
    clock = time.perf_counter
    out: dict[str, float] = {}
    path = workdir / "resume.db"
    shutil.copyfile(source, path)
    t0 = clock()
    store = sc.SQLiteStore(path)
    t1 = clock()
    run = (await store.load(run_id)).snapshot
    t2 = clock()
    await sc.load_session(store, run)
    t3 = clock()
    events = await store.events(run_id)
    t4 = clock()
    store.close()
    out.update(open_ms=t1 - t0, load_ms=t2 - t1, load_session_ms=t3 - t2, events_ms=t4 - t3)
    if len(events) != steps:
        raise SystemExit(f"stopped run has {len(events)} events, not {steps}")
    shutil.copyfile(source, path)
    model = _Lean(make_policy(2 * steps, first=steps // 2 + 1))
    t0 = clock()
    store = sc.SQLiteStore(path)
    resumed = sc.drive(chart, run_id, store=store, model=model, resuming=True)
    async with contextlib.aclosing(cast(AsyncGenerator[sc.Step, None], resumed)) as records:
        async for _ in records:
            out["first_step_ms"] = clock() - t0
            break
    store.close()
    remove_db(path)
    return {k: v * 1e3 for k, v in out.items()}


async def resumes(sizes: Iterable[int], repeats: int, workdir: Path) -> dict[int, Any]:
    out: dict[int, dict[str, list[float]]] = {}
    for steps in sizes:
        source = workdir / f"stopped-{steps}.db"
        remove_db(source)
        run_id = await stopped_run(steps, source)
        await resume_once(steps, source, run_id, workdir)  # warm-up
        out[steps] = {}
        for _ in range(repeats):
            for key, value in (await resume_once(steps, source, run_id, workdir)).items():
                out[steps].setdefault(key, []).append(value)
        remove_db(source)
    return out


# -- the report ----------------------------------------------------------------------------


def r(x: float, nd: int = 2) -> float:
    return round(x, nd)


def spread(xs: list[float], nd: int = 2) -> dict[str, float]:
    return {"median": r(statistics.median(xs), nd), "min": r(min(xs), nd), "max": r(max(xs), nd)}


def machine_info(workdir: Path) -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "transitions": version("transitions"),
        "pydantic": pydantic.VERSION,
        "anyio": version("anyio"),
        "workdir_filesystem": filesystem(workdir),
        "loadavg_1m": r(os.getloadavg()[0]),
    }


def filesystem(path: Path) -> str:
    """The type of the filesystem holding `path`, from /proc/mounts (longest mount prefix)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            _, point, fs, *_ = line.split()
            if str(path.resolve()).startswith(point) and len(point) > len(best):
                best, kind = point, fs
    return kind


def summarize(timed: dict[str, Any], sizes: list[int]) -> dict[str, Any]:
    """Medians and spreads, the paired ratios, and how flat the bytes stay."""
    us_out: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    durable = [k for k in timed["us"][sizes[0]] if k not in ("floor", "memory")]
    for steps in sizes:
        rounds = timed["us"][steps]
        us_out[str(steps)] = {
            k: {**spread(v), "rounds": [r(x) for x in v]} for k, v in rounds.items()
        }
        ratios[str(steps)] = {
            f"{k}_to_{base}": spread([a / b for a, b in zip(rounds[k], rounds[base], strict=True)])
            for k in durable
            for base in ("memory", "floor")
        }
    written: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    first, last = str(sizes[0]), str(sizes[-1])
    for kind in durable:
        written[kind] = {
            str(s): {key: spread(v, 0) for key, v in timed["bytes"][s][kind].items()} for s in sizes
        }
        flat[kind] = {
            key: r(written[kind][last][key]["median"] / written[kind][first][key]["median"])
            if written[kind][first][key]["median"]
            else None
            for key in written[kind][first]
        }
    return {
        "us_per_transition": us_out,
        "ratios": ratios,
        "bytes_per_transition": written,
        "bytes_ratio_longest_to_shortest": flat,
    }


def loop_summary(loop: dict[str, Any]) -> dict[str, Any]:
    """Spreads per latency and store, and offload's wall time over the same store's without."""
    out: dict[str, Any] = {}
    for label, kinds in loop.items():
        found: dict[str, Any] = {
            k: {key: spread(v, 3) for key, v in f.items()} for k, f in kinds.items()
        }
        found["offload_wall_ratio"] = {
            d: r(found[f"{d}_offload"]["wall_s"]["median"] / found[d]["wall_s"]["median"])
            for d in SQLITE_KINDS
        }
        out[label] = found
    return out


async def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    sizes = sorted(args.sizes)
    timed = await per_transition(sizes, args.repeats, workdir)
    loop = await concurrency(args.runs, args.run_steps, args.latency, args.repeats, workdir)
    resumed = await resumes(sizes, args.repeats, workdir)
    pages = {str(s): await wal_pages(s, workdir) for s in sizes}
    out = summarize(timed, sizes)
    last = str(sizes[-1])
    process_us = out["us_per_transition"][last]["process"]["median"]
    flat = out["bytes_ratio_longest_to_shortest"]
    return {
        "benchmark": "statechart durable transitions (model-state tool loop, SQLiteStore)",
        "machine": machine_info(workdir),
        "note": "side by side on a possibly shared machine: compare ratios, not absolute µs",
        "settings": {
            "sizes": sizes,
            "repeats": args.repeats,
            "result_chars": RESULT_CHARS,
            "concurrency": {
                "runs": args.runs,
                "steps": args.run_steps,
                "model_latency_s": args.latency,
                "tick_s": TICK,
            },
        },
        **out,
        "wal_pages_per_transition": pages,
        "concurrency": loop_summary(loop),
        "resume_ms": {
            str(s): {key: spread(v, 3) for key, v in found.items()} for s, found in resumed.items()
        },
        "targets": {
            "wal_frames_per_transition": TARGET_FRAMES,
            "wal_frames_met": {
                str(s): pages[str(s)]["total"] <= TARGET_FRAMES for s in sizes if s >= 200
            },
            "process_us_per_transition": TARGET_PROCESS_US,
            "process_us_met": process_us <= TARGET_PROCESS_US,
            "bytes_flat_within": TARGET_FLAT,
            "bytes_flat_met": {
                kind: {
                    k: flat[kind][k] is not None and abs(flat[kind][k] - 1) <= TARGET_FLAT
                    for k in FLAT_KEYS
                }
                for kind in ("process_new_file", "process")
            },
        },
    }


def fmt(s: dict[str, float], nd: int = 0) -> str:
    return f"{s['median']:,.{nd}f} ({s['min']:,.{nd}f}{DASH}{s['max']:,.{nd}f})"


def markdown(res: dict[str, Any]) -> str:
    """The tables of docs/performance.md: median (min to max) over the repeats."""
    sizes = [str(s) for s in res["settings"]["sizes"]]
    head = "| | " + " | ".join(f"{s} steps" for s in sizes) + " |\n|---|" + "---|" * len(sizes)
    us, ratios = res["us_per_transition"], res["ratios"]
    lines = ["µs per transition", "", head]
    for kind in (
        "floor",
        "memory",
        "process",
        "process_new_file",
        "process_offload",
        "power",
        "power_new_file",
    ):
        lines.append(f"| {kind} | " + " | ".join(fmt(us[s][kind], 1) for s in sizes) + " |")
    for key in (
        "process_to_memory",
        "process_to_floor",
        "process_offload_to_memory",
        "power_to_memory",
    ):
        lines.append(f"| {key} | " + " | ".join(fmt(ratios[s][key], 2) for s in sizes) + " |")
    lines += ["", "bytes per transition", "", head.replace("| |", "| store, measure |", 1)]
    for kind, keys in BYTES_ROWS:
        found = res["bytes_per_transition"][kind]
        for key in keys:
            cells = " | ".join(fmt(found[s][key]) for s in sizes)
            lines.append(f"| {kind}, {key} | {cells} |")
    pages = res["wal_pages_per_transition"]
    lines += [
        "",
        "WAL frames (pages) written per transition, by table (process, new file)",
        "",
        head.replace("| |", "| table |", 1),
    ]
    for name in pages[sizes[-1]]:
        lines.append(
            f"| {name} | " + " | ".join(f"{pages[s].get(name, 0):.2f}" for s in sizes) + " |"
        )
    c = res["settings"]["concurrency"]
    for label, kinds in res["concurrency"].items():
        lines += [
            "",
            f"{c['runs']} runs of {c['steps']} steps in one event loop, model latency "
            f"{label}; offload wall / without: {kinds['offload_wall_ratio']}",
            "",
            "| store | wall s | transitions/s | max stall ms | p99 stall ms |",
            "|---|---|---|---|---|",
        ]
        for kind in LOOP_KINDS:
            f = kinds[kind]
            lines.append(
                f"| {kind} | {fmt(f['wall_s'], 3)} | {fmt(f['transitions_per_s'])} "
                f"| {fmt(f['max_stall_ms'], 2)} | {fmt(f['p99_stall_ms'], 2)} |"
            )
    lines += [
        "",
        "resume (ms)",
        "",
        "| stopped at | open | load | load_session | events | to first step |",
        "|---|---|---|---|---|---|",
    ]
    for steps, found in res["resume_ms"].items():
        cells = " | ".join(
            fmt(found[k], 2)
            for k in ("open_ms", "load_ms", "load_session_ms", "events_ms", "first_step_ms")
        )
        lines.append(f"| {steps} | {cells} |")
    lines += ["", f"targets: {json.dumps(res['targets'])}"]
    return "\n".join(lines)


def profile(steps: int, workdir: Path) -> None:
    """cProfile one `process` run and one resume (after a warm-up) to stderr."""
    anyio.run(driven_once, "process", steps, workdir)
    source = workdir / "profile-stopped.db"
    run_id = anyio.run(stopped_run, steps, source)
    for title, fn, fn_args in (
        ("driven run, durability=process", driven_once, ("process", steps, workdir)),
        ("resume", resume_once, (steps, source, run_id, workdir)),
    ):
        prof = cProfile.Profile()
        prof.enable()
        anyio.run(fn, *fn_args)
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out).strip_dirs()
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(35)
        print(f"== {title}, {steps} steps ==\n{out.getvalue()}", file=sys.stderr)
    remove_db(source)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[20, 200, 2000], help="run lengths in transitions"
    )
    parser.add_argument("--repeats", type=int, default=5, help="repeats of each figure")
    parser.add_argument("--runs", type=int, default=50, help="concurrent runs in one loop")
    parser.add_argument("--run-steps", type=int, default=200, help="transitions per such run")
    parser.add_argument(
        "--latency",
        type=float,
        nargs="+",
        default=[0.002, 0.02],
        help="model latencies of the concurrent runs, seconds",
    )
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--profile", action="store_true", help="cProfile to stderr")
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON result")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.runs, args.run_steps = [20, 200], 2, 10, 40
        args.latency = args.latency[:1]
    if min(args.sizes) < 4 or args.run_steps < 4 or args.repeats < 1 or args.runs < 1:
        parser.error("need sizes and --run-steps >= 4, --repeats and --runs >= 1")
    workdir = Path(tempfile.mkdtemp(prefix="statechart-durable-", dir=args.dir))
    try:
        if args.profile:
            profile(max(args.sizes), workdir)
        result = anyio.run(measure, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(markdown(result))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
