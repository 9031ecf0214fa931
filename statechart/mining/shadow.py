"""Shadow mode: a plain loop keeps running while a chart judges every call it makes.

A `ShadowRun` follows the loop: each call is labelled `tool:outcome`, moved to
the chart state that hosts the tool through `try_move()` (the legality, guard
and cap check the driver uses) and checked against the caps the driver's planner
applies. Whatever the chart would have refused is recorded as an event with a
`shadow:<kind>` reason; the shadow then follows the loop anyway. The loop's
own results are returned untouched.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..budget import Spent
from ..chart import CANCELLED, ESCALATED, EXHAUSTED, Chart
from ..effects import first_exhausted
from ..machine import CompiledChart, Move, Transition, go
from ..models.base import ToolCall
from ..moves import commit, try_move
from ..run import Event, Run, Step, Visit, evolve
from ..store.base import Store
from ..tools import fingerprint
from .traces import ERROR, OK, Trace

SHADOW_MODEL = "shadow"
"""The model spec of a shadow run: the loop, not a model, chose its moves."""
CALL_COST = Spent(steps=2, model_calls=1, tool_calls=1)
"""A loop call stands for a model step that picks the tool and a tool step that runs it."""
MOVE_COST = Spent(steps=1, model_calls=1)
"""A change of state stands for the model step that called `next_state`."""
KINDS = ("illegal", "guard", "budget", "tool", "repeat")
"""What a refusal was: no such edge, a guard said no, a cap or budget ran out, no state
hosts the tool, or the same call ran before."""

Outcome = Callable[[str, Any], str]
Observe = Callable[[str, Mapping[str, Any], Any], Mapping[str, Any]]


def default_outcome(tool: str, result: Any) -> str:
    """A result's own `outcome` field when it is a mapping that has one, else `ok`."""
    if isinstance(result, Mapping) and isinstance(result.get("outcome"), str):
        return str(result["outcome"])
    return OK


@dataclass(frozen=True)
class Refusal:
    """A move or call the chart would have refused."""

    seq: int
    kind: str
    source: str
    target: str
    tool: str
    reason: str


