"""Contexts by level: the root's, and each ported sub-chart's own.

A chart state with `input=`/`output=` runs its sub-chart on a context of the
sub-chart's type (a scope, keyed by the state's path). Entering it fills that context
from the one around it; leaving it through a terminal writes `output` back as one
validated patch. Both are computed once, here, and recorded on the event, so replay
never calls a mapping again. A sub-chart left another way than through a terminal of
success (escalated, exhausted, a failure terminal, or a level around it routed out)
hands back only the mapped fields it holds a value for (not None); a mapping function
is called either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from statechart.chart.chart import State
from statechart.chart.names import IMPLICIT
from statechart.engine.tables import CompiledChart, Move
from statechart.errors import PortError, validation_problems
from statechart.records.run import Run


def context_in(run: Run, scope: str) -> dict[str, Any]:
    """The context of `scope` as stored (JSON values)."""
    return run.context if not scope else run.contexts.get(scope, {})


def context_at(compiled_chart: CompiledChart, run: Run, path: str) -> dict[str, Any]:
    """The context the state at `path` sees."""
    return context_in(run, compiled_chart.nodes[path].scope)


def patched(run: Run, scope: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """The run fields that write `patch` into `scope`'s context."""
    if not scope:
        return {"context": {**run.context, **patch}}
    return {"contexts": {**run.contexts, scope: {**run.contexts.get(scope, {}), **patch}}}


def ported_on(compiled_chart: CompiledChart, paths: tuple[str, ...]) -> list[str]:
    """The ported chart states among `paths`, in their order."""
    if len(compiled_chart.scopes) == 1:
        return []
    maps = compiled_chart.maps
    return [p for p in paths if (p in compiled_chart.scopes or p in maps) and p]


