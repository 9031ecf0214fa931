"""What streaming a reply to a watcher costs per chunk, and what a run with no watcher
pays for streaming existing (issue #29).

The workload: one model state whose reply is N words streamed one chunk each (a
`ScriptedModel` yields the event loop between chunks, as a network stream does), then
`next_state` to done; the run is on a `MemoryStore(encode=False)`.

- **Per chunk, one consumer** (callgrind, instructions, repeatable under load): each
  counted process runs `watch` with a consumer that reads every event, at N = 1,000 and
  at N = 1; a second pair only iterates the model's own `stream()` (the model's cost, no
  framework). Framework instructions per chunk = ((W1000 - W1) - (M1000 - M1)) / 999.
  They are turned into time with the instructions per microsecond of the watched run
  measured natively in the same script (`--no-callgrind` skips callgrind and reports the
  native time per chunk only).
- **No consumer**: the same run with `run_to_end` and no `on=`, timed natively against
  the same run watched, side by side in alternating rounds; and the no-consumer
  transition cost in instructions is what `benchmarks/instructions.py` reports (compared
  with the last figures in docs/performance.md).

Run: `python benchmarks/streaming.py [--chunks 1000] [--rounds 7] [--no-callgrind]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

import statechart as sc
from statechart.records.messages import Request, ToolSpec

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "streaming.json"


def chart() -> sc.Chart:
    return sc.Chart(
        "stream",
        states=(sc.State("talk", instructions="Talk."), sc.State("done", kind="terminal")),
        edges=(sc.Edge("talk", "done"),),
        budget=sc.Budget(max_steps=10),
    )


def model(chunks: int) -> sc.ScriptedModel:
    words = " ".join("w" for _ in range(chunks))
    return sc.ScriptedModel([sc.reply(sc.call("next_state", target="done"), content=words)])


async def watched(chunks: int) -> int:
    """One run, watched by a consumer that reads every event: the tokens it read."""
    c, m, store = chart(), model(chunks), sc.MemoryStore(encode=False)
    run = await sc.start(c, store=store, model=m)
    read = 0
    async with sc.watch(c, run, store=store, model=m) as events:
        async for event in events:
            read += isinstance(event, sc.Token)
    assert events.run is not None and events.run.state == "done"
    return read


async def called(chunks: int) -> int:
    """The same run with an `on=` callback that counts tokens (no buffer, no task)."""
    c, m, store = chart(), model(chunks), sc.MemoryStore(encode=False)
    run = await sc.start(c, store=store, model=m)
    read = 0

    def on(event: sc.LiveEvent) -> None:
        nonlocal read
        read += isinstance(event, sc.Token)

    end = await sc.run_to_end(c, run, store=store, model=m, on=on)
    assert end.state == "done"
    return read


async def unwatched(chunks: int) -> int:
    """The same run with no consumer (the model is asked with `complete`)."""
    c, m, store = chart(), model(chunks), sc.MemoryStore(encode=False)
    run = await sc.start(c, store=store, model=m)
    end = await sc.run_to_end(c, run, store=store, model=m)
    assert end.state == "done"
    return 0


async def model_only(chunks: int) -> int:
    """The model's own stream, iterated with nothing else: what the chunks cost it."""
    m = model(chunks)
    leave = ToolSpec(name="next_state", description="leave", parameters={"type": "object"})
    request = Request(state="talk", instructions="", context={}, transcript=(), tools=(leave,))
    n = 0
    async for piece in m.stream(request):
        n += isinstance(piece, sc.Chunk)
    return n


KINDS = {"watched": watched, "called": called, "unwatched": unwatched, "model": model_only}


def one(kind: str, chunks: int) -> None:
    """The counted process: one run of `kind` with `chunks` chunks."""
    print(anyio.run(KINDS[kind], chunks))


def counted(kind: str, chunks: int) -> int:
    """Instructions of a process running one `kind` run: the fewer of two counts (a
    first import that writes bytecode, or other one-off work, would count otherwise)."""
    from instructions import callgrind

    env = {**os.environ, "PYTHONPATH": f"{HERE.parent}{os.pathsep}{HERE}", "PYTHONHASHSEED": "0"}
    command = [sys.executable, str(Path(__file__).resolve()), "--one", kind, str(chunks)]
    subprocess.run(command, env=env, check=True, capture_output=True)  # warm: bytecode written
    counts = []
    for _ in range(2):
        instructions, out = callgrind(command, env)
        assert kind not in ("watched", "called") or int(out.split()[-1]) >= 1, out  # tokens read
        counts.append(instructions)
    return min(counts)


async def timed(kind: str, chunks: int) -> float:
    gc.collect()
    t0 = time.perf_counter()
    await KINDS[kind](chunks)
    return time.perf_counter() - t0


async def natively(chunks: int, rounds: int) -> dict[str, float]:
    """Median seconds of each kind, rounds alternating the kinds."""
    seen: dict[str, list[float]] = {k: [] for k in KINDS}
    for _ in range(rounds):
        for kind in KINDS:
            seen[kind].append(await timed(kind, chunks))
    return {k: statistics.median(v) for k, v in seen.items()}


def measure(chunks: int, rounds: int, use_callgrind: bool) -> dict[str, object]:
    native = anyio.run(natively, chunks, rounds)
    small = anyio.run(natively, 1, rounds)
    per_chunk_native = (
        (native["watched"] - small["watched"]) - (native["model"] - small["model"])
    ) / (chunks - 1)
    result: dict[str, object] = {
        "chunks": chunks,
        "rounds": rounds,
        "native_seconds": {k: round(v, 6) for k, v in native.items()},
        "native_us_per_chunk_framework": round(per_chunk_native * 1e6, 3),
        "native_us_per_chunk_on_callback": round(
            ((native["called"] - small["called"]) - (native["model"] - small["model"]))
            / (chunks - 1)
            * 1e6,
            3,
        ),
        "watched_over_unwatched": round(native["watched"] / native["unwatched"], 2),
    }
    if use_callgrind:
        counts = {k: (counted(k, 1), counted(k, chunks)) for k in KINDS}
        m_small, m_big = counts["model"]

        def per_chunk(kind: str) -> float:
            small_, big = counts[kind]
            return ((big - small_) - (m_big - m_small)) / (chunks - 1)

        w_small, w_big = counts["watched"]
        # instructions per microsecond of the watched run's extra chunks, natively: the
        # same difference in both units, so start-up costs cancel out
        ips = (w_big - w_small) / ((native["watched"] - small["watched"]) * 1e6)
        result["instructions"] = {k: list(v) for k, v in counts.items()}
        result["framework_instructions_per_chunk"] = round(per_chunk("watched"))
        result["framework_instructions_per_chunk_on_callback"] = round(per_chunk("called"))
        result["instructions_per_us"] = round(ips)
        result["framework_us_per_chunk"] = round(per_chunk("watched") / ips, 3)
        result["framework_us_per_chunk_on_callback"] = round(per_chunk("called") / ips, 3)
        u_small, u_big = counts["unwatched"]  # no chunks: the longer reply's text only
        result["unwatched_instructions_per_word"] = round((u_big - u_small) / (chunks - 1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-callgrind", action="store_true")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "CHUNKS"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]))
        return
    result = measure(args.chunks, args.rounds, not args.no_callgrind)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
