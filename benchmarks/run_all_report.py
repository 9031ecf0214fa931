"""The targets of issue #6 and the markdown tables of run_all.py."""

from __future__ import annotations

from typing import Any

from side_common import fmt

TARGET_MEMORY = 4.0
"""LangGraph's time for the same workload over statechart's, in memory (at 200 steps)."""
TARGET_DURABLE = 20.0
"""LangGraph + SqliteSaver's over statechart SQLiteStore(process)'s, at 200 steps."""
TARGET_FLAT = 0.20
"""Bytes per transition at the longest run within this fraction of the shortest."""
TARGET_IDEAL = 1.5
TARGET_KIB_PER_RUN = 50.0
JUDGED_AT = "200"
MEMORY_ROWS = ("statechart", "plain", "langgraph_graph", "langgraph_graph_inmemory",
               "langgraph_react")
BYTES_KEYS = ("write_bytes_total", "wchar_total", "files_growth", "main_after_checkpoint")


def _get(res: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(res, dict) or key not in res:
            return None
        res = res[key]
    return res


def targets(res: dict[str, Any]) -> dict[str, Any]:
    """Per target: measured, target, met (None when its figure was not run)."""
    out: dict[str, Any] = {}
    mem = _get(res, "memory", JUDGED_AT, "workload_ratio", "langgraph_graph_to_statechart")
    if mem:
        out["memory_faster_than_langgraph"] = {
            "measured": mem["median"], "target": f">= {TARGET_MEMORY}",
            "met": mem["median"] >= TARGET_MEMORY,
            "how": "LangGraph StateGraph (no checkpointer, its fastest variant here) workload "
                   "time / statechart MemoryStore's, 200 steps, median of paired rounds"}
    dur = _get(res, "durable", JUDGED_AT, "workload_ratio", "langgraph_to_statechart")
    if dur:
        out["durable_faster_than_langgraph_sqlite"] = {
            "measured": dur["median"], "target": f">= {TARGET_DURABLE}",
            "met": dur["median"] >= TARGET_DURABLE,
            "how": "LangGraph + SqliteSaver (durability='sync') workload time / statechart "
                   "SQLiteStore(durability='process')'s, 200 steps, paired rounds"}
    sizes = list(res.get("durable", {}))
    if len(sizes) >= 2:
        first, last = sizes[0], sizes[-1]
        found = {k: _get(res, "durable", s, "bytes_per_transition", "statechart",
                         "write_bytes_total", "median") for k, s in (("a", first), ("b", last))}
        if found["a"] and found["b"]:
            ratio = found["b"] / found["a"]
            out["bytes_per_transition_flat"] = {
                "measured": round(ratio, 3), "target": f"within {TARGET_FLAT:.0%} of 1",
                "met": abs(ratio - 1) <= TARGET_FLAT,
                "how": f"statechart write_bytes (run + full checkpoint + sync) per transition "
                       f"at {last} steps / at {first} steps"}
    conc = _get(res, "concurrency", "statechart_memory")
    if conc:
        out["concurrent_within_ideal"] = {
            "measured": conc["wall_to_ideal"]["median"], "target": f"<= {TARGET_IDEAL}",
            "met": conc["wall_to_ideal"]["median"] <= TARGET_IDEAL,
            "how": f"{conc['runs']:,} runs (MemoryStore) wall / max(10 x latency, "
                   "transitions x single-run µs of the same child)"}
        out["concurrent_kib_per_run"] = {
            "measured": conc["peak_kib_per_run"]["median"], "target": f"<= {TARGET_KIB_PER_RUN}",
            "met": conc["peak_kib_per_run"]["median"] <= TARGET_KIB_PER_RUN,
            "how": "(VmHWM after - VmRSS before creating the runs) / runs, fresh child"}
    return out


def _head(first: str, sizes: list[str]) -> list[str]:
    return [f"| {first} | " + " | ".join(f"{s} steps" for s in sizes) + " |",
            "|---|" + "---|" * len(sizes)]


def _memory(res: dict[str, Any]) -> list[str]:
    fig = res["memory"]
    sizes = list(fig)
    lines = ["### In memory: µs per transition", "", *_head("contender", sizes)]
    for k in MEMORY_ROWS:
        lines.append(f"| {k} | " + " | ".join(fmt(fig[s]["us_per_transition"][k])
                                              for s in sizes) + " |")
    lines += ["", "### In memory: the same workload, time relative to statechart "
              "(paired rounds; >1 is slower than statechart)", "", *_head("ratio", sizes)]
    for k in MEMORY_ROWS[1:]:
        key = f"{k}_to_statechart"
        lines.append(f"| {k} / statechart | " + " | ".join(
            fmt(fig[s]["workload_ratio"][key], 2) for s in sizes) + " |")
    return lines


def _durable(res: dict[str, Any]) -> list[str]:
    fig = res["durable"]
    sizes = list(fig)
    lines = ["### Durable: µs per transition", "", *_head("contender", sizes)]
    for k in ("statechart", "langgraph", "plain"):
        lines.append(f"| {k} | " + " | ".join(fmt(fig[s]["us_per_transition"][k])
                                              for s in sizes) + " |")
    for key in ("langgraph_to_statechart", "plain_to_statechart"):
        lines.append(f"| workload {key.replace('_to_', ' / ')} | " + " | ".join(
            fmt(fig[s]["workload_ratio"][key], 2) for s in sizes) + " |")
    repeats = ", ".join(f"{s}: {fig[s]['repeats']}" for s in sizes)
    lines += ["", f"repeats per size: {repeats}", "",
              "### Durable: bytes written per transition (fresh process per sample)", "",
              *_head("contender, measure", sizes)]
    for k in ("statechart", "langgraph", "plain"):
        for key in BYTES_KEYS:
            lines.append(f"| {k}, {key} | " + " | ".join(
                fmt(fig[s]["bytes_per_transition"][k][key], 0) for s in sizes) + " |")
    return lines


def _resume(res: dict[str, Any]) -> list[str]:
    fig = res["resume"]
    lines = [f"### Resume of a run stopped at {fig['stopped_at']:,} steps (ms)", "",
             "| contender | open | load / get_state | to first new step |", "|---|---|---|---|"]
    for k, found in fig["ms"].items():
        load = found.get("load_session_ms") or found.get("get_state_ms") or found.get("load_ms")
        lines.append(f"| {k} | {fmt(found['open_ms'], 2)} | "
                     f"{fmt(load, 2) if load else '-'} | {fmt(found['first_step_ms'], 2)} |")
    return lines


def _concurrency(res: dict[str, Any]) -> list[str]:
    lines = ["### Concurrent runs, 10 model calls each, 20 ms model latency", "",
             "| contender | runs | wall s | ideal s | wall / ideal | single-run µs/step "
             "| peak KiB per run |", "|---|---|---|---|---|---|---|"]
    for k, f in res["concurrency"].items():
        lines.append(f"| {k} | {f['runs']:,} | {fmt(f['wall_s'], 2)} | "
                     f"{fmt(f['ideal_s'], 2)} | {fmt(f['wall_to_ideal'], 2)} | "
                     f"{fmt(f['single_us_per_step'])} | {fmt(f['peak_kib_per_run'])} |")
    return lines


def _tracing(res: dict[str, Any]) -> list[str]:
    t = res["tracing"]
    return ["### Tracing (statechart, MemoryStore, benchmarks/tracing.py's workload)", "",
            "| off µs/transition | SDK + no-op exporter | on / off | added µs |",
            "|---|---|---|---|",
            f"| {fmt(t['us_per_transition']['off'])} | "
            f"{fmt(t['us_per_transition']['sdk_batch_noop'])} | {fmt(t['on_to_off'], 2)} | "
            f"{fmt(t['added_us'])} |"]


def markdown(res: dict[str, Any]) -> str:
    """The tables of docs/performance.md: median (min to max) over the repeats."""
    v, m = res["versions"], res["machine_before"]
    lines = [f"`{res['command']}`, {res['wall_s']} s; nproc {m['nproc']}, {m['cpu']}, "
             f"loadavg {m['loadavg']} before, {res['machine_after']['loadavg']} after; "
             f"Python {v['python']}, statechart {v['statechart_git']}, transitions "
             f"{v['transitions']}, pydantic {v['pydantic']}, langgraph {v['langgraph']}, "
             f"langgraph-checkpoint-sqlite {v['langgraph-checkpoint-sqlite']}, langchain-core "
             f"{v['langchain-core']}, SQLite {v['sqlite3_lib']}", ""]
    for key, part in (("memory", _memory), ("durable", _durable), ("resume", _resume),
                      ("concurrency", _concurrency), ("tracing", _tracing)):
        if key in res:
            lines += [*part(res), ""]
    lines += ["### Targets", "", "| target | measured | wanted | met |", "|---|---|---|---|"]
    for name, t in res["targets"].items():
        lines.append(f"| {name} | {t['measured']} | {t['target']} | "
                     f"{'**met**' if t['met'] else '**missed**'} |")
    return "\n".join(lines)