def crossing(
    compiled_chart: CompiledChart, context: dict[str, Any], contexts: dict[str, Any], move: Move
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """What `move` hands across ported sub-chart borders, from the contexts after its own
    patch: the patch each sub-chart it leaves writes out (innermost first) and the first
    context of each it enters (outermost first). Calls the mappings; `PortError` when an
    input or output does not fit its type."""
    outputs: dict[str, dict[str, Any]] = {}
    inputs: dict[str, dict[str, Any]] = {}
    before = contexts
    for path in ported_on(compiled_chart, move.exited):
        state = compiled_chart.nodes[path].state
        assert state is not None
        if path in compiled_chart.maps:
            around = compiled_chart.nodes[path].scope
            whole = context if not around else contexts[around]
            outputs[path] = _gathered(compiled_chart, path, before, whole)
        elif state.output is not None:
            around = compiled_chart.nodes[path].scope
            outputs[path] = _output(
                compiled_chart,
                path,
                state,
                contexts.get(path, {}),
                context if not around else contexts[around],
                _succeeded(compiled_chart, move, path),
            )
        context, contexts = crossed(compiled_chart, context, contexts, (path,), outputs, {})
    for path in ported_on(compiled_chart, move.entered):
        state = compiled_chart.nodes[path].state
        assert state is not None
        around = compiled_chart.nodes[path].scope
        whole = context if not around else contexts[around]
        host = path.rsplit(".", 1)[0]
        if path in compiled_chart.maps:
            continue
        if host in compiled_chart.maps:
            found = _instance(compiled_chart, host, path, whole)
            if found is None:
                continue  # no item for this instance: it does not start
            inputs[path] = found
        else:
            inputs[path] = _input(compiled_chart, path, state, whole)
        contexts = {**contexts, path: inputs[path]}
    return outputs, inputs


def crossed(
    compiled_chart: CompiledChart,
    context: dict[str, Any],
    contexts: dict[str, Any],
    exited: tuple[str, ...],
    outputs: Mapping[str, dict[str, Any]],
    inputs: Mapping[str, dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The root context and the ported ones after a move that left the ported sub-charts
    among `exited` (writing `outputs`) and entered those in `inputs`: pure data, so
    replay applies it exactly as the move did."""
    for path in ported_on(compiled_chart, exited):
        contexts = {k: v for k, v in contexts.items() if k != path}
        patch = outputs.get(path)
        if patch:
            around = compiled_chart.nodes[path].scope
            if not around:
                context = {**context, **patch}
            else:
                contexts = {**contexts, around: {**contexts.get(around, {}), **patch}}
    if inputs:
        contexts = {**contexts, **inputs}
    return context, contexts


def entered_at_start(
    compiled_chart: CompiledChart, context: dict[str, Any], leaf: str
) -> dict[str, dict[str, Any]]:
    """The contexts of the ported sub-charts a new run starts inside (outermost first)."""
    contexts: dict[str, dict[str, Any]] = {}
    for path in reversed(compiled_chart.ancestors(leaf)):
        state = compiled_chart.nodes[path].state
        if state is not None and state.ported:
            around = compiled_chart.nodes[path].scope
            whole = context if not around else contexts[around]
            host = path.rsplit(".", 1)[0]
            if host in compiled_chart.maps:
                found = _instance(compiled_chart, host, path, whole)
                if found is None:
                    return contexts  # no item for this instance: it does not start
                contexts[path] = found
            else:
                contexts[path] = _input(compiled_chart, path, state, whole)
    return contexts


def _succeeded(compiled_chart: CompiledChart, move: Move, path: str) -> bool:
    """Whether the sub-chart at `path` was left through a terminal of success."""
    for leaf in move.through:
        if leaf.rsplit(".", 1)[0] == path:
            state = compiled_chart.nodes[leaf].state
            return state is not None and state.name not in IMPLICIT and state.outcome == "success"
    return False


def _input(
    compiled_chart: CompiledChart, path: str, state: State, around: dict[str, Any]
) -> dict[str, Any]:
    parent_t = compiled_chart.nodes[path].chart.context  # the type the parent chart declares
    where = f"sub-chart state '{path}'"
    return _filled(where, state.input, parent_t, compiled_chart.scopes[path], around, {})


def _filled(
    where: str,
    port: Any,
    parent_t: type[BaseModel],
    child_t: type[BaseModel],
    around: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """A sub-chart's first context: what `port` (a mapping, or a function of the context
    around) fills, with `extra` (a map instance's item), as `child_t` validates it."""
    try:
        if callable(port):
            made = port(typed(parent_t, around))
            base = made.model_dump() if isinstance(made, BaseModel) else dict(made)
        else:
            base = {c: around.get(p) for c, p in (port or {}).items()}
        value = child_t.model_validate({**base, **extra})
    except ValidationError as exc:
        raise PortError(
            f"the input of {where} does not fit {child_t.__name__}: {validation_problems(exc)}"
        ) from None
    except Exception as exc:
        raise PortError(
            f"the input function of {where} raised {type(exc).__name__}: {exc}"
        ) from None
    return value.model_dump(mode="json")


def _output(
    compiled_chart: CompiledChart,
    path: str,
    state: State,
    child: dict[str, Any],
    around: dict[str, Any],
    succeeded: bool,
) -> dict[str, Any]:
    child_t = compiled_chart.scopes[path]
    parent_t = compiled_chart.scopes[compiled_chart.nodes[path].scope]
    try:
        if callable(state.output):
            made = state.output(typed(child_t, child))
            if isinstance(made, BaseModel):
                patch = made.model_dump(mode="json", include=made.model_fields_set)
            else:
                patch = dict(made or {})
        else:
            patch = {
                p: child.get(c)
                for p, c in (state.output or {}).items()
                if succeeded or child.get(c) is not None
            }
        merged = parent_t.model_validate({**around, **patch})
    except ValidationError as exc:
        raise PortError(
            f"the output of sub-chart state '{path}' does not fit {parent_t.__name__}: "
            f"{validation_problems(exc)}"
        ) from None
    except Exception as exc:
        raise PortError(
            f"the output function of sub-chart state '{path}' raised {type(exc).__name__}: {exc}"
        ) from None
    return merged.model_dump(mode="json", include=set(patch))


def _instance(
    compiled_chart: CompiledChart, host: str, path: str, around: dict[str, Any]
) -> dict[str, Any] | None:
    """The first context of map instance `path`: its item of the list (None when the list
    is shorter), and what `input=` fills from the context around."""
    s = compiled_chart.maps[host]
    assert s.over is not None and s.item is not None
    items = around.get(s.over)
    items = [] if items is None else items
    if not isinstance(items, list):
        raise PortError(
            f"map state '{host}' runs over '{s.over}', which holds "
            f"{type(items).__name__}, not a list"
        )
    if len(items) > s.max_items:
        raise PortError(
            f"map state '{host}' takes at most max_items={s.max_items} items; '{s.over}' "
            f"holds {len(items)}: raise max_items or split the list"
        )
    index = int(path.rsplit(".", 1)[1])
    if index >= len(items):
        return None
    parent_t = compiled_chart.nodes[host].chart.context
    where = f"map state '{host}' (item {index} of '{s.over}')"
    extra = {s.item: items[index]}
    return _filled(where, s.input, parent_t, compiled_chart.scopes[path], around, extra)


def _gathered(
    compiled_chart: CompiledChart,
    path: str,
    contexts: dict[str, Any],
    around: dict[str, Any],
) -> dict[str, Any]:
    """What map state `path` writes back on leaving: each `output` field a list of the
    instances' values, in item order (None for an instance that had none)."""
    s = compiled_chart.maps[path]
    done = [contexts[p] for p in compiled_chart.parallels[path] if p in contexts]
    gather = s.output if isinstance(s.output, Mapping) else {}
    patch = {parent: [c.get(child) for c in done] for parent, child in gather.items()}
    parent_t = compiled_chart.scopes[compiled_chart.nodes[path].scope]
    try:
        merged = parent_t.model_validate({**around, **patch})
    except ValidationError as exc:
        raise PortError(
            f"the gathered output of map state '{path}' does not fit {parent_t.__name__}: "
            f"{validation_problems(exc)}"
        ) from None
    return merged.model_dump(mode="json", include=set(patch))


def typed(context_type: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    """`values` as `context_type` (validated), ignoring fields the type does not declare."""
    return context_type.model_validate(
        {k: v for k, v in values.items() if k in context_type.model_fields}
    )
