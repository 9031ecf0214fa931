"""What tracing costs per transition: off, the SDK with a no-op exporter, OTLP export.

A standalone script (never collected as a test). The workload is benchmarks/overhead.py's:
one model state calling a cheap tool over and over, then `next_state` to a terminal,
driven by `run_to_end` on the memory store with a `FunctionModel`. Configurations:

- ``off``: no tracer provider installed (the OpenTelemetry API's no-op spans), its
  rounds paired with rounds of the same process in which the driver's `RunTrace` is
  replaced by a stub (the build without tracing code: each drive skips it entirely);
- ``sdk_none``: `statechart.tracing.configure(exporter="none")`: the SDK records every
  span, with no span processor;
- ``sdk_batch_noop``: an SDK `TracerProvider` with a `BatchSpanProcessor` around an
  exporter whose `export` does nothing (the SDK as an application configures it, minus
  the network);
- ``otlp``: `configure(exporter="otlp")` (batched) to a real OTLP/HTTP receiver on
  127.0.0.1 in this process (tests/support/otlp_receiver.py), which decodes every request.

OpenTelemetry's global tracer provider can be set once per process, so each measurement
is a child process (`--child CONFIG`) printing JSON; the configurations take turns in
every repeat (in rotated order). Figures: µs per transition, the median over repeats of
each child's median over its rounds, the spread (min to max) over the repeats, and the
µs added per transition against ``off`` in the same repeat. The bare SDK's own cost is
measured in the SDK children: per transition, one span with as many attributes as the
spans statechart made there (counted from what the exporter was handed), made current
and ended, with no statechart code.

    python benchmarks/tracing.py                  # markdown table; JSON to --out
    python benchmarks/tracing.py --profile        # also cProfile sdk_batch_noop to stderr
    python benchmarks/tracing.py --instructions   # also callgrind: instructions per transition

With `--instructions`, `valgrind --tool=callgrind` counts whole processes of ``off``, of
``sdk_batch_noop`` and of the bare SDK loop (``floor``, under the same provider) at 100 and
600 transitions; (I(600) - I(100)) / 500 cancels imports and start-up. Repeatable under
load, so it shows what one change to the tracing code moved.
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
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from overhead import driven_once, make_chart  # the same workload, side by side

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = HERE / "results" / "tracing.json"
CONFIGS = ("off", "sdk_none", "sdk_batch_noop", "otlp")
TARGET_ADDED_US = 25.0
"""Target: µs added per transition with the SDK configured (sdk_batch_noop)."""
TARGET_FLOOR_RATIO = 1.3
"""Target: that added cost at most this many times the bare SDK's one span."""
TARGET_OFF_RATIO = 1.03
"""Target: tracing off at most 3% slower than the build without tracing code."""


# -- the child: one configuration, several rounds ----------------------------------------


def install(config: str) -> tuple[Any, Any]:
    """Set up tracing for `config`; (provider or None, the null exporter or None)."""
    if config == "off":
        return None, None
    from statechart import tracing

    if config == "sdk_none":
        return tracing.configure("bench", exporter="none"), None
    if config == "otlp":
        return tracing.configure("bench", exporter="otlp", batch=True), None
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Null(SpanExporter):
        """Counts what it is handed (and each transition span's attributes by its
        operation) and sends nothing."""

        def __init__(self) -> None:
            self.spans = 0
            self.attributes: dict[str, list[int]] = {}
            self.per_trace: dict[int, int] = {}

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            for span in spans:
                scope = span.instrumentation_scope
                if scope is not None and scope.name == "floor":
                    continue  # the bare SDK loop's own spans
                self.spans += 1
                assert span.context is not None
                trace_id = span.context.trace_id
                self.per_trace[trace_id] = self.per_trace.get(trace_id, 0) + 1
                a = span.attributes or {}
                if "statechart.step" in a:
                    op = str(a.get("gen_ai.operation.name", "transition"))
                    self.attributes.setdefault(op, []).append(len(a))
            return SpanExportResult.SUCCESS

    null = Null()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(null))
    trace.set_tracer_provider(provider)
    return provider, null


