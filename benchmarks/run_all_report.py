"""The targets of issues #6, #16 and #27, and the markdown tables of run_all.py."""

from __future__ import annotations

from typing import Any

from side_common import fmt, fmt_ratio, sig

TARGET_MEMORY = 30.0
"""LangGraph's time for the same workload over statechart's, in memory (at 200 steps)."""
TARGET_DURABLE = 30.0
"""LangGraph + SqliteSaver's over statechart SQLiteStore(process)'s, at 200 steps."""
TARGET_PLAIN_DURABLE = 1.5
"""Statechart's durable workload time over the plain durable loop's, at 200 steps."""
TARGET_BYTES_TO_PLAIN = 1.5
"""Statechart's write_bytes per transition over the plain loop's, at 200 steps."""
TARGET_OVERHEAD = 1.2
"""(statechart's wall - the plain loop's, many runs at once) / (its transitions x its
single-run µs per transition)."""
TARGET_FLAT = 0.20
"""Bytes per transition at the longest run within this fraction of the shortest."""
TARGET_IDEAL = 1.5
TARGET_KIB_PER_RUN = 40.0
TARGET_RESUME = 1.2
"""Statechart's time from nothing to the first new step of a 2,000-step run over the plain
loop's (issue #27)."""
JUDGED_AT = "200"
MEMORY_ROWS = (
    "statechart",
    "plain",
    "langgraph_graph",
    "langgraph_graph_inmemory",
    "langgraph_react",
)
BYTES_KEYS = ("write_bytes_total", "wchar_total", "main_after_checkpoint", "files_growth")
BYTES_LABELS = {"files_growth": "files_growth (main + WAL; own WAL policy, not comparable)"}


