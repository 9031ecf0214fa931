"""Recorded loop traces: one run as a sequence of `tool:outcome` calls.

Traces come from a JSONL file (one run per line, the labelling of seed 003)
or from a store's event log, and every miner reads this one shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statechart.errors import TraceFormatError
from statechart.records.run import Event, Run
from statechart.store.base import Store

START = "START"
END = "END"
OK = "ok"
ERROR = "error"


@dataclass(frozen=True)
class Call:
    """One step of a loop: the tool it ran and the class of its outcome."""

    tool: str
    outcome: str = OK
    state: str | None = None
    """The chart state the call ran in, when the trace came from a chart's run."""

    @property
    def label(self) -> str:
        """`tool:outcome`, the unit the miner counts."""
        return f"{self.tool}:{self.outcome}"


@dataclass(frozen=True)
class Trace:
    """One recorded run."""

    run_id: str
    calls: tuple[Call, ...]
    visits: tuple[tuple[str, int], ...] = ()
    """Entries per chart state, for a run read from a store."""

    def labels(self, by: str = "label") -> list[str]:
        """The run's steps as `tool:outcome` labels (or bare tool names with `by="tool"`)."""
        if by == "tool":
            return [c.tool for c in self.calls]
        return [c.label for c in self.calls]


def parse_line(line: str, where: str, default_id: str) -> Trace:
    """One JSONL line: a list of steps (the run is named `default_id`), or an object
    `{"run_id": ..., "steps": [...]}` (`"id"` is read when there is no `"run_id"`; with
    neither, the run is named `default_id` too)."""
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{where}: not JSON ({exc.msg}); each line must be one run, "
            'e.g. [{"tool": "search_kb", "outcome": "hit"}]'
        ) from None
    run_id = default_id
    if isinstance(value, dict):
        key = "run_id" if "run_id" in value else "id"
        if key in value:
            run_id = _run_id(value[key], where, key)
        if "steps" not in value:
            raise TraceFormatError(
                f"{where}: a run written as an object needs 'steps' (a list of "
                f'{{"tool", "outcome"}}), found keys {sorted(value)}'
            )
        value = value["steps"]
    if not isinstance(value, list):
        raise TraceFormatError(
            f"{where}: a run must be a JSON list of steps (or an object with "
            f"'steps'), not {type(value).__name__}"
        )
    calls = []
    for i, step in enumerate(value):
        if not isinstance(step, dict) or not isinstance(step.get("tool"), str) or not step["tool"]:
            raise TraceFormatError(
                f"{where}: step {i} needs a non-empty string 'tool', got {json.dumps(step)[:80]}"
            )
        outcome = step.get("outcome", OK)
        if not isinstance(outcome, str) or not outcome:
            raise TraceFormatError(
                f"{where}: step {i} ({step['tool']}) has outcome "
                f"{outcome!r}; use a short class name such as 'hit' or 'empty'"
            )
        state = step.get("state")
        calls.append(Call(step["tool"], outcome, state if isinstance(state, str) else None))
    return Trace(run_id, tuple(calls))


def _run_id(value: Any, where: str, key: str) -> str:
    """A run id given in a trace line: a non-empty string, or an integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value:
        return value
    raise TraceFormatError(
        f"{where}: {key} must be a non-empty string (or an integer), got {json.dumps(value)}"
    )


def read_jsonl(path: str | Path) -> list[Trace]:
    """Every run of a JSONL trace file; blank lines are skipped. A run without an id (a
    bare list of steps) is named `line-N`, N its line number in the file, from 1."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise TraceFormatError(f"cannot read trace file {p}: {exc.strerror}") from None
    return [
        parse_line(line, f"{p}:{n}", f"line-{n}")
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip()
    ]