async def child_rounds(steps: int, rounds: int) -> tuple[list[float], int]:
    """µs per transition of each round (after a warm-up run), and transitions per run."""
    chart = make_chart(steps)
    await driven_once(chart, steps)
    out: list[float] = []
    n = 0
    for _ in range(rounds):
        secs, n, _ = await driven_once(chart, steps)
        out.append(secs / n * 1e6)
    return out, n


class _NoTrace:
    """What the driver builds instead of a `RunTrace` in the build without tracing code."""

    on = False

    def __init__(self, *args: Any) -> None:
        pass

    def close(self, *args: Any) -> None:
        pass


class _BareTrace:
    """The driver's hooks doing only the SDK's work of statechart's spans, inside a real
    run: per transition one span with the same attribute counts (constant values, built
    once), the call's span made current while it runs; no facts, no span id in the event.
    What the SDK itself costs for one span a transition, under the run's conditions."""

    on = True

    def __init__(self, *args: Any) -> None:
        from opentelemetry import context, trace

        self._context_api, self._trace = context, trace
        self.tracer = trace.get_tracer("floor")
        self.root = self.tracer.start_span("invoke_agent bare")
        self.parent = trace.set_span_in_context(self.root)
        self.span: Any = None
        self.token: Any = None
        self.kind = ""
        chat, tool = FLOOR_ATTRIBUTES["chat"], FLOOR_ATTRIBUTES["execute_tool"]
        self.first = {"gen_ai.operation.name": "op", "a1": 1, "a2": "x", "a3": "y"}
        self.rest = {
            "chat": {f"b{k}": k for k in range(chat - 4)},
            "execute_tool": {f"b{k}": k for k in range(tool - 4)},
        }
        self.transition = {f"t{k}": k for k in range(8)}

    def before_step(self, *, run: Any) -> None:
        pass

    def effect_started(self, *, run: Any, effect: Any) -> None:
        name = type(effect).__name__
        if name in ("CallModel", "RunTool"):
            self.kind = "chat" if name == "CallModel" else "execute_tool"
            self.span = self.tracer.start_span(
                self.kind, context=self.parent, attributes=self.first
            )
            self.token = self._context_api.attach(self._trace.set_span_in_context(self.span))

    def effect_ended(self, *, outcome: Any) -> None:
        if self.token is not None:
            self._context_api.detach(self.token)
            self.token = None

    def after_step(self, *, before: Any, record: Any, started_ns: int) -> Any:
        if self.span is None:
            self.span = self.tracer.start_span(
                "transition", context=self.parent, attributes=self.transition
            )
        else:
            self.span.set_attributes(self.rest[self.kind])
        return record

    def step_stored(self, *, record: Any, error: BaseException | None = None) -> None:
        self.span.end()
        self.span = None

    def close(self, *args: Any) -> None:
        self.root.end()


async def rotated_rounds(
    steps: int, rounds: int, floor: bool
) -> tuple[dict[str, list[float]], int]:
    """µs per transition of rounds taking turns in this process, after a warm-up of each:
    `traced` (the run as configured), `stub` (the driver with no tracing code: its
    `RunTrace` replaced by a stub, so a drive makes no span) and, with `floor`, the bare
    SDK's one span per transition in a tight loop (`floor`, µs per span) and inside the
    same run (`bare`: `_BareTrace` as the driver's hooks, µs per transition)."""
    from statechart.runtime import driver

    chart = make_chart(steps)
    real = driver.tracing.RunTrace
    modes = ("traced", "stub", "floor", "bare") if floor else ("traced", "stub")
    found: dict[str, list[float]] = {mode: [] for mode in modes}
    n = steps
    for i in range(len(modes) * (rounds + 1)):
        mode = modes[i % len(modes)]
        if mode == "floor":
            us = sdk_floor(steps, FLOOR_ATTRIBUTES)
        else:
            hooks = {"stub": _NoTrace, "bare": _BareTrace}.get(mode, real)
            driver.tracing.RunTrace = hooks  # type: ignore[assignment]
            try:
                secs, n, _ = await driven_once(chart, steps)
            finally:
                driver.tracing.RunTrace = real  # type: ignore[misc]
            us = secs / n * 1e6
        if i >= len(modes):
            found[mode].append(us)
    return found, n


