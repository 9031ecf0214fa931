"""Parallel states: each region's thread of control inside the one run, and the join.

While a run is in a parallel state `P`, `Run.state` is `P` and `Run.regions` holds where
each region is. A region's step is made by the unchanged engine on the run *seen from
the region* (`project`: the region's leaf, visit, queue, timers in the run's place) and
folded back (`merged`); so every rule (caps, guards, intents, keys, transcripts) holds
per region, and the shared fields (seq, ledger, context, visits) stay one. Only steps
of the run at `P` itself leave it: the join, a failed region's route, an outer budget's
route, a cancel; `widened` makes such a move exit every region first.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace
from typing import Any

from msgspec import structs

from statechart.engine.calls import open_call
from statechart.engine.parts import JOIN, REGION_FAILED, Move
from statechart.engine.tables import CompiledChart, status_of
from statechart.records.run import Region, Run, Status, Visit

_PER_REGION = (
    "state",
    "status",
    "visit",
    "pending",
    "reason",
    "routed",
    "doubt",
    "wake",
    "timers",
    "attempt",
)


def project(run: Run, path: str, ledger: dict[str, Any] | None = None) -> Run:
    """The run as region `path` sees it: its leaf, visit, queue and timers in the run's
    place, no regions (`ledger`: the ledger to plan with, e.g. with calls in flight
    reserved)."""
    r = run.regions[path]
    fields: dict[str, Any] = {name: getattr(r, name) for name in _PER_REGION}
    fields["regions"] = {}
    if ledger is not None:
        fields["ledger"] = ledger
    return structs.replace(run, **fields)


def region_of(run: Run, leaf: str) -> str | None:
    """The region of `run` that `leaf` is in, if any."""
    for path in run.regions:
        if leaf.startswith(path + "."):
            return path
    return None


def merged(compiled_chart: CompiledChart, run: Run, path: str, after: Run) -> Run:
    """The whole run once region `path` is where `after` (the run seen from it, a step
    later) says: the region's fields from `after`, the shared ones too."""
    region = Region(**{name: getattr(after, name) for name in _PER_REGION})
    regions = {**run.regions, path: region}
    return structs.replace(
        after,
        state=run.state,
        visit=None,
        pending=(),
        routed=run.routed,
        doubt=None,
        attempt=0,
        timers=run.timers,
        regions=regions,
        **overall(compiled_chart, run.state, run.timers, regions),
    )


def overall(
    compiled_chart: CompiledChart,
    parallel: str,
    timers: dict[str, float],
    regions: dict[str, Region],
) -> dict[str, Any]:
    """The run's status, wake and reason from its regions': running while one runs (or
    the regions can join), else sleeping until the first one wakes, else waiting."""
    status: Status = "running"
    reason = ""
    live = [r for r in regions.values() if r.status != "ended"]
    idle = live and not any(r.status == "running" for r in live)
    if idle and joined(compiled_chart, parallel, regions) is None:
        sleeping = [r for r in live if r.status == "sleeping"]
        status = "sleeping" if sleeping else "waiting"
        reason = (sleeping or live)[0].reason
    wakes = [*timers.values(), *(r.wake for r in regions.values() if r.wake is not None)]
    return {"status": status, "wake": min(wakes, default=None), "reason": reason}


def joined(
    compiled_chart: CompiledChart, parallel: str, regions: dict[str, Region]
) -> tuple[str, str] | None:
    """The trigger that leaves parallel state `parallel` now and why (a region failed:
    `region_failed`; the regions joined: `join`), or None while they run on."""
    state = compiled_chart.nodes[parallel].state
    assert state is not None and state.kind in ("parallel", "map"), parallel
    if not regions:  # a map over an empty list
        return JOIN, "no items to map over"
    ended = [(p, r.state) for p, r in regions.items() if r.status == "ended"]
    live = [f"'{p}' at '{r.state}'" for p, r in regions.items() if r.status != "ended"]
    cancelled = f"; cancelled: {', '.join(live)}" if live else ""
    for path, leaf in ended:
        if failed(compiled_chart, leaf):
            return REGION_FAILED, f"region '{path}' ended in '{leaf}', a failure{cancelled}"
    if ended and (state.join == "first" or len(ended) == len(regions)):
        if state.join == "first":
            return JOIN, f"region '{ended[0][0]}' ended first, in '{ended[0][1]}'{cancelled}"
        return JOIN, f"all {len(regions)} regions ended"
    return None