@dataclass
class ShadowRun:
    """One loop run observed against a chart; pure until `save`."""

    chart: Chart
    run: Run
    outcome: Outcome = default_outcome
    observe: Observe | None = None
    """Maps a call and its result to context writes, so guards see what the loop learned."""
    clock: Callable[[], float] = time.time
    steps: list[Step] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    fingerprints: set[str] = field(default_factory=set)
    saved: int = 0
    initial: Run | None = None
    """The run as it started (what `save` creates); the first `run` by default."""

    def __post_init__(self) -> None:
        if self.initial is None:
            self.initial = self.run

    @property
    def cc(self) -> CompiledChart:
        return self.chart.compiled

    def wrap(self, dispatch: Callable[..., Any]) -> Callable[..., Any]:
        """The dispatcher `dispatch(tool, arguments)`, observed; sync or async like the original."""
        if inspect.iscoroutinefunction(dispatch):
            async def awrapped(tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
                try:
                    result = await dispatch(tool, arguments)
                except Exception:
                    self.record(tool, arguments, ERROR)
                    raise
                self.record(tool, arguments, self.outcome(tool, result), result)
                return result
            return awrapped

        def wrapped(tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
            try:
                result = dispatch(tool, arguments)
            except Exception:
                self.record(tool, arguments, ERROR)
                raise
            self.record(tool, arguments, self.outcome(tool, result), result)
            return result
        return wrapped

    # -- judging ------------------------------------------------------------------------

    def record(self, tool: str, arguments: Mapping[str, Any] | None, outcome: str,
               result: Any = None) -> None:
        """Judge one call the loop made (`arguments=None`: unknown, no repeat check)."""
        if self.run.status == "ended":
            self._refuse(f"the loop called '{tool}' after the chart ended in "
                         f"'{self.run.state}'", "illegal", tool, None)
            return
        here = self.cc.owner_state(self.run.state)[0]
        if tool not in self.cc.owner_state(self.run.state)[1].tool_map:
            target = self._host(tool)
            if target is None:
                self._refuse(f"no state of chart '{self.chart.name}' offers tool '{tool}'",
                             "tool", tool, None)
                return
            self._move(self._way(target) or target, tool)
            here = self.cc.owner_state(self.run.state)[0]
        patch = dict(self.observe(tool, arguments or {}, result)) if self.observe else {}
        why, kind, spent = self._check_call(here, tool, arguments)
        call = ToolCall(id=f"s{self.run.seq + 1}", name=tool, arguments=dict(arguments or {}))
        visit = self.run.visit
        update: dict[str, Any] = {}
        if visit is not None:
            update["visit"] = evolve(visit, {
                "iterations": visit.iterations + 1,
                "calls": {**visit.calls, tool: visit.calls.get(tool, 0) + 1},
                "succeeded": {**visit.succeeded, tool: visit.succeeded.get(tool, 0) + 1}})
        self._add(commit(self.cc, self.run, None, self.clock(), CALL_COST, trigger="shadow",
                         actor="code", update=update, call=call, result=outcome,
                         refused=why, reason=f"shadow:{kind}" if why else "", patch=patch,
                         exhausted=spent), kind, tool)

    def finish(self) -> None:
        """The loop stopped: one move must end the chart's run (a sub-chart's terminal
        counts when its exits end the run)."""
        if self.run.status == "ended":
            return
        for target in self._terminals():
            landed = self._land(target)
            if landed is not None and landed.status == "ended":
                self._move(target, None)
                return
        implicit = (ESCALATED, EXHAUSTED, CANCELLED)
        roots = [s.name for s in self.chart.states
                 if s.kind == "terminal" and s.name not in implicit] or [ESCALATED]
        self._move(roots[0], None)

    def _terminals(self) -> list[str]:
        """User terminals of every level around the current state, innermost first."""
        implicit = (ESCALATED, EXHAUSTED, CANCELLED)
        out: list[str] = []
        for p in self.cc.ancestors(self.run.state):
            node = self.cc.nodes[p]
            if node.state is None:
                continue
            out += [node.prefix + s.name for s in node.chart.states
                    if s.kind == "terminal" and s.name not in implicit
                    and node.prefix + s.name not in out]
        return out

    def _land(self, target: str) -> Move | None:
        """Where one `go:` move to `target` would land (guards and caps not asked), or None."""
        t = self.cc.resolve(self.run.state, go(target))
        return None if t is None else self.cc.move(self.run.state, t)

    def _host(self, tool: str) -> str | None:
        """The state offering `tool`: one a single move reaches first, then the first listed."""
        hosts = [p for p, n in self.cc.nodes.items()
                 if n.state is not None and tool in n.state.tool_map]
        legal = [p for p in hosts if self._way(p) is not None]
        found = legal or hosts
        return found[0] if found else None

    def _way(self, host: str) -> str | None:
        """The target of one move that lands in `host`: itself, a chart state around it
        (entered at its initial state), or a terminal whose exit leads there."""
        around = [p for p in self.cc.ancestors(host) if self.cc.nodes[p].state is not None]
        for target in [*around, *self._terminals()]:
            landed = self._land(target)
            if landed is not None and self.cc.owner_state(landed.leaf)[0] == host:
                return target
        return None

    def _check_call(
        self, here: str, tool: str, arguments: Mapping[str, Any] | None,
    ) -> tuple[str | None, str, str | None]:
        spent = first_exhausted(self.cc, self.run)
        if spent is not None:
            return f"budget {spent} is spent; the chart would have routed the run out", \
                "budget", spent
        state = self.cc.owner_state(self.run.state)[1]
        visit = self.run.visit
        done = visit.iterations if visit is not None else 0
        cap = state.max_iterations or 0
        if done + 1 >= cap:
            return (f"call {done + 1} in one visit of '{here}' (max_iterations={cap}: the "
                    f"last call offers only next_state)"), "budget", f"{here}:iterations"
        tool_cap = state.max_calls.get(tool)
        calls = visit.calls.get(tool, 0) if visit is not None else 0
        if tool_cap is not None and calls >= tool_cap:
            return (f"tool '{tool}' already called {calls} times in this visit of '{here}' "
                    f"(max_calls={tool_cap})"), "budget", f"{here}:max_calls"
        if arguments is not None:
            fp = fingerprint(tool, dict(arguments))
            tool_def = state.tool_map[tool]
            if fp in self.fingerprints and not tool_def.repeatable:
                return f"tool '{tool}' already ran with these arguments", "repeat", None
            self.fingerprints.add(fp)
        return None, "", None

    def _move(self, target: str, tool: str | None) -> None:
        """Move to `target` (a full path) as the driver would, or record why not and follow."""
        trigger = go(target)
        cc, run = self.cc, self.run
        here = cc.owner_state(run.state)[0]
        spent = first_exhausted(cc, run, hard_only=True)
        found: Move | str
        if spent is not None:
            found, kind = f"budget {spent} is spent; the chart would have routed the run out", \
                "budget"
        elif cc.resolve(run.state, trigger) is None:
            found, kind = try_move(cc, run, trigger, {}), "illegal"
        else:
            found = try_move(cc, run, trigger, {})
            kind = "budget" if isinstance(found, str) and "(max_" in found else "guard"
        if isinstance(found, Move):
            self._add(commit(cc, run, found, self.clock(), MOVE_COST, trigger=trigger,
                             actor="model"), "", tool)
            return
        forced = cc.move(run.state, Transition(trigger="shadow", source=here, dest=target))
        self._add(commit(cc, run, forced, self.clock(), MOVE_COST, trigger=trigger,
                         actor="model", refused=found, reason=f"shadow:{kind}",
                         exhausted=spent), kind, tool)

    def _refuse(self, why: str, kind: str, tool: str, spent: str | None) -> None:
        call = ToolCall(id=f"s{self.run.seq + 1}", name=tool)
        self._add(commit(self.cc, self.run, None, self.clock(), CALL_COST, trigger="shadow",
                         actor="code", call=call, result=OK, refused=why,
                         reason=f"shadow:{kind}", exhausted=spent), kind, tool)

    def _add(self, step: Step, kind: str, tool: str | None) -> None:
        self.steps.append(step)
        e = step.event
        if e.refused is not None:
            self.refusals.append(Refusal(e.seq, kind, e.source, e.target, tool or "", e.refused))
        self.run = step.run

    # -- persistence --------------------------------------------------------------------

    async def save(self, store: Store) -> None:
        """Write the shadow run and the events not yet written (call again after more)."""
        if self.initial is not None:
            await store.save_chart(self.chart.version, self.chart.describe())
            await store.create(self.initial)
            self.initial = None
        for step in self.steps[self.saved:]:
            await store.append(step)
            self.saved += 1

    def save_sync(self, store: Store) -> None:
        """`save` for a loop that is not async."""
        anyio.run(self.save, store)


class Shadow:
    """Judges plain-loop runs against `chart` and records what it would have refused."""

    def __init__(self, chart: Chart, *, outcome: Outcome = default_outcome,
                 observe: Observe | None = None, clock: Callable[[], float] = time.time) -> None:
        self.chart, self.outcome, self.observe, self.clock = chart, outcome, observe, clock

    def start(self, run_id: str | None = None, context: Mapping[str, Any] | None = None
              ) -> ShadowRun:
        """A new shadow run at the chart's initial state."""
        cc = self.chart.compiled
        leaf = cc.initial_leaf
        owner, state = cc.owner_state(leaf)
        entered = [p for p in reversed(cc.ancestors(leaf)) if cc.nodes[p].state is not None]
        ctx = self.chart.context.model_validate(dict(context or {})).model_dump(mode="json")
        rid = run_id or f"shadow-{uuid.uuid4().hex}"
        run = Run(run_id=rid, chart=self.chart.name, chart_version=self.chart.version,
                  model=SHADOW_MODEL, state=leaf, context=ctx, visits=dict.fromkeys(entered, 1),
                  visit=Visit(state=owner, seq=0) if state.kind == "model" else None,
                  lineage_root=rid, created_at=self.clock())
        return ShadowRun(self.chart, run, self.outcome, self.observe, self.clock)

    def replay(self, trace: Trace) -> ShadowRun:
        """Judge a recorded trace (no arguments, so no repeat check) and finish it."""
        shadow = self.start(run_id=f"shadow-{trace.run_id}")
        for c in trace.calls:
            shadow.record(c.tool, None, c.outcome)
        shadow.finish()
        return shadow


def replay_all(chart: Chart, traces: list[Trace]) -> dict[str, list[Refusal]]:
    """Refusals per recorded run when `chart` judges each trace."""
    shadow = Shadow(chart)
    return {t.run_id: shadow.replay(t).refusals for t in traces}


async def run_shadowed(
    chart: Chart, store: Store, loop: Callable[[Callable[..., Any]], Awaitable[Any]],
    dispatch: Callable[..., Any], *, run_id: str | None = None, **options: Any,
) -> tuple[Any, ShadowRun]:
    """Run an async `loop(dispatch)` with its dispatcher shadowed; store what was judged."""
    shadow = Shadow(chart, **options).start(run_id)
    try:
        result = await loop(shadow.wrap(dispatch))
        shadow.finish()
        return result, shadow
    finally:
        await shadow.save(store)



def _owner(leaf: str) -> str:
    head, _, last = leaf.rpartition(".")
    return head if head and last in ("think", "act", "approve") else leaf


def refusals_of(events: Sequence[Event]) -> list[Refusal]:
    """The refusals recorded in a shadow run's events."""
    out = []
    for e in events:
        if e.refused is None or not e.reason.startswith("shadow:"):
            continue
        tool = e.call.name if e.call is not None else ""
        out.append(Refusal(e.seq, e.reason.removeprefix("shadow:"), _owner(e.source),
                           _owner(e.target), tool, e.refused))
    return out


async def shadow_refusals(store: Store, *, chart: str | None = None
                          ) -> dict[str, list[Refusal]]:
    """Refusals per shadow run stored in `store` (runs recorded by `ShadowRun.save`)."""
    runs = [r for r in await store.runs(chart=chart) if r.model == SHADOW_MODEL]
    runs.sort(key=lambda r: (r.created_at, r.run_id))
    return {r.run_id: refusals_of(await store.events(r.run_id)) for r in runs}
