"""`ShadowRun`: one plain-loop run followed call by call and judged against a chart.

Each call is labelled `tool:outcome`, moved to the chart state that hosts the
tool through `try_move()` (the legality, guard and cap check the driver uses)
and checked against the caps the driver's planner applies; what the chart
would refuse is recorded as an event with a `shadow:<kind>` reason.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from msgspec.structs import replace

from statechart.chart.chart import Chart
from statechart.chart.names import CANCELLED, ESCALATED, IMPLICIT
from statechart.chart.tools import Tool, fingerprint, outcome_class, valid_tool_name
from statechart.engine import (
    CompiledChart,
    Move,
    Transition,
    calls_cap_refusal,
    checked_patch,
    commit,
    compiled,
    first_exhausted,
    go,
    last_call,
    repeat_refusal,
    status_of,
    try_move,
)
from statechart.mining.refusals import Refusal, state_of
from statechart.mining.routes import charged as _charged
from statechart.mining.routes import json_arguments, way
from statechart.mining.routes import spent_text as _spent
from statechart.mining.traces import ERROR, OK
from statechart.records.messages import ToolCall
from statechart.records.run import Run, Step
from statechart.records.spent import Spent
from statechart.store.base import Store

CALL_COST = Spent(steps=2, model_calls=1, tool_calls=1)
"""A loop call stands for a model step that picks the tool and a tool step that runs it."""
MOVE_COST = Spent(steps=2, model_calls=1)
"""Leaving a model state: the model call that asks for `next_state`, then that step."""
MODEL_STEP = Spent(steps=1, model_calls=1)
CODE_STEP = Spent(steps=1)
"""Leaving a code state: its handler's step."""
HOOK_ERROR = "hook_error"
"""The outcome of a call whose `outcome` or `observe` hook raised."""
ENDS = (*IMPLICIT, CANCELLED)

Outcome = Callable[[str, Any], str]
Observe = Callable[[str, Mapping[str, Any], Any], Mapping[str, Any]]


