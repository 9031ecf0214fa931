"""How records become SQLite rows and back: column lists, JSON bodies, corrupt-row errors."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from statechart.errors import CorruptRowError
from statechart.records.messages import Message, ToolCall
from statechart.records.run import Event, Intent, Run, Step

MESSAGES = TypeAdapter(list[Message])
COLUMNS = (
    "run_id, seq, time, source, target, trigger, actor, reason, tool, refused, error, "
    "steps, model_calls, tool_calls, input_tokens, output_tokens, cost_micros, wall_ms, "
    "intent, key, by, fingerprint, exhausted, edge, closes, span, visit, messages, body"
)
BODY = {
    "call",
    "calls",
    "result",
    "patch",
    "delta",
    "entered",
    "exited",
    "model",
    "outcome",
    "usage_missing",
    "breach",
    "scope",
    "outputs",
    "inputs",
}
USAGE = (
    "steps",
    "model_calls",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "cost_micros",
    "wall_ms",
)
INSERT_EVENT = f"INSERT INTO events ({COLUMNS}) VALUES ({', '.join('?' * 29)})"


def insert_intent(db: sqlite3.Connection, run_id: str, i: Intent) -> None:
    db.execute(
        "INSERT INTO intent_rows (run_id, call_id, seq, state, tool, call, key) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run_id, i.call.id, i.seq, i.state, i.call.name, i.call.model_dump_json(), i.key),
    )


def event_row(step: Step) -> tuple[Any, ...]:
    e, u = step.event, step.event.usage
    messages = (
        MESSAGES.dump_json(list(step.messages), exclude_defaults=True).decode()
        if step.messages
        else None
    )
    body = e.model_dump_json(include=BODY, exclude_defaults=True)
    return (
        e.run_id,
        e.seq,
        e.time,
        e.source,
        e.target,
        e.trigger,
        e.actor,
        e.reason or None,
        e.call.name if e.call is not None else ",".join(c.name for c in e.calls) or None,
        e.refused,
        e.error,
        u.steps,
        u.model_calls,
        u.tool_calls,
        u.input_tokens,
        u.output_tokens,
        u.cost_micros,
        u.wall_ms,
        e.intent,
        e.key,
        e.by,
        e.fingerprint,
        e.exhausted,
        e.edge,
        ",".join(step.closed) or None,
        e.span,
        e.visit,
        messages,
        body,
    )


def event_of(row: tuple[Any, ...]) -> Event:
    (run_id, seq, at, source, target, trigger, actor, reason, _tool, refused, error, *rest) = row
    usage = dict(zip(USAGE, rest[:7], strict=True))
    intent, key, by, call_fingerprint, exhausted, edge, _closes, span, visit, _messages, body = (
        rest[7:]
    )
    where = f"events row of run {run_id} at seq {seq}"
    try:
        fields = json.loads(body)
        if not isinstance(fields, dict):
            raise ValueError("the body is not a JSON object")
        return Event.model_validate(
            {
                **fields,
                "run_id": run_id,
                "seq": seq,
                "time": at,
                "source": source,
                "target": target,
                "trigger": trigger,
                "actor": actor,
                "reason": reason or "",
                "refused": refused,
                "error": error,
                "usage": usage,
                "intent": intent,
                "key": key,
                "by": by,
                "fingerprint": call_fingerprint,
                "exhausted": exhausted,
                "edge": edge,
                "visit": visit,
                "span": span,
            }
        )
    except (ValidationError, ValueError, TypeError) as exc:
        raise corrupt(where, exc) from None


def messages_of(rows: Any, run_id: str) -> list[Message]:
    """The transcript messages stored in `(seq, messages)` rows, in order."""
    out: list[Message] = []
    for seq, text in rows:
        try:
            out.extend(MESSAGES.validate_json(text))
        except (ValidationError, ValueError, TypeError) as exc:
            raise corrupt(f"transcript of run {run_id} at seq {seq}", exc) from None
    return out


def intents_of(rows: Any, closes: Any, run_id: str) -> list[Intent]:
    """Intents from `intent_rows` rows and the `(seq, closes)` of the events that completed
    them: a close completes the open intent of that call id, before any opened at its seq."""
    pending = sorted(closes)
    out: list[Intent] = []
    open_: dict[str, int] = {}
    k = 0
    for call_id, seq, state, call, key in rows:
        while k < len(pending) and pending[k][0] <= seq:
            _close(out, open_, *pending[k])
            k += 1
        parsed = parse(ToolCall, call, f"intent of run {run_id}, call {call_id}")
        open_[call_id] = len(out)
        out.append(Intent(call=parsed, state=state, seq=seq, key=key))
    for seq, ids in pending[k:]:
        _close(out, open_, seq, ids)
    return out


def _close(out: list[Intent], open_: dict[str, int], seq: int, ids: str) -> None:
    for call_id in ids.split(","):
        n = open_.pop(call_id, None)
        if n is not None:
            out[n] = out[n].model_copy(update={"completed": True, "completed_seq": seq})


M = TypeVar("M", Run, ToolCall)


def parse(cls: type[M], text: Any, where: str) -> M:
    try:
        return cls.model_validate_json(text)
    except (ValidationError, ValueError, TypeError) as exc:
        raise corrupt(where, exc) from None


def corrupt(where: str, exc: Exception) -> CorruptRowError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CorruptRowError(
        f"{where} is corrupt or truncated ({first}); it was changed outside statechart. "
        "Nothing was written; restore the file from a backup or fork the run before that seq"
    )