def failed(compiled_chart: CompiledChart, leaf: str) -> bool:
    """A region that ended at `leaf` ended in a failure terminal."""
    state = compiled_chart.nodes[leaf].state
    return state is not None and state.outcome == "failure"


def entered(
    compiled_chart: CompiledChart, starts: tuple[tuple[str, str], ...], seq: int
) -> dict[str, Region]:
    """The regions a move into a parallel state starts, each at its initial leaf."""
    out: dict[str, Region] = {}
    for path, leaf in starts:
        owner, state = compiled_chart.owner_state(leaf)
        status = status_of(compiled_chart, leaf)
        out[path] = Region(
            state=leaf,
            status=status,
            visit=Visit(state=owner, seq=seq) if state.kind == "model" else None,
            reason=f"ended in '{leaf}'" if status == "ended" else "",
        )
    return out


def starts_of(
    compiled_chart: CompiledChart, leaf: str, entered_paths: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    """Each region a move into parallel state `leaf` started and its leaf, read off the
    move's `entered` (replay)."""
    out = []
    for path in compiled_chart.parallels.get(leaf, ()):
        if path not in entered_paths:
            continue  # a map's instance with no item
        inside = [p for p in entered_paths if p.startswith(path + ".")]
        out.append((path, inside[-1] if inside else path))
    return tuple(out)


def moved(
    compiled_chart: CompiledChart,
    run: Run,
    leaf: str,
    starts: tuple[tuple[str, str], ...],
    seq: int,
    out: dict[str, Any],
) -> None:
    """What a move of the run itself (not of a region) to `leaf` changes in its regions,
    into `out` (the run's changes so far: state, status, timers): the regions it leaves
    are dropped; those it `starts` are set, their timers split off the run's."""
    if starts:
        regions = entered(compiled_chart, starts, seq)
        timers = out.get("timers", run.timers)
        mine = {k: v for k, v in timers.items() if not k.startswith(leaf + ".")}
        for path in regions:
            own = {k: v for k, v in timers.items() if k.startswith(path + ".")}
            if own:
                regions[path] = structs.replace(regions[path], timers=own, wake=min(own.values()))
        out["regions"] = regions
        if mine != timers:
            out["timers"] = mine
        out.update(overall(compiled_chart, leaf, mine, regions))
    elif run.regions:
        out["regions"] = {}


def widened(compiled_chart: CompiledChart, run: Run, move: Move) -> Move:
    """`move` made by the run at a parallel state, exiting every region first when it
    leaves the state (deepest level first, the regions in order on each, as `transitions`
    exits a parallel state);
    a region that ended in a terminal counts as left through it (its output then is
    that of a success)."""
    if not run.regions or run.state not in move.exited or move.exited[:1] != (run.state,):
        return move
    chains = [
        (path, *(p for p in compiled_chart.ancestors(r.state)[::-1] if p.startswith(path + ".")))
        for path, r in run.regions.items()
    ]
    depth = max(map(len, chains), default=0)
    order = tuple(c[i] for i in reversed(range(depth)) for c in chains if i < len(c))
    through = tuple(
        r.state
        for r in run.regions.values()
        if r.status == "ended" and not failed(compiled_chart, r.state)
    )
    crosses = move.crosses or any(p in compiled_chart.scopes for p in run.regions)
    return dc_replace(
        move,
        exited=(*order, *move.exited),
        through=(*through, *move.through),
        crosses=crosses,
    )


def fanned(compiled_chart: CompiledChart, move: Move, inputs: dict[str, Any]) -> Move:
    """`move` into a map state, starting only the instances that have an item (those
    `inputs` fills): the others are neither entered nor started."""
    dropped = [
        path
        for path, _ in move.regions
        if path.rsplit(".", 1)[0] in compiled_chart.maps and path not in inputs
    ]
    if not dropped:
        return move

    def kept(p: str) -> bool:
        return not any(p == d or p.startswith(d + ".") for d in dropped)

    return dc_replace(
        move,
        entered=tuple(p for p in move.entered if kept(p)),
        counted=tuple(p for p in move.counted if kept(p)),
        regions=tuple(r for r in move.regions if kept(r[0])),
    )


def closing(run: Run) -> tuple[str, ...]:
    """Ids of the calls whose intents are open in the regions a move leaves."""
    out = []
    for path in run.regions:
        head = open_call(project(run, path))
        if head is not None:
            out.append(head.call.id)
    return tuple(out)