def _parsed(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the driver fingerprints them: parsed by the tool (defaults filled
    in, values coerced) when they fit it; as given when they do not, or when the tool's
    schema would drop some (a drafted stub declares none)."""
    try:
        parsed: dict[str, Any] = tool.parse(args).model_dump(mode="json")
    except Exception:
        return args
    return parsed if parsed.keys() >= args.keys() else args


def default_outcome(tool: str, result: Any) -> str:
    """A result's own outcome class (its `outcome` key or attribute, as the driver reads
    it), else `ok`."""
    return outcome_class(result) or OK


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
    def compiled_chart(self) -> CompiledChart:
        return compiled(self.chart)

    def wrap(self, dispatch: Callable[..., Any]) -> Callable[..., Any]:
        """The dispatcher `dispatch(tool, arguments)`, observed; sync or async like the original."""
        if inspect.iscoroutinefunction(dispatch) or inspect.iscoroutinefunction(
            type(dispatch).__call__
        ):

            async def awrapped(tool: str, arguments: Any = None) -> Any:
                return await self._awaited(tool, arguments, dispatch(tool, arguments))

            return awrapped

        def wrapped(tool: str, arguments: Any = None) -> Any:
            try:
                result = dispatch(tool, arguments)
            except Exception:
                self.record(tool, arguments, ERROR)
                raise
            if inspect.isawaitable(result):
                return self._awaited(tool, arguments, result)
            self.record(tool, arguments, self._label(tool, result), result)
            return result

        return wrapped

    async def _awaited(self, tool: str, arguments: Any, pending: Awaitable[Any]) -> Any:
        try:
            result = await pending
        except Exception:
            self.record(tool, arguments, ERROR)
            raise
        self.record(tool, arguments, self._label(tool, result), result)
        return result

    def _label(self, tool: str, result: Any) -> str:
        """The outcome class; a hook that raises must not break the loop (`hook_error`)."""
        try:
            return self.outcome(tool, result)
        except Exception:
            return HOOK_ERROR

    # -- judging ------------------------------------------------------------------------

    def record(self, tool: str, arguments: Any, outcome: str, result: Any = None) -> None:
        """Judge one call the loop made (`arguments=None`: unknown, no repeat check). A name
        providers refuse is matched as the one a proposed chart gives it."""
        tool = valid_tool_name(tool)
        args = json_arguments(arguments)
        if self.run.status == "ended":
            self._call(
                tool,
                args,
                outcome,
                f"the loop called '{tool}' after the chart ended in '{self.run.state}'",
                "illegal",
            )
            return
        if tool not in self.compiled_chart.owner_state(self.run.state)[1].tool_map:
            host = self._host(tool)
            if host is None:
                self._call(
                    tool,
                    args,
                    outcome,
                    f"no state of chart '{self.chart.name}' offers tool '{tool}'",
                    "tool",
                )
                return
            path = way(self.compiled_chart, self.run.state, self._in(host))
            for target in path or [host]:
                self._move(target, tool)
        patch: dict[str, Any] = {}
        if self.observe is not None:
            try:
                wanted = dict(self.observe(tool, args or {}, result))
            except Exception:
                wanted, outcome = {}, HOOK_ERROR
            patch, problem = checked_patch(
                self.compiled_chart, self._owner(self.run.state), self.run, wanted
            )
            if problem is not None:
                outcome = HOOK_ERROR  # the hook wrote what the context type refuses
        why, kind = self._check_call(tool, args, outcome)
        self._call(tool, args, outcome, why, kind, patch)

    def _owner(self, leaf: str) -> str:
        return self.compiled_chart.owner_state(leaf)[0]

    def _in(self, host: str) -> Callable[[str], bool]:
        return lambda leaf: self._owner(leaf) == host

    def _call(
        self,
        tool: str,
        args: dict[str, Any] | None,
        outcome: str,
        why: str | None,
        kind: str,
        patch: Mapping[str, Any] | None = None,
    ) -> None:
        """The event of one loop call: it ran, whatever the chart thinks of it."""
        visit = self.run.visit
        update: dict[str, Any] = {}
        failed = outcome == ERROR
        if visit is not None:
            counts: dict[str, Any] = {
                "iterations": visit.iterations + 1,
                "calls": {**visit.calls, tool: visit.calls.get(tool, 0) + 1},
            }
            if not failed:  # as in the driver: a call that raised did not succeed
                counts["succeeded"] = {**visit.succeeded, tool: visit.succeeded.get(tool, 0) + 1}
            update["visit"] = replace(visit, **counts)
        call = ToolCall(id=f"s{self.run.seq + 1}", name=tool, arguments=args or {})
        self._add(
            commit(
                self.compiled_chart,
                self.run,
                None,
                self.clock(),
                CALL_COST,
                trigger="shadow",
                actor="code",
                update=update,
                call=call,
                result=outcome,
                outcome=outcome,
                refused=why,
                error="the loop's dispatcher raised" if failed else None,
                reason=f"shadow:{kind}" if why else "",
                patch=dict(patch or {}),
            ),
            kind,
            tool,
        )

    def finish(self) -> None:
        """The loop stopped: one move (through code states, or a sub-chart's terminal whose
        exits end the run) must end the chart's run."""
        if self.run.status == "ended":
            return
        compiled_chart = self.compiled_chart

        def ends(leaf: str) -> bool:
            return (
                status_of(compiled_chart, leaf) == "ended"
                and self._owner(leaf).rsplit(".", 1)[-1] not in ENDS
            )

        path = way(compiled_chart, self.run.state, ends)
        if path is not None:
            for target in path:
                self._move(target, None)
            return
        roots = [
            s.name for s in self.chart.states if s.kind == "terminal" and s.name not in ENDS
        ] or [ESCALATED]
        self._move(roots[0], None)

    def _host(self, tool: str) -> str | None:
        """The state offering `tool`: one a single move reaches first, then the first listed."""
        hosts = [
            p
            for p, n in self.compiled_chart.nodes.items()
            if n.state is not None and tool in n.state.tool_map
        ]
        for host in hosts:
            if way(self.compiled_chart, self.run.state, self._in(host)):
                return host
        return hosts[0] if hosts else None

    def _check_call(
        self, tool: str, args: dict[str, Any] | None, outcome: str
    ) -> tuple[str | None, str]:
        """What the driver's planner would refuse about this call, in its order."""
        compiled_chart, run = self.compiled_chart, self.run
        here, state = compiled_chart.owner_state(run.state)
        spent = first_exhausted(compiled_chart, run)
        if spent is not None:
            return f"{_spent(spent)} is spent: the model would not have been called", "budget"
        visit = run.visit
        assert visit is not None  # a state offering tools is a model state
        defined = state.tool_map[tool]
        if last_call(state, visit.iterations + 1):
            return (
                f"call {visit.iterations + 1} in one visit of '{here}' (max_iterations="
                f"{state.max_iterations}: the last call offers only next_state)"
            ), "budget"
        why = calls_cap_refusal(state, here, visit, defined)
        if why is not None:
            return why, "budget"
        if args is not None:
            call_fingerprint = fingerprint(tool, _parsed(defined, args))
            why = repeat_refusal(defined, call_fingerprint, self.fingerprints)
            if why is not None:
                return why, "repeat"
            if outcome != ERROR:
                self.fingerprints.add(call_fingerprint)
        spent = first_exhausted(compiled_chart, _charged(compiled_chart, run, MODEL_STEP))
        if spent is not None:
            return f"{_spent(spent)} is spent once the model picked the call", "budget"
        return None, ""

    def _move(self, target: str, tool: str | None) -> None:
        """Move to `target` (a full path) as the driver would, or record why not and follow.
        Leaving a model state takes a model call and a `next_state` step; a code state one."""
        trigger = go(target)
        compiled_chart, run = self.compiled_chart, self.run
        here, state = compiled_chart.owner_state(run.state)
        by_model = state.kind == "model"
        why: str | None = None
        if by_model:
            spent = first_exhausted(compiled_chart, run)
            if (
                spent is None
                and run.visit is not None
                and run.visit.iterations >= (state.max_iterations or 0)
            ):
                spent = f"{here}:iterations"
            spent = spent or first_exhausted(
                compiled_chart, _charged(compiled_chart, run, MODEL_STEP), hard_only=True
            )
        else:
            spent = first_exhausted(compiled_chart, run, hard_only=True)
        found: Move | str
        if spent is not None:
            found, kind = (
                f"{_spent(spent)} is spent: the chart would have routed the run out",
                "budget",
            )
        else:
            found = try_move(compiled_chart, run, target, {})
            kind = (
                "illegal"
                if compiled_chart.resolve(run.state, trigger) is None
                else "budget"
                if isinstance(found, str) and "(max_" in found
                else "guard"
            )
        if isinstance(found, Move):
            move = found
        else:
            why = found
            move = compiled_chart.move(
                run.state, Transition(trigger="shadow", source=here, dest=target), run.history
            )
        update: dict[str, Any] = {}
        if by_model and run.visit is not None:
            update["visit"] = replace(run.visit, iterations=run.visit.iterations + 1)
        wanted = ToolCall(id=f"m{run.seq + 1}", name=tool) if tool else None  # what it was for
        self._add(
            commit(
                compiled_chart,
                run,
                move,
                self.clock(),
                MOVE_COST if by_model else CODE_STEP,
                trigger=trigger,
                actor="model" if by_model else "code",
                update=update,
                refused=why,
                call=wanted,
                reason=f"shadow:{kind}" if why else "",
            ),
            kind,
            tool,
        )

    def _add(self, step: Step, kind: str, tool: str | None) -> None:
        self.steps.append(step)
        e = step.event
        if e.refused is not None:
            self.refusals.append(
                Refusal(e.seq, kind, state_of(e.source), state_of(e.target), tool or "", e.refused)
            )
        self.run = step.run

    # -- persistence --------------------------------------------------------------------

    async def save(self, store: Store) -> None:
        """Write the shadow run and the events not yet written (call again after more)."""
        if self.initial is not None:
            await store.save_chart(self.chart.version, self.chart.describe())
            await store.create(self.initial)
            self.initial = None
        for step in self.steps[self.saved :]:
            await store.append(step)
            self.saved += 1

    def save_sync(self, store: Store) -> None:
        """`save` for a loop that is not async."""
        anyio.run(self.save, store)
