"""Per-transition overhead of statechart, side by side with a bare `transitions` trigger.

A standalone script (never collected as a test). It drives one model state
that calls a cheap tool over and over and then calls `next_state` to a
terminal, with `statechart.run_to_end` (which iterates `statechart.drive`) on
the memory store, no tracing, exactly as a user would. In the same rounds it
measures (µs per transition, medians over interleaved rounds):

- ``driven``: `run_to_end` wall time / transitions (model, tool, plan, advance, store);
- ``floor_bare_trigger``: one bare trigger on the same compiled `transitions`
  machine (the model state's internal `propose` / `results`, alternating);
- ``machine_fire``: `CompiledChart.machine_fire` (set_state + trigger + exit check);
- ``pure_plan`` / ``pure_advance``: `step.plan` and `step.advance` alone, in a
  synchronous loop (no awaits, no store);
- ``driver_model_tool_store``: ``driven`` minus the pure part.

Then ``above_floor_us`` and ``ratio_to_floor`` (medians of per-round
differences and ratios), and storage: JSON bytes per event row, per
transcript delta, and the snapshot at start and end.

    python benchmarks/overhead.py --steps 1000 --rounds 7    # one JSON object on stdout
    python benchmarks/overhead.py --profile                  # also a cProfile on stderr
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import anyio
import msgspec
import pydantic

import statechart as sc
from statechart.engine import compiled
from statechart.engine.effects import CallModel, Ended, RunTool, Wait
from statechart.engine.session import Session
from statechart.engine.transition import advance, plan

TARGET_PER_TRANSITION_US = 60.0
TARGET_ABOVE_FLOOR_US = 25.0


class Ctx(pydantic.BaseModel):
    note: str | None = None


def lookup(n: int) -> str:
    """A cheap tool: echoes its argument (distinct arguments, so no repeat refusals)."""
    return f"item {n}"


LOOKUP = sc.tool(retry="safe", inline=True)(lookup)  # pure and quick: on the loop


def make_chart(steps: int) -> sc.Chart:
    """One model state looping on `lookup`, then `next_state` to `done`."""
    return sc.Chart(
        "bench",
        states=(
            sc.State("work", tools=(LOOKUP,), writes=("note",), max_iterations=steps),
            sc.State("done", kind="terminal"),
        ),
        edges=(sc.Edge("work", "done"),),
        context=Ctx,
        budget=sc.Budget(max_steps=steps * 2),
    )


def make_policy(steps: int) -> Callable[[sc.Request], sc.Reply]:
    """Tool calls until `steps` transitions are reached, then `next_state`.

    Every tool iteration is two transitions (think -> act -> think), and the
    final `next_state` is two more (think -> act, act -> done).
    """
    tool_calls = max(0, steps // 2 - 1)
    count = 0

    def policy(request: sc.Request) -> sc.Reply:
        nonlocal count
        count += 1
        if count <= tool_calls:
            return sc.reply(sc.call("lookup", f"c{count}", n=count))
        return sc.reply(sc.call("next_state", f"c{count}", target="done", note="ok"))

    return policy


class _Lean(sc.FunctionModel):
    """A FunctionModel that does not keep every request (that list is not framework cost)."""

    async def complete(self, request: sc.Request) -> sc.Reply:
        out = await super().complete(request)
        self.requests.clear()
        return out


async def driven_once(chart: sc.Chart, steps: int) -> tuple[float, int, dict[str, Any]]:
    """Seconds spent in `run_to_end`, transitions made, and what the store holds."""
    store = sc.MemoryStore(encode=False)  # no persistence: the framework alone
    model = _Lean(make_policy(steps))
    run = await sc.start(chart, store=store, model=model)
    gc.collect()
    t0 = time.perf_counter()
    end = await sc.run_to_end(chart, run, store=store, model=model)
    elapsed = time.perf_counter() - t0
    if end.state != "done":
        raise SystemExit(f"benchmark run ended in {end.state!r}: {end.reason}")
    events = await store.events(run.run_id)
    transcript = await store.transcript(run.run_id, 0)
    stored = {"events": events, "transcript": transcript, "start": run, "end": end}
    return elapsed, len(events), stored


def storage(stored: dict[str, Any]) -> dict[str, Any]:
    """JSON bytes the run leaves behind: event rows, transcript deltas, the snapshot."""
    events: list[sc.Event] = stored["events"]
    n = len(events)
    full = [len(json.dumps(sc.to_dict(e), separators=(",", ":"))) for e in events]
    lean = [len(msgspec.json.encode(e)) for e in events]
    delta = sum(len(msgspec.json.encode(m)) for m in stored["transcript"])
    return {
        "event_json_bytes": {
            "per_transition": r(sum(full) / n, 1),
            "min": min(full),
            "max": max(full),
            "total": sum(full),
            "per_transition_exclude_defaults": r(sum(lean) / n, 1),
        },
        "transcript_delta_json_bytes_per_transition": r(delta / n, 1),
        "snapshot_json_bytes": {
            "start": len(msgspec.json.encode(stored["start"])),
            "end": len(msgspec.json.encode(stored["end"])),
        },
    }


def floor_once(chart: sc.Chart, n: int) -> float:
    """Seconds for `n` bare triggers on the compiled machine (propose/results alternating).

    `trigger_event` is what `model.trigger(name)` calls in a `HierarchicalMachine`.
    """
    machine = compiled(chart).machine
    holder = machine.models[0]
    machine.set_state("work.think", model=holder)
    allow: Callable[[Any], bool] = lambda t: True  # noqa: E731
    fire = machine.trigger_event
    pairs = n // 2
    gc.collect()
    t0 = time.perf_counter()
    for _ in range(pairs):
        fire(holder, "propose", allow=allow)
        fire(holder, "results", allow=allow)
    elapsed = time.perf_counter() - t0
    if holder.state != "work.think":
        raise SystemExit(f"floor machine ended in {holder.state!r}")
    return elapsed / (pairs * 2) * n


MachineFire = Callable[[str, str, Callable[[Any], bool]], "str | None"]


def machine_fire_for(chart: sc.Chart) -> tuple[MachineFire, str]:
    """`CompiledChart.machine_fire`, or an equivalent when it does not work.

    The equivalent does what `machine_fire` means to do (set_state, trigger,
    follow sub-chart exits) with `trigger_event` instead of `model.trigger`.
    """
    cc = compiled(chart)
    try:
        if cc.machine_fire("work.think", "propose", lambda t: True) == "work.act":
            return cc.machine_fire, "CompiledChart.machine_fire"
        problem = "returned an unexpected state"
    except Exception as exc:
        problem = f"raised {type(exc).__name__}"
    machine = cc.machine
    holder = machine.models[0]

    def fire(leaf: str, trigger: str, allow: Callable[[Any], bool]) -> str | None:
        machine.set_state(leaf, model=holder)
        if not machine.trigger_event(holder, trigger, allow=allow):
            return None
        while "exit" in machine.get_triggers(holder.state):
            machine.trigger_event(holder, "exit", allow=allow)
        return str(holder.state)

    return fire, f"equivalent in this script (CompiledChart.machine_fire {problem})"


def machine_fire_once(fire: MachineFire, n: int) -> float:
    """Seconds for `n` `machine_fire` calls (what the differential test asks the machine)."""
    allow: Callable[[Any], bool] = lambda t: True  # noqa: E731
    pairs = n // 2
    gc.collect()
    t0 = time.perf_counter()
    for _ in range(pairs):
        fire("work.think", "propose", allow)
        fire("work.act", "results", allow)
    elapsed = time.perf_counter() - t0
    return elapsed / (pairs * 2) * n


async def pure_once(chart: sc.Chart, steps: int) -> tuple[float, float, int]:
    """Seconds in `plan` and in `advance` over one whole run, performed synchronously."""
    cc = compiled(chart)
    store = sc.MemoryStore(encode=False)  # no persistence: the framework alone
    policy = make_policy(steps)
    run = await sc.start(chart, store=store, model=sc.FunctionModel(policy))
    session = Session()
    in_plan = in_advance = 0.0
    n = 0
    clock = time.perf_counter
    gc.collect()
    while True:
        t0 = clock()
        effect = plan(cc, run, session)
        t1 = clock()
        if isinstance(effect, (Wait, Ended)):
            in_plan += t1 - t0
            break
        outcome = _perform_sync(effect, policy)
        t2 = clock()
        record = advance(cc, run, effect, outcome, now=t2)
        t3 = clock()
        session.absorb(run, record)
        run = record.run
        in_plan += t1 - t0
        in_advance += t3 - t2
        n += 1
    if run.state != "done":
        raise SystemExit(f"pure loop ended in {run.state!r}: {run.reason}")
    return in_plan, in_advance, n


def _perform_sync(effect: Any, policy: Callable[[sc.Request], sc.Reply]) -> Any:
    """The outcome `step()` would await, computed synchronously (model policy, sync tool)."""
    if isinstance(effect, CallModel):
        return policy(effect.request)
    if isinstance(effect, RunTool):
        return effect.tool.fn(**effect.arguments)
    return None


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def r(x: float, nd: int = 2) -> float:
    return round(x, nd)


async def measure(steps: int, rounds: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    chart = make_chart(steps)
    # Warm-up: compile the chart, build the machine, the model views, pydantic validators.
    await driven_once(chart, steps)
    floor_once(chart, min(steps, 200))
    mfire, mfire_source = machine_fire_for(chart)
    machine_fire_once(mfire, min(steps, 200))
    await pure_once(chart, steps)

    driven: list[float] = []
    floor: list[float] = []
    fire: list[float] = []
    plan_us: list[float] = []
    advance_us: list[float] = []
    pure: list[float] = []
    diff: list[float] = []
    ratio: list[float] = []
    stored: dict[str, Any] = {}
    for _ in range(rounds):
        secs, n, stored = await driven_once(chart, steps)
        d = secs / n * 1e6
        f = floor_once(chart, n) / n * 1e6
        mf = machine_fire_once(mfire, n) / n * 1e6
        p_plan, p_adv, pn = await pure_once(chart, steps)
        driven.append(d)
        floor.append(f)
        fire.append(mf)
        plan_us.append(p_plan / pn * 1e6)
        advance_us.append(p_adv / pn * 1e6)
        pure.append((p_plan + p_adv) / pn * 1e6)
        diff.append(d - f)
        ratio.append(d / f)
    n = len(stored["events"])
    driven_med, diff_med = median(driven), median(diff)
    return {
        "benchmark": "statechart per-transition overhead (model-state loop, memory store)",
        "machine": {
            "nproc": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "transitions": version("transitions"),
            "pydantic": pydantic.VERSION,
            "statechart": version("statechart"),
            "loadavg_1m": [r(load_before), r(os.getloadavg()[0])],
        },
        "note": "side by side on a possibly shared machine: compare ratios, not absolute µs",
        "steps": n,
        "rounds": rounds,
        "us_per_transition": {
            "driven": r(driven_med),
            "floor_bare_trigger": r(median(floor)),
            "machine_fire": r(median(fire)),
            "pure_plan_plus_advance": r(median(pure)),
            "pure_plan": r(median(plan_us)),
            "pure_advance": r(median(advance_us)),
            "driver_model_tool_store": r(driven_med - median(pure)),
        },
        "machine_fire_source": mfire_source,
        "above_floor_us": r(diff_med),
        "ratio_to_floor": r(median(ratio)),
        "rounds_us": {
            "driven": [r(x) for x in driven],
            "floor_bare_trigger": [r(x) for x in floor],
            "pure_plan_plus_advance": [r(x) for x in pure],
        },
        **storage(stored),
        "targets": {
            "per_transition_us": TARGET_PER_TRANSITION_US,
            "above_floor_us": TARGET_ABOVE_FLOOR_US,
            "per_transition_met": driven_med <= TARGET_PER_TRANSITION_US,
            "above_floor_met": diff_med <= TARGET_ABOVE_FLOOR_US,
        },
    }


def profile(steps: int) -> None:
    """cProfile one driven run (after a warm-up) and print the top costs to stderr."""
    chart = make_chart(steps)
    anyio.run(driven_once, chart, steps)
    prof = cProfile.Profile()
    prof.enable()
    anyio.run(driven_once, chart, steps)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    print(out.getvalue(), file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="transitions per run")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median)")
    parser.add_argument("--profile", action="store_true", help="cProfile one run to stderr")
    args = parser.parse_args(argv)
    if args.steps < 4 or args.rounds < 1:
        parser.error("need --steps >= 4 and --rounds >= 1")
    if args.profile:
        profile(args.steps)
    result = anyio.run(measure, args.steps, args.rounds)
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