def child(config: str, steps: int, rounds: int, profile: bool) -> dict[str, Any]:
    provider, null = install(config)
    found: dict[str, Any] = {"config": config, "pid": os.getpid()}
    if profile:
        found["profile"] = profiled(steps)
    floor = config in ("sdk_none", "sdk_batch_noop")
    rounds_us, n = anyio.run(rotated_rounds, steps, rounds, floor)
    found.update(
        us_per_transition=rounds_us["traced"],
        no_tracing_code_us=rounds_us["stub"],
        transitions=n,
        runs=(3 if floor else 2) * (rounds + 1) + (1 if profile else 0),
    )
    if floor:
        found["sdk_floor_us"] = rounds_us["floor"]
        found["sdk_in_run_us"] = rounds_us["bare"]
    if null is not None:
        provider.force_flush()
        # less the bare runs' first spans (one a run), which the otlp child does not make
        found["spans_exported"] = null.spans - (rounds + 1 if floor else 0)
        found["spans_per_traced_run"] = statistics.median(
            c
            for c in null.per_trace.values()
            if c > 1  # a stub run's trace: its first span
        )
        found["attributes"] = {k: statistics.median(v) for k, v in null.attributes.items()}
        found["floor_attributes_match"] = (
            found["attributes"].get("chat") == FLOOR_ATTRIBUTES["chat"]
            and found["attributes"].get("execute_tool") == FLOOR_ATTRIBUTES["execute_tool"]
        )
    if provider is not None:
        provider.shutdown()  # flushes (outside the timed rounds)
    return found


def sdk_floor(n: int, attributes: dict[str, int]) -> float:
    """µs per transition for the bare SDK work of one span per transition, as statechart
    makes them here: a `chat` span (CLIENT) or an `execute_tool` span, taking turns, each
    made current while its call would run, with `attributes[op]` attributes (4 given at
    the start, the rest set before it ends), then ended; no statechart code."""
    from opentelemetry import context, trace

    tracer = trace.get_tracer("floor")
    root = tracer.start_span("invoke_agent floor")
    parent = trace.set_span_in_context(root)
    chat, tool = attributes["chat"], attributes["execute_tool"]
    gc.collect()
    t0 = time.perf_counter()
    for i in range(n):
        op, count = ("execute_tool", tool) if i % 2 else ("chat", chat)
        span = tracer.start_span(
            f"{op} lookup",
            context=parent,
            kind=trace.SpanKind.INTERNAL if i % 2 else trace.SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": op, "a1": i, "a2": "x", "a3": "y"},
        )
        token = context.attach(trace.set_span_in_context(span))
        context.detach(token)
        span.set_attributes({f"b{k}": k for k in range(count - 4)})
        span.end()
    elapsed = time.perf_counter() - t0
    root.end()
    return elapsed / n * 1e6


