"""What a model state shows the model: its tools, the `next_state` choice, and the request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, create_model

from statechart.chart.chart import State
from statechart.chart.names import ESCALATED, NEXT_STATE
from statechart.engine.scopes import context_at
from statechart.engine.tables import CompiledChart
from statechart.records.messages import Message, Request, ToolSpec
from statechart.records.run import Run
from statechart.records.spent import ZERO, remaining


@dataclass(frozen=True)
class ModelView:
    """Precomputed per model state: tool specs, legal targets, the writes validator."""

    path: str
    state: State
    targets: tuple[str, ...]
    """Targets offered by `next_state`, relative to the state's chart."""
    tools: tuple[ToolSpec, ...]
    """The state's tools plus `next_state`."""
    final_tools: tuple[ToolSpec, ...]
    """Only `next_state`: the last call of a visit."""
    writes: type[BaseModel]
    """Validates `next_state` arguments: `target` and the fields the state writes."""


def model_view(compiled_chart: CompiledChart, path: str) -> ModelView:
    """The view of the model state at `path` (cached per compiled chart)."""
    view = compiled_chart.views.get(path)
    if view is None:
        view = compiled_chart.views[path] = _build_view(compiled_chart, path)
    return view


def _build_view(compiled_chart: CompiledChart, path: str) -> ModelView:
    node = compiled_chart.nodes[path]
    state = node.state
    assert state is not None
    chart = node.chart
    targets = [e.target for e in chart.edges if e.source == state.name and e.after is None]
    if ESCALATED not in targets:
        targets.append(ESCALATED)
    writes, schema = _writes(chart.name, state.name, chart.context, state.writes, tuple(targets))
    nxt = ToolSpec(
        name=NEXT_STATE,
        description=(
            f"Leave state '{state.name}' for one of: {', '.join(targets)}"
            + (f"; set {', '.join(state.writes)} as you go" if state.writes else "")
        ),
        parameters=schema,
    )
    tools = tuple(
        ToolSpec(name=t.name, description=t.description, parameters=t.schema) for t in state.tools
    )
    return ModelView(path, state, tuple(targets), (*tools, nxt), (nxt,), writes)


@lru_cache(maxsize=1024)
def _writes(
    chart: str,
    state: str,
    context: type[BaseModel],
    writes: tuple[str, ...],
    targets: tuple[str, ...],
) -> tuple[type[BaseModel], dict[str, Any]]:
    """The `next_state` arguments' model and JSON schema: `target` and the fields the state
    writes, typed as the context types them. Made once per distinct set of these, so a
    chart built again (a worker loading a version, a resume) does not make them again."""
    fields: dict[str, Any] = {"target": (Literal[targets], ...)}
    for name in writes:
        fields[name] = (context.model_fields[name].annotation, None)  # optional to send
    model: type[BaseModel] = create_model(f"{chart}_{state}_next_state", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return model, schema


def build_request(
    compiled_chart: CompiledChart, run: Run, transcript: Sequence[Message], *, final: bool
) -> Request:
    """The request for one model call: instructions, read fields, this visit's transcript."""
    assert run.visit is not None
    view = model_view(compiled_chart, run.visit.state)
    state = view.state
    shown = context_at(compiled_chart, run, view.path)
    context = {k: shown.get(k) for k in state.reads}
    return Request(
        state=view.path,
        instructions=state.instructions,
        context=context,
        transcript=tuple(transcript),
        tools=view.final_tools if final else view.tools,
        tool_choice="required",
        max_tokens=max_tokens(compiled_chart, run, state.max_tokens),
    )


def max_tokens(compiled_chart: CompiledChart, run: Run, asked: int | None) -> int | None:
    """`asked`, lowered to the output (and total) tokens every level has left."""
    cap = asked
    for level in compiled_chart.levels_of(run.state):
        spent = run.ledger.get(level.path, ZERO)
        for kind in ("output_tokens", "tokens"):
            left = remaining(level.caps, spent, kind)
            if left is not None:
                cap = left if cap is None else min(cap, left)
    return cap