def _get(res: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(res, dict) or key not in res:
            return None
        res = res[key]
    return res


def _m(x: Any) -> float:
    """A figure's median when it was repeated (a spread), else the figure."""
    return float(x["median"]) if isinstance(x, dict) else float(x)


def _flat(res: dict[str, Any]) -> dict[str, Any] | None:
    """Statechart write_bytes per transition, longest run over shortest (and 200 -> longest)."""
    fig = res.get("durable", {})
    sizes = list(fig.get("sizes", {}))
    if len(sizes) < 2:
        return None
    first, last = sizes[0], sizes[-1]

    def per(size: str, key: str = "write_bytes_total") -> float | None:
        found: float | None = _get(
            fig, "sizes", size, "bytes_per_transition", "statechart", key, "median"
        )
        return found

    how = (
        f"statechart write_bytes (run + full checkpoint + sync) per transition at {last} "
        f"steps / at {first} steps, two-sided"
    )
    target = f"within {TARGET_FLAT:.0%} of 1"
    a, b = per(first), per(last)
    if not a or not b:
        wa, wb = per(first, "wchar_total"), per(last, "wchar_total")
        wchar = f"; wchar ratio {wb / wa:.3f}" if wa and wb else ""
        return {
            "measured": None,
            "target": target,
            "met": None,
            "how": how,
            "note": f"not judged: write_bytes missing or 0 on {fig.get('filesystem')} "
            f"({fig.get('io_note') or 'no device writes counted'}){wchar}",
        }
    note = (
        "below 1 because the bytes a run pays once, whatever its length (creating it; "
        f"the closing checkpoint and sync), are spread over only {first} transitions"
    )
    mid = per("200") if "200" in sizes and last != "200" else None
    if mid:
        note += f"; 200 -> {last} steps: {b / mid:.3f}"
    return {
        "measured": round(b / a, 3),
        "target": target,
        "met": abs(b / a - 1) <= TARGET_FLAT,
        "how": how,
        "note": note,
    }


def targets(res: dict[str, Any]) -> dict[str, Any]:
    """Per target: measured, target, met (None when not judged: --quick, or no counters)."""
    out: dict[str, Any] = {}
    mem = _get(res, "memory", JUDGED_AT, "workload_ratio", "langgraph_graph_to_statechart")
    if mem:
        out["memory_faster_than_langgraph"] = {
            "measured": mem["median"],
            "target": f">= {TARGET_MEMORY}",
            "met": mem["median"] >= TARGET_MEMORY,
            "how": "LangGraph StateGraph (no checkpointer, its fastest variant here) workload "
            "time / statechart MemoryStore's, 200 steps, median of paired rounds",
        }
    dur = _get(res, "durable", "sizes", JUDGED_AT, "workload_ratio", "langgraph_to_statechart")
    ceil = _get(res, "durable", "sizes", JUDGED_AT, "ceiling")
    if dur:
        out["durable_faster_than_langgraph_sqlite"] = {
            "measured": dur["median"],
            "target": f">= {TARGET_DURABLE}",
            "met": dur["median"] >= TARGET_DURABLE,
            "how": "LangGraph + SqliteSaver (durability='sync') workload time / statechart "
            "SQLiteStore(durability='process')'s, 200 steps, paired rounds",
            "note": f"{_get(res, 'machine_before', 'usable_cpus')} usable CPUs: statechart's "
            "WAL checkpointer thread runs on a second core when there is one"
            + (
                f"; ceiling {ceil['median']:.1f} (statechart in memory + the plain "
                "loop's one-row transaction per step)"
                if ceil
                else ""
            ),
        }
    plain = _get(res, "durable", "sizes", JUDGED_AT, "workload_ratio", "plain_to_statechart")
    if plain:
        out["durable_within_plain_loop"] = {
            "measured": round(1 / plain["median"], 2),
            "target": f"<= {TARGET_PLAIN_DURABLE}",
            "met": 1 / plain["median"] <= TARGET_PLAIN_DURABLE,
            "how": "statechart SQLiteStore(process) workload time / the plain loop's (one "
            "JSON row per step in its own transaction), 200 steps, paired rounds",
        }
    per = _get(res, "durable", "sizes", JUDGED_AT, "bytes_per_transition")
    if per and _get(per, "plain", "write_bytes_total", "median"):
        ratio = (
            per["statechart"]["write_bytes_total"]["median"]
            / per["plain"]["write_bytes_total"]["median"]
        )
        out["bytes_within_plain_loop"] = {
            "measured": round(ratio, 3),
            "target": f"<= {TARGET_BYTES_TO_PLAIN}",
            "met": ratio <= TARGET_BYTES_TO_PLAIN,
            "how": "statechart write_bytes (run + checkpoint + sync) per transition / the "
            "plain loop's, 200 steps",
        }
    resumed = _get(res, "resume", "first_step_ratio", "plain_to_statechart")
    if resumed:
        out["resume_within_plain_loop"] = {
            "measured": round(1 / resumed["median"], 2),
            "target": f"<= {TARGET_RESUME}",
            "met": 1 / resumed["median"] <= TARGET_RESUME,
            "how": "statechart's open + build + resume to the first new step of a run stopped "
            "at 2,000 steps / the plain loop's open + read + first step, paired rounds",
        }
    flat = _flat(res)
    if flat:
        out["bytes_per_transition_flat"] = flat
    conc = _get(res, "concurrency", "statechart_memory")
    if conc:
        proc = _get(res, "concurrency", "statechart_process")
        on_sqlite = (
            (
                f"SQLiteStore: {proc['wall_to_ideal']['median']:.2f}x ideal, "
                f"{proc['peak_kib_per_run']['median']:.1f} KiB/run"
            )
            if proc
            else ""
        )
        out["concurrent_within_ideal"] = {
            "measured": conc["wall_to_ideal"]["median"],
            "target": f"<= {TARGET_IDEAL}",
            "met": conc["wall_to_ideal"]["median"] <= TARGET_IDEAL,
            "how": f"{conc['runs']:,} runs (MemoryStore) wall / max(10 x latency, "
            "transitions x single-run µs of the same child); not a strict lower bound",
            "note": on_sqlite,
        }
        base = _get(res, "concurrency", "plain")
        for kind, fig in (("memory", conc), ("sqlite", proc)):
            if fig and base:
                work = _m(fig["steps_per_run"]) * _m(fig["runs"]) * _m(fig["single_us_per_step"])
                ratio = (_m(fig["wall_s"]) - _m(base["wall_s"])) / (work / 1e6)
                out[f"concurrent_overhead_{kind}"] = {
                    "measured": round(ratio, 2),
                    "target": f"<= {TARGET_OVERHEAD}",
                    "met": ratio <= TARGET_OVERHEAD,
                    "how": f"{fig['runs']:,} runs at once: (wall - the plain loop's wall) / "
                    "(transitions x single-run µs per transition), same latency",
                }
        out["concurrent_kib_per_run"] = {
            "measured": conc["peak_kib_per_run"]["median"],
            "target": f"<= {TARGET_KIB_PER_RUN}",
            "met": conc["peak_kib_per_run"]["median"] <= TARGET_KIB_PER_RUN,
            "how": "(VmHWM after - VmRSS before creating the runs) / runs, fresh child, "
            "MemoryStore()",
            "note": on_sqlite,
        }
        if proc:
            out["concurrent_kib_per_run_sqlite"] = {
                "measured": proc["peak_kib_per_run"]["median"],
                "target": f"<= {TARGET_KIB_PER_RUN}",
                "met": proc["peak_kib_per_run"]["median"] <= TARGET_KIB_PER_RUN,
                "how": "the same, SQLiteStore(durability='process')",
            }
    if res.get("quick"):
        for found in out.values():
            found["met"] = None
            found["note"] = "not judged (quick: smaller sizes and run counts)"
    return out


def _head(first: str, sizes: list[str]) -> list[str]:
    return [
        f"| {first} | " + " | ".join(f"{s} steps" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]


def _memory(res: dict[str, Any]) -> list[str]:
    fig = res["memory"]
    sizes = list(fig)
    lines = ["### In memory: µs per transition", "", *_head("contender", sizes)]
    for k in MEMORY_ROWS:
        lines.append(
            f"| {k} | " + " | ".join(fmt(fig[s]["us_per_transition"][k]) for s in sizes) + " |"
        )
    lines += [
        "",
        "### In memory: the same workload, time relative to statechart "
        "(paired rounds; >1 is slower than statechart)",
        "",
        *_head("ratio", sizes),
    ]
    for k in MEMORY_ROWS[1:]:
        key = f"{k}_to_statechart"
        lines.append(
            f"| {k} / statechart | "
            + " | ".join(fmt_ratio(fig[s]["workload_ratio"][key]) for s in sizes)
            + " |"
        )
    return lines


def _durable(res: dict[str, Any]) -> list[str]:
    fig = res["durable"]["sizes"]
    sizes = list(fig)
    lines = ["### Durable: µs per transition", "", *_head("contender", sizes)]
    for k in ("statechart", "langgraph", "plain"):
        lines.append(
            f"| {k} | " + " | ".join(fmt(fig[s]["us_per_transition"][k]) for s in sizes) + " |"
        )
    if all("statechart_memory" in fig[s]["us_per_transition"] for s in sizes):
        lines.append(
            "| statechart, no persistence (same rounds) | "
            + " | ".join(fmt(fig[s]["us_per_transition"]["statechart_memory"]) for s in sizes)
            + " |"
        )
    for key in ("langgraph_to_statechart", "plain_to_statechart"):
        lines.append(
            f"| workload {key.replace('_to_', ' / ')} | "
            + " | ".join(fmt_ratio(fig[s]["workload_ratio"][key]) for s in sizes)
            + " |"
        )
    if all("ceiling" in fig[s] for s in sizes):
        lines.append(
            "| ceiling: langgraph / (statechart no persistence + plain durable) | "
            + " | ".join(fmt_ratio(fig[s]["ceiling"]) for s in sizes)
            + " |"
        )
    repeats = ", ".join(f"{s}: {fig[s]['repeats']}" for s in sizes)
    note = res["durable"].get("io_note")
    lines += [
        "",
        f"repeats per size: {repeats}; databases on "
        f"{res['durable'].get('filesystem')}" + (f"; **warning: {note}**" if note else ""),
        "",
        "### Durable: bytes written per transition (fresh process per sample)",
        "",
        *_head("contender, measure", sizes),
    ]
    for k in ("statechart", "langgraph", "plain"):
        for key in BYTES_KEYS:
            cells = [fig[s]["bytes_per_transition"][k].get(key) for s in sizes]
            lines.append(
                f"| {k}, {BYTES_LABELS.get(key, key)} | "
                + " | ".join(fmt(c, 0) if c else "-" for c in cells)
                + " |"
            )
    return lines


def _resume(res: dict[str, Any]) -> list[str]:
    fig = res["resume"]
    lines = [
        f"### Resume of a run stopped at {fig['stopped_at']:,} steps (ms)",
        "",
        "| contender | open | build + compile | read state | open to first new step "
        "(separate pass) |",
        "|---|---|---|---|---|",
    ]
    for k, found in fig["ms"].items():
        build = found.get("build_ms")
        lines.append(
            f"| {k} | {fmt(found['open_ms'], 2)} | "
            f"{fmt(build, 2) if build else '- (none)'} | {fmt(found['state_ms'], 2)} "
            f"| {fmt(found['first_step_ms'], 2)} |"
        )
    sc_ms = fig["ms"].get("statechart", {})
    if "load_ms" in sc_ms:
        lines += [
            "",
            f"read state: statechart `load` {fmt(sc_ms['load_ms'], 2)} + "
            f"`load_session` {fmt(sc_ms['load_session_ms'], 2)}; LangGraph `get_state`; "
            "plain: read the rows back. To first new step, langgraph / statechart: "
            f"{fmt_ratio(fig['first_step_ratio']['langgraph_to_statechart'])}",
        ]
    return lines


def _concurrency(res: dict[str, Any]) -> list[str]:
    lines = [
        "### Concurrent runs, 10 model calls each, 20 ms model latency",
        "",
        "| contender | runs | repeats | wall s | ideal s | wall / ideal | single-run "
        "µs/step | peak KiB per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, f in res["concurrency"].items():
        lines.append(
            f"| {k} | {f['runs']:,} | {f['repeats']} | {fmt(f['wall_s'], 2)} | "
            f"{fmt(f['ideal_s'], 2)} | {fmt(f['wall_to_ideal'], 2)} | "
            f"{fmt(f['single_us_per_step'])} | {fmt(f['peak_kib_per_run'])} |"
        )
    lines += [
        "",
        "ideal = max(10 x latency, steps x single-run µs/step): not a strict lower "
        "bound (single runs one after another do not pay the event loop's timer "
        "scheduling of many sleeping tasks)",
    ]
    return lines


def _tracing(res: dict[str, Any]) -> list[str]:
    t = res["tracing"]
    return [
        "### Tracing (statechart, MemoryStore, benchmarks/tracing.py's workload)",
        "",
        "| off µs/transition | SDK + no-op exporter | on / off | added µs |",
        "|---|---|---|---|",
        f"| {fmt(t['us_per_transition']['off'])} | "
        f"{fmt(t['us_per_transition']['sdk_batch_noop'])} | {fmt(t['on_to_off'], 2)} | "
        f"{fmt(t['added_us'])} |",
    ]


def markdown(res: dict[str, Any]) -> str:
    """The tables of docs/performance.md: median (min to max) over the repeats."""
    v, m = res["versions"], res["machine_before"]
    dirty = v.get("git_dirty_paths")
    lines = [
        f"`{res['command']}`, {res['wall_s']} s; nproc {m['nproc']} (usable "
        f"{m.get('usable_cpus')}), {m['cpu']}, "
        f"loadavg {m['loadavg']} before, {res['machine_after']['loadavg']} after; "
        f"Python {v['python']}, statechart {v['statechart_git']}, transitions "
        f"{v['transitions']}, pydantic {v['pydantic']}, langgraph {v['langgraph']}, "
        f"langgraph-checkpoint-sqlite {v['langgraph-checkpoint-sqlite']}, langchain-core "
        f"{v['langchain-core']}, SQLite {v['sqlite3_lib']}; databases on "
        f"{res.get('workdir_filesystem')}" + (f"; dirty: {', '.join(dirty)}" if dirty else ""),
        "",
    ]
    for key, part in (
        ("memory", _memory),
        ("durable", _durable),
        ("resume", _resume),
        ("concurrency", _concurrency),
        ("tracing", _tracing),
    ):
        if key in res:
            lines += [*part(res), ""]
    lines += [
        "### Targets",
        "",
        "| target | measured | wanted | met | note |",
        "|---|---|---|---|---|",
    ]
    for name, t in res["targets"].items():
        met = {True: "**met**", False: "**missed**", None: "not judged"}[t["met"]]
        measured = "-" if t["measured"] is None else sig(t["measured"])
        lines.append(f"| {name} | {measured} | {t['target']} | {met} | {t.get('note', '')} |")
    return "\n".join(lines)