def profiled(steps: int) -> dict[str, Any]:
    """cProfile one driven run (stderr); each statechart/tracing.py function's share."""
    chart = make_chart(steps)
    anyio.run(driven_once, chart, steps)
    prof = cProfile.Profile()
    prof.enable()
    anyio.run(driven_once, chart, steps)
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    print(text.getvalue(), file=sys.stderr)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total: float = stats.total_tt  # type: ignore[attr-defined]
    mine = os.path.join("statechart", "tracing", "")
    tracing: dict[str, Any] = {}
    own = sdk = 0.0
    for (path, line, name), (_, _, tottime, cumtime, _) in raw.items():
        if mine in path:
            own += tottime
            tracing[f"{name}:{line}"] = {
                "self_pct": pct(tottime, total),
                "cumulative_pct": pct(cumtime, total),
            }
        elif f"{os.sep}opentelemetry{os.sep}" in path:
            sdk += tottime
    ranked = dict(sorted(tracing.items(), key=lambda kv: -kv[1]["cumulative_pct"]))
    return {
        "note": "percent of the whole profiled run (self: in the function itself; "
        "cumulative: with what it calls)",
        "tracing_py_self_pct": pct(own, total),
        "opentelemetry_self_pct": pct(sdk, total),
        "tracing_py": ranked,
        "timed_calls": timed_calls(steps),
    }


@contextlib.contextmanager
def timing(found: dict[str, float], targets: list[tuple[Any, str, str]]) -> Iterator[None]:
    """Accumulate the wall time of each `(owner, attribute, label)` call while inside."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]

    def timed(fn: Any, label: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                found[label] = found.get(label, 0.0) + time.perf_counter() - t0

        return call

    for (owner, name, label), (_, _, fn) in zip(targets, saved, strict=True):
        setattr(owner, name, timed(fn, label))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def timed_calls(steps: int) -> dict[str, Any]:
    """µs per transition in each tracing entry point of the driver, and in the SDK calls
    made inside them (one run with timing wrappers; each wrapper adds ~0.2 µs)."""
    from opentelemetry.sdk.trace import Span, Tracer

    from statechart import tracing
    from statechart.records.run import Step
    from statechart.tracing import facts

    found: dict[str, float] = {}
    entry = [
        (tracing.RunTrace, name, f"RunTrace.{name}")
        for name in ("before_step", "effect_started", "effect_ended", "after_step", "step_stored")
    ]
    inner = [
        (facts, "transition_attributes", "transition_attributes"),
        (facts, "annotate", "annotate"),
        (Step, "with_span", "Step.with_span"),
        (Tracer, "start_span", "sdk Tracer.start_span"),
        (Span, "end", "sdk Span.end"),
        (Span, "set_attributes", "sdk Span.set_attributes"),
    ]
    chart = make_chart(steps)
    with timing(found, entry + inner):
        _, n, _ = anyio.run(driven_once, chart, steps)
    us = {k: r(v / n * 1e6) for k, v in sorted(found.items(), key=lambda kv: -kv[1])}
    return {
        "note": "one run; inner calls are included in the entry points that make them",
        "entry_points_us": r(sum(us[label] for _, _, label in entry if label in us)),
        "sdk_us": r(sum(v for k, v in us.items() if k.startswith("sdk "))),
        "us_per_transition": us,
    }


INSTRUCTION_SIZES = (100, 600)
FLOOR_ATTRIBUTES = {"chat": 16, "execute_tool": 12}
"""What the spans of this workload carry (the table's `span attributes` line)."""


def counted(config: str, steps: int) -> None:
    """The process callgrind counts: one run of `config` (or the bare SDK loop)."""
    if config == "floor":
        provider, _ = install("sdk_batch_noop")
        sdk_floor(steps, FLOOR_ATTRIBUTES)
    elif config == "bare":
        from statechart.runtime import driver

        provider, _ = install("sdk_batch_noop")
        driver.tracing.RunTrace = _BareTrace  # type: ignore[assignment,misc]
        anyio.run(driven_once, make_chart(steps), steps)
    else:
        provider, _ = install(config)
        anyio.run(driven_once, make_chart(steps), steps)
    if provider is not None:
        provider.shutdown()


def instructions() -> dict[str, Any]:
    """Instructions per transition of off, sdk_batch_noop and the bare SDK's one span."""
    from instructions import callgrind

    per: dict[str, float] = {}
    env = {**child_env("http://127.0.0.1:9"), "PYTHONHASHSEED": "0"}
    for config in ("off", "sdk_batch_noop", "floor", "bare"):
        found = []
        for steps in INSTRUCTION_SIZES:
            script = [sys.executable, str(Path(__file__).resolve()), "--counted", config]
            found.append(callgrind([*script, "--steps", str(steps)], env)[0])
        per[config] = (found[1] - found[0]) / (INSTRUCTION_SIZES[1] - INSTRUCTION_SIZES[0])
        print(f"instructions: {config} {per[config]:,.0f} per transition", file=sys.stderr)
    added = per["sdk_batch_noop"] - per["off"]
    return {
        "per_transition": {k: round(v) for k, v in per.items()},
        "added": round(added),
        "added_over_floor": r(added / per["floor"]),
        "added_over_sdk_in_run": r(added / (per["bare"] - per["off"])),
    }


def pct(x: float, total: float) -> float:
    return round(100.0 * x / total, 1) if total else 0.0


# -- the parent: every configuration in every repeat -------------------------------------


def run_child(
    config: str, args: argparse.Namespace, env: dict[str, str], profile: bool = False
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        config,
        "--steps",
        str(args.steps),
        "--rounds",
        str(args.rounds),
    ]
    if profile:
        cmd.append("--profile")
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"child {config} failed:\n{done.stderr}")
    if profile:
        print(done.stderr, file=sys.stderr)
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def child_env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return env


