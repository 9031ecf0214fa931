"""What a transition span says: its `statechart.*` facts, budgets spent and left, and
errors; message content only when capturing it is switched on."""

from __future__ import annotations

import os
import weakref
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from statechart.engine import CompiledChart, Level
from statechart.records.run import Step
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
    STEP,
    TARGET,
    TRIGGER,
)

capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").lower() == "true"
"""Whether spans carry message content (tool arguments, results, error texts)."""


def transition_attributes(compiled_chart: CompiledChart, record: Step) -> dict[str, Any]:
    """The `statechart.*` facts of a transition, budgets spent and left included."""
    e, run = record.event, record.run
    attributes: dict[str, Any] = {
        RUN_ID: e.run_id,
        SOURCE: e.source,
        TARGET: e.target,
        TRIGGER: e.trigger,
        ACTOR: e.actor,
        STEP: e.seq,
    }
    for level in compiled_chart.levels_of(e.source):
        spent = run.ledger.get(level.path)
        for kind, cap, spent_key, left_key in _budget_keys(level):
            used = spent_of(spent, kind) if spent is not None else 0
            attributes[spent_key] = used
            attributes[left_key] = max(cap - used, 0)
    if e.refused:
        attributes[GUARD_REFUSED] = e.refused
    if e.exhausted:
        attributes[EXHAUSTED] = e.exhausted
    if _failed_step(record):
        attributes[ERROR_TYPE] = e.error.split(":", 1)[0] if e.error else "Error"
    return attributes


def _failed_step(record: Step) -> bool:
    """A transition forced by an error; a tool's failure is its `execute_tool` span's,
    and the model hears about it, so that transition is not one."""
    e = record.event
    return bool(e.error) and not (e.actor == "code" and e.call is not None)


_KEYS: weakref.WeakKeyDictionary[Level, list[tuple[str, int, str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _budget_keys(level: Level) -> list[tuple[str, int, str, str]]:
    """(kind, cap, spent attribute, left attribute) of each cap of a budget level."""
    found = _KEYS.get(level)
    if found is None:
        name = level.path
        found = _KEYS[level] = [
            (kind, cap, f"{BUDGET}.{name}.{kind}.spent", f"{BUDGET}.{name}.{kind}.left")
            for kind, cap in level.caps.items()
        ]
    return found


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
            Status(StatusCode.ERROR, text if capture_content else text.split(":", 1)[0])
        )


def failed(span: Span, exc: BaseException) -> None:
    """ERROR status and `error.type`; the message only with content capture on (it may be
    what a tool said about a person)."""
    kind = type(exc).__qualname__
    span.set_status(Status(StatusCode.ERROR, str(exc) if capture_content else kind))
    span.set_attribute(ERROR_TYPE, kind)