def write_jsonl(traces: Iterable[Trace], path: str | Path) -> None:
    """Write runs as JSONL, one `{"run_id", "steps"}` object per line."""
    with Path(path).open("w", encoding="utf-8") as f:
        for t in traces:
            steps = [
                {"tool": c.tool, "outcome": c.outcome, **({"state": c.state} if c.state else {})}
                for c in t.calls
            ]
            f.write(json.dumps({"run_id": t.run_id, "steps": steps}) + "\n")


def outcome_of(event: Event) -> str:
    """The outcome class of an executed call: `error`, the class the driver recorded, or,
    for events stored before it recorded one, the result text's own `outcome`, or `ok`."""
    if event.error is not None:
        return ERROR
    if event.outcome is not None:
        return event.outcome
    if event.result and event.result.startswith("{"):
        try:
            value = json.loads(event.result)
        except json.JSONDecodeError:
            return OK
        if isinstance(value, dict) and isinstance(value.get("outcome"), str):
            return str(value["outcome"])
    return OK


def calls_of(events: Sequence[Event]) -> Iterator[Call]:
    """The tool calls a stored run executed (or a shadow run observed), in order."""
    for e in events:
        if (
            e.call is None
            or e.actor != "code"
            or e.trigger not in ("next_call", "results", "shadow")
        ):
            continue
        if e.trigger == "shadow":
            yield Call(e.call.name, e.outcome or e.result or OK, e.source.rsplit(".", 1)[0])
            continue
        state = e.source.rsplit(".", 1)[0]
        yield Call(e.call.name, outcome_of(e), state)


async def lineage_events(store: Store, run: Run) -> list[Event]:
    """A run's events with those it inherited: a fork starts with its parent's, up to the
    fork point."""
    own = await store.events(run.run_id)
    if run.parent_run is None or run.parent_seq is None:
        return own
    parent = (await store.load(run.parent_run)).snapshot
    inherited = [e for e in await lineage_events(store, parent) if e.seq <= run.parent_seq]
    return inherited + own


async def read_store(store: Store, *, chart: str | None = None) -> list[Trace]:
    """The tool calls of every run in a store (of one chart, if named), oldest first; a fork
    includes the calls it inherited. The regions of a parallel or map state are traces of
    their own, named `RUN_ID:REGION` after their run's (their calls interleave by how the
    driver scheduled them, which says nothing of the agent's behaviour)."""
    runs = sorted(await store.runs(chart=chart), key=lambda r: (r.created_at, r.run_id))
    out: list[Trace] = []
    for r in runs:
        events = await lineage_events(store, r)
        out += split_regions(
            r.run_id,
            tuple(calls_of(events)),
            tuple(sorted(r.visits.items())),
            regions_of(r, events),
        )
    return out


def regions_of(run: Run, events: Sequence[Event]) -> list[str]:
    """The region paths a run went through: a move made by a parallel state itself (its
    join, a failed region, a route) exits the state's regions, which lie below its source;
    a move from a leaf never exits anything below it."""
    found = dict.fromkeys(run.regions)
    for e in events:
        below = e.source + "."
        for p in e.exited:
            if p.startswith(below) and "." not in p[len(below) :]:
                found[p] = None
    return list(found)


def split_regions(
    run_id: str,
    calls: tuple[Call, ...],
    visits: tuple[tuple[str, int], ...],
    regions: Sequence[str],
) -> list[Trace]:
    """The run's trace without its regions' calls, then one trace per region."""

    def inside(path: str | None, region: str) -> bool:
        return path is not None and (path == region or path.startswith(region + "."))

    def own(path: str | None) -> bool:
        return not any(inside(path, r) for r in regions)

    out = [
        Trace(
            run_id,
            tuple(c for c in calls if own(c.state)),
            tuple(v for v in visits if own(v[0])),
        )
    ]
    for region in regions:
        out.append(
            Trace(
                f"{run_id}:{region}",
                tuple(c for c in calls if inside(c.state, region)),
                tuple(v for v in visits if inside(v[0], region)),
            )
        )
    return out