def measure(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.support.otlp_receiver import Receiver

    load_before = os.getloadavg()[0]
    per: dict[str, list[float]] = {c: [] for c in CONFIGS}
    floor: dict[str, list[float]] = {"sdk_none": [], "sdk_batch_noop": []}
    rounds: dict[str, list[list[float]]] = {c: [] for c in CONFIGS}
    received: list[int] = []
    exported: list[int] = []
    off_ratio: list[float] = []
    added: dict[str, list[float]] = {c: [] for c in CONFIGS[1:]}
    floor_ratio: dict[str, list[float]] = {c: [] for c in floor}
    in_run: dict[str, list[float]] = {c: [] for c in floor}
    in_run_ratio: dict[str, list[float]] = {c: [] for c in floor}
    per_run: list[float] = []
    attributes: dict[str, float] = {}
    runs = transitions = 0
    profile: dict[str, Any] | None = None
    with Receiver() as rx:
        env = child_env(rx.endpoint)
        for repeat in range(args.repeats):
            order = CONFIGS[repeat % len(CONFIGS) :] + CONFIGS[: repeat % len(CONFIGS)]
            for config in order:
                rx.clear()
                found = run_child(config, args, env)
                if config == "otlp":  # the child flushed before exiting
                    spans, _ = rx.snapshot()
                    received.append(len(spans))
                if config == "sdk_batch_noop":
                    exported.append(found["spans_exported"])
                    per_run.append(found["spans_per_traced_run"])
                    attributes = found["attributes"]
                    if not found["floor_attributes_match"]:
                        print(f"floor attributes differ: {attributes}", file=sys.stderr)
                traced, stub = found["us_per_transition"], found["no_tracing_code_us"]
                if config == "off":  # off over no tracing code, per pair of rounds
                    off_ratio.append(
                        statistics.median(o / s for o, s in zip(traced, stub, strict=True))
                    )
                else:  # what tracing adds, per pair of rounds in this process
                    added[config].append(
                        statistics.median(t - s for t, s in zip(traced, stub, strict=True))
                    )
                per[config].append(statistics.median(traced))
                if config in floor:
                    bare = found["sdk_floor_us"]
                    floor[config].append(statistics.median(bare))
                    floor_ratio[config].append(
                        statistics.median(
                            (t - s) / f for t, s, f in zip(traced, stub, bare, strict=True)
                        )
                    )
                    sdk = [b - s for b, s in zip(found["sdk_in_run_us"], stub, strict=True)]
                    in_run[config].append(statistics.median(sdk))
                    in_run_ratio[config].append(
                        statistics.median(
                            (t - s) / b for t, s, b in zip(traced, stub, sdk, strict=True)
                        )
                    )
                rounds[config].append([r(x) for x in found["us_per_transition"]])
                runs, transitions = found["runs"], found["transitions"]
            print(
                f"repeat {repeat + 1}/{args.repeats}: "
                + ", ".join(f"{c} {per[c][-1]:.1f}" for c in CONFIGS),
                file=sys.stderr,
            )
        if args.profile:
            profile = run_child("sdk_batch_noop", args, env, profile=True)["profile"]
        errors = list(rx.errors)
    sdk_added = statistics.median(added["sdk_batch_noop"])
    ratio_to_floor = statistics.median(floor_ratio["sdk_batch_noop"])
    ratio_in_run = statistics.median(in_run_ratio["sdk_batch_noop"])
    off_over_none = statistics.median(off_ratio)
    return {
        "benchmark": "statechart tracing cost per transition (model-state tool loop, "
        "memory store, FunctionModel)",
        "machine": {
            "nproc": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "opentelemetry_sdk": version("opentelemetry-sdk"),
            "opentelemetry_exporter_otlp_proto_http": version(
                "opentelemetry-exporter-otlp-proto-http"
            ),
            "statechart": version("statechart-agents"),
            "loadavg_1m": [r(load_before), r(os.getloadavg()[0])],
        },
        "note": "each configuration in its own child process, configurations interleaved; "
        "inside a child, rounds of the run as configured, of the driver without tracing "
        "code and (SDK children) of the bare SDK take turns, so every added figure and "
        "ratio is measured side by side in one process; absolute µs move between children",
        "settings": {
            "steps": args.steps,
            "rounds_per_child": args.rounds,
            "repeats": args.repeats,
            "transitions_per_run": transitions,
            "runs_per_child": runs,
        },
        "us_per_transition": {c: summary(per[c]) for c in CONFIGS},
        "added_us_per_transition": {c: summary(added[c]) for c in CONFIGS[1:]},
        "sdk_floor_us_per_transition": {c: summary(floor[c]) for c in floor},
        "above_sdk_floor_us": {
            c: summary([a - f for a, f in zip(added[c], floor[c], strict=True)]) for c in floor
        },
        "added_over_sdk_floor": {c: summary(floor_ratio[c]) for c in floor},
        "sdk_in_run_us_per_transition": {c: summary(in_run[c]) for c in floor},
        "added_over_sdk_in_run": {c: summary(in_run_ratio[c]) for c in floor},
        "off_over_no_tracing_code": summary(off_ratio),
        "transition_span_attributes": attributes,
        "spans": {
            "per_run": r(statistics.median(per_run), 1) if per_run else None,
            "per_transition": r(statistics.median(per_run) / transitions, 3) if per_run else None,
            "otlp_received_per_child": received,
            "otlp_expected_per_child": exported[0] if exported else None,
            "receiver_errors": errors,
        },
        "rounds_us": rounds,
        "targets": {
            "sdk_added_us": TARGET_ADDED_US,
            "sdk_added_met": sdk_added <= TARGET_ADDED_US,
            "added_over_floor": TARGET_FLOOR_RATIO,
            "added_over_floor_met": ratio_to_floor <= TARGET_FLOOR_RATIO,
            "added_over_sdk_in_run_met": ratio_in_run <= TARGET_FLOOR_RATIO,
            "off_over_no_tracing_code": TARGET_OFF_RATIO,
            "off_over_no_tracing_code_met": off_over_none <= TARGET_OFF_RATIO,
        },
        **({"profile_sdk_batch_noop": profile} if profile is not None else {}),
    }


def summary(xs: list[float]) -> dict[str, Any]:
    med = statistics.median(xs)
    return {
        "median": r(med),
        "min": r(min(xs)),
        "max": r(max(xs)),
        "spread_pct": r(100.0 * (max(xs) - min(xs)) / med, 1) if med else None,
        "repeats": [r(x) for x in xs],
    }


def r(x: float, nd: int = 2) -> float:
    return round(x, nd)


def fmt(s: dict[str, Any]) -> str:
    return f"{s['median']:.1f} ({s['min']:.1f} to {s['max']:.1f})"


def markdown(res: dict[str, Any]) -> str:
    us, added = res["us_per_transition"], res["added_us_per_transition"]
    floor = res["sdk_floor_us_per_transition"]
    lines = [
        "µs per transition, median (min to max) over "
        f"{res['settings']['repeats']} repeats; each repeat a child process per "
        f"configuration, {res['settings']['rounds_per_child']} runs of "
        f"{res['settings']['transitions_per_run']} transitions",
        "",
        "| tracing | µs per transition | added (paired, same process) | bare SDK span, "
        "tight loop | added over it | bare SDK span, inside the run | added over it |",
        "|---|---|---|---|---|---|---|",
    ]
    ratio, in_run = res["added_over_sdk_floor"], res["sdk_in_run_us_per_transition"]
    in_ratio = res["added_over_sdk_in_run"]
    for c in CONFIGS:
        cells = [
            fmt(us[c]),
            fmt(added[c]) if c in added else "—",
            fmt(floor[c]) if c in floor else "—",
            f"{fmt(ratio[c])}x" if c in ratio else "—",
            fmt(in_run[c]) if c in in_run else "—",
            f"{fmt(in_ratio[c])}x" if c in in_ratio else "—",
        ]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    spans, t = res["spans"], res["targets"]
    lines += [
        "",
        f"spans per transition: {spans['per_transition']}; OTLP spans received per "
        f"child: {spans['otlp_received_per_child']} (expected "
        f"{spans['otlp_expected_per_child']})",
        f"span attributes per transition span: {res['transition_span_attributes']}",
        *(
            [
                f"instructions per transition (callgrind): {res['instructions']['per_transition']}"
                f"; added with the SDK {res['instructions']['added']:,}, "
                f"{res['instructions']['added_over_floor']}x the bare SDK's one span in a "
                f"tight loop, {res['instructions']['added_over_sdk_in_run']}x inside the run"
            ]
            if "instructions" in res
            else []
        ),
        f"target: sdk_batch_noop adds ≤ {t['sdk_added_us']} µs per transition: "
        + ("met" if t["sdk_added_met"] else "MISSED"),
        f"target: that is ≤ {t['added_over_floor']}x the bare SDK's one span, in a tight "
        f"loop: {fmt(res['added_over_sdk_floor']['sdk_batch_noop'])}x "
        + ("met" if t["added_over_floor_met"] else "MISSED")
        + f"; inside the run: {fmt(res['added_over_sdk_in_run']['sdk_batch_noop'])}x "
        + ("met" if t["added_over_sdk_in_run_met"] else "MISSED"),
        f"target: tracing off ≤ {t['off_over_no_tracing_code']}x the build without tracing "
        f"code (paired rounds): {res['off_over_no_tracing_code']['median']:.3f}x "
        + ("met" if t["off_over_no_tracing_code_met"] else "MISSED"),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="transitions per run")
    parser.add_argument("--rounds", type=int, default=5, help="timed runs per child")
    parser.add_argument("--repeats", type=int, default=5, help="children per configuration")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile one sdk_batch_noop run (stderr, and in the JSON)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON result")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (callgrind)"
    )
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--counted", choices=(*CONFIGS, "floor", "bare"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.counted:
        counted(args.counted, args.steps)
        return
    if args.steps < 4 or args.rounds < 1 or args.repeats < 1:
        parser.error("need --steps >= 4, --rounds >= 1 and --repeats >= 1")
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.rounds, args.profile)))
        return
    t0 = time.perf_counter()
    result = measure(args)
    if args.instructions:
        result["instructions"] = instructions()
    result["settings"]["wall_s"] = r(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(markdown(result))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
