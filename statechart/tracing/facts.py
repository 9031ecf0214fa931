"""What a transition span says: its `statechart.*` facts, budgets spent and left, and
errors; message content only when capturing it is switched on."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from statechart.engine import CompiledChart, Level
from statechart.records.run import Run, Step
from statechart.records.spent import spent_of
from statechart.tracing.attributes import (
    ACTOR,
    BUDGET,
    CAPTURE_CONTENT_ENV,
    ERROR_TYPE,
    EXHAUSTED,
    GUARD_REFUSED,
    RUN_ID,
    SOURCE,
    TARGET,
    TRIGGER,
)
from statechart.tracing.content import clipped

capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").lower() == "true"
"""Whether spans carry message content (tool arguments, results, error texts)."""


def transition_attributes(compiled_chart: CompiledChart, record: Step) -> dict[str, Any]:
    """The `statechart.*` facts of a transition, and per budget kind what binds: the least
    left over the levels around its source, and that level. Its `statechart.step` is set
    once the event is stored (`spans.stored`): a refused append leaves no span of a step."""
    e = record.event
    attributes: dict[str, Any] = {
        RUN_ID: e.run_id,
        SOURCE: e.source,
        TARGET: e.target,
        TRIGGER: e.trigger,
        ACTOR: e.actor,
    }
    ledger = record.run.ledger
    levels = compiled_chart.levels_of(e.source)
    if len(levels) == 1:  # the chart's own budget only: nothing to compare
        level = levels[0]
        spent = ledger.get(level.path)
        for kind, cap in level.all:
            left = cap - spent_of(spent, kind) if spent is not None else cap
            left_key, level_key = _binding_keys(kind)
            attributes[left_key] = left if left > 0 else 0
            attributes[level_key] = level.path
    else:
        least: dict[str, tuple[int, str]] = {}
        for level in levels:  # outermost first: it wins a tie
            spent = ledger.get(level.path)
            for kind, cap in level.all:
                left = max(cap - spent_of(spent, kind) if spent is not None else cap, 0)
                known = least.get(kind)
                if known is None or left < known[0]:
                    least[kind] = (left, level.path)
        for kind, (left, path) in least.items():
            left_key, level_key = _binding_keys(kind)
            attributes[left_key] = left
            attributes[level_key] = path
    if e.refused:
        attributes[GUARD_REFUSED] = e.refused
    if e.exhausted:
        attributes[EXHAUSTED] = e.exhausted
    if e.error and _failed_step(record):
        attributes[ERROR_TYPE] = e.error.split(":", 1)[0]
    return attributes


def _failed_step(record: Step) -> bool:
    """A transition forced by an error; a tool's failure is its `execute_tool` span's,
    and the model hears about it, so that transition is not one."""
    e = record.event
    return bool(e.error) and not (e.actor == "code" and e.call is not None)


_KEYS: dict[str, tuple[str, str]] = {}


def _binding_keys(kind: str) -> tuple[str, str]:
    """The `statechart.budget.<kind>.left` and `.level` attribute names of a budget kind."""
    found = _KEYS.get(kind)
    if found is None:
        found = _KEYS[kind] = (f"{BUDGET}.{kind}.left", f"{BUDGET}.{kind}.level")
    return found


def level_attributes(level: Level, run: Run) -> dict[str, Any]:
    """One budget level's figures, for the span of the state (or drive) it belongs to:
    `statechart.budget.<kind>.cap`, `.spent` and `.left` for each of its caps."""
    spent = run.ledger.get(level.path)
    out: dict[str, Any] = {}
    for kind, cap in level.all:
        used = spent_of(spent, kind) if spent is not None else 0
        out[f"{BUDGET}.{kind}.cap"] = cap
        out[f"{BUDGET}.{kind}.spent"] = used
        out[f"{BUDGET}.{kind}.left"] = max(cap - used, 0)
    return out


def annotate(span: Span, record: Step) -> None:
    """Refusals, exhaustion, approval waits and human decisions as span events; errors as
    the span's status."""
    e, run = record.event, record.run
    if e.refused:
        span.add_event(GUARD_REFUSED, {"reason": e.refused})
    if e.exhausted:
        span.add_event(EXHAUSTED, {"which": e.exhausted, "reason": e.reason})
    if run.status == "waiting":
        span.add_event("statechart.approval.requested", {"reason": run.reason})
    if e.actor == "human":
        span.add_event(f"statechart.human.{e.trigger}", {"by": e.by or "", "reason": e.reason})
    if _failed_step(record):
        text = e.error or ""
        span.set_status(
            Status(StatusCode.ERROR, clipped(text) if capture_content else text.split(":", 1)[0])
        )


def failed(span: Span, exc: BaseException) -> None:
    """ERROR status and `error.type`; the message only with content capture on (it may be
    what a tool said about a person)."""
    kind = type(exc).__qualname__
    span.set_status(Status(StatusCode.ERROR, clipped(str(exc)) if capture_content else kind))
    span.set_attribute(ERROR_TYPE, kind)
