"""How records become SQLite rows and back: column lists, JSON bodies, corrupt-row errors.

An event row's key is `(run number << 32) | seq` (`key_of`): the table is clustered by
run then seq in one b-tree with no secondary index (docs/decisions.md says why not
`WITHOUT ROWID`). What a row's transcript messages already hold is not stored twice: a
tool result the `tool` message carries, and the calls the `assistant` message carries,
are left out of the body and marked (`"result@"`, `"calls@"`); `event_of` puts them back.
"""

from __future__ import annotations

import sqlite3
from typing import Any, TypeVar

import msgspec
from msgspec.structs import replace

from statechart.errors import CorruptRowError
from statechart.records.codec import decode, decode_messages, encode, root_label
from statechart.records.messages import Message, ToolCall
from statechart.records.record import Record
from statechart.records.run import ROOT_LEVEL, Event, Intent, Run, Step
from statechart.records.spent import ZERO, Spent
from statechart.records.summary import RunSummary

SEQ_BITS = 32
SEQ_MASK = (1 << SEQ_BITS) - 1
USAGE = (
    "steps",
    "model_calls",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "cost_micros",
    "wall_ms",
)
TOTALS = tuple(f"run_{name}" for name in USAGE)
"""The run's cumulative root spending after the event (what listings read live)."""
COLUMNS = (
    "id, time, source, target, trigger, actor, reason, tool, refused, error, "
    f"{', '.join(USAGE)}, intent, key, by, fingerprint, exhausted, edge, closes, span, "
    f"visit, messages, body, intent_state, intent_call, {', '.join(TOTALS)}"
)
READ = (
    "id, time, source, target, trigger, actor, reason, refused, error, "
    f"{', '.join(USAGE)}, intent, key, by, fingerprint, exhausted, edge, span, visit, "
    "messages, body"
)
"""The columns `event_of` reads back."""
_VALUES = ", ".join("?" * (COLUMNS.count(",") + 1))
INSERT_EVENT = f"INSERT INTO event_rows ({COLUMNS}) VALUES ({_VALUES})"
INSERT_IF_HELD = (
    f"INSERT INTO event_rows ({COLUMNS}) SELECT {_VALUES} "
    "WHERE EXISTS (SELECT 1 FROM runs WHERE num = ? AND lease_holder = ?)"
)
"""`INSERT_EVENT` in one statement (its own transaction) when the lease is held (values:
the row, then the run's number and the holder). The store sends it only for the seq after
the last one it wrote or read for the run, so the log stays gapless; an event another
writer put at that seq meanwhile (a person's, written without the lease) fails the row's
primary key."""


class Body(Record, frozen=True):
    """What an event row keeps in its JSON body: the fields with no column of their own.

    A tool result its `tool` message carries, or calls its `assistant` message carries, are
    left out and marked (`result@`, `calls@`); `event_of` puts them back."""

    call: ToolCall | None = None
    calls: tuple[ToolCall, ...] = ()
    result: str | None = None
    patch: dict[str, Any] = {}
    delta: int = 0
    entered: tuple[str, ...] = ()
    exited: tuple[str, ...] = ()
    model: str | None = None
    outcome: str | None = None
    usage_missing: bool = False
    breach: str | None = None
    timeout: float | None = None
    wake: float | None = None
    remembered: dict[str, str] = {}
    scope: str = ""
    outputs: dict[str, dict[str, Any]] = {}
    inputs: dict[str, dict[str, Any]] = {}
    result_at: int = msgspec.field(default=0, name="result@")
    """1 when the result is left to the row's `tool` message."""
    calls_at: int = msgspec.field(default=0, name="calls@")
    """1 when the calls are left to the row's `assistant` message."""


def insert_intent(db: sqlite3.Connection, run_id: str, i: Intent) -> None:
    """Store an intent a run starts with (a fork's): the events record every later one."""
    db.execute(
        "INSERT INTO intent_rows (run_id, call_id, seq, state, tool, call, key) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run_id, i.call.id, i.seq, i.state, i.call.name, encode(i.call).decode(), i.key),
    )


def key_of(num: int, seq: int) -> int:
    """The event row key of run number `num` at `seq`."""
    return (num << SEQ_BITS) | seq


def event_row(step: Step, num: int) -> tuple[Any, ...]:
    """The values of `INSERT_EVENT` for `step`, the event of run number `num`."""
    e, u = step.event, step.event.usage
    messages = encode(step.messages).decode() if step.messages else None
    in_result, in_calls = carried(e, step.messages)
    body = Body(
        call=e.call,
        calls=() if in_calls else e.calls,
        result=None if in_result else e.result,
        patch=e.patch,
        delta=e.delta,
        entered=e.entered,
        exited=e.exited,
        model=e.model,
        outcome=e.outcome,
        usage_missing=e.usage_missing,
        breach=e.breach,
        timeout=e.timeout,
        wake=e.wake,
        remembered=e.remembered,
        scope=e.scope,
        outputs=e.outputs,
        inputs=e.inputs,
        result_at=1 if in_result else 0,
        calls_at=1 if in_calls else 0,
    )
    spent = step.run.ledger.get(ROOT_LEVEL) or ZERO
    opened = step.opened
    return (
        key_of(num, e.seq),
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
        encode(body).decode(),
        opened.state if opened is not None else None,
        encode(opened.call).decode() if opened is not None else None,
        spent.steps,
        spent.model_calls,
        spent.tool_calls,
        spent.input_tokens,
        spent.output_tokens,
        spent.cost_micros,
        spent.wall_ms,
    )


def carried(e: Event, messages: tuple[Message, ...]) -> tuple[bool, bool]:
    """Whether `messages` already hold the event's result, and its calls."""
    in_result = in_calls = False
    for m in messages:
        if (
            e.result is not None
            and e.call is not None
            and m.role == "tool"
            and m.tool_call_id == e.call.id
            and m.content == e.result
        ):
            in_result = True
        elif e.calls and m.role == "assistant" and _same(m.tool_calls, e.calls):
            in_calls = True
    return in_result, in_calls


def _same(a: tuple[ToolCall, ...], b: tuple[ToolCall, ...]) -> bool:
    """Equal calls, by identity first (the reply's own objects, usually)."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


def event_of(run_id: str, row: tuple[Any, ...]) -> Event:
    """The event stored in a row of `READ` columns."""
    key, at, source, target, trigger, actor, reason, refused, error, *rest = row
    intent, key_, by, call_fingerprint, exhausted, edge, span, visit, messages, body = rest[7:]
    seq = key & SEQ_MASK
    where = f"events row of run {run_id} at seq {seq}"
    try:
        if not body.lstrip().startswith("{"):
            raise ValueError("the body is not a JSON object")
        b = decode(Body, body)
        result, calls = b.result, b.calls
        if b.result_at or b.calls_at:
            result, calls = _restore(b, messages)
        if actor not in ACTORS:
            raise ValueError(f"unknown actor {actor!r}")
        texts = (reason, refused, error, intent, key_, by, call_fingerprint, exhausted, edge, span)
        if not (
            type(at) in _NUMBERS
            and type(source) is str
            and type(target) is str
            and type(trigger) is str
            and all(type(n) is int for n in rest[:7])
            and (visit is None or type(visit) is int)
            and all(t is None or type(t) is str for t in texts)
        ):
            raise ValueError(_mistyped(row))
        return Event(
            run_id=run_id,
            seq=seq,
            time=at,
            source=source,
            target=target,
            trigger=trigger,
            actor=actor,
            reason=reason or "",
            usage=Spent(*rest[:7]),
            call=b.call,
            calls=calls,
            result=result,
            refused=refused,
            error=error,
            patch=b.patch,
            visit=visit,
            delta=b.delta,
            fingerprint=call_fingerprint,
            entered=b.entered,
            exited=b.exited,
            exhausted=root_label(exhausted),
            edge=edge,
            intent=intent,
            key=key_,
            by=by,
            span=span,
            model=b.model,
            outcome=b.outcome,
            scope=b.scope,
            outputs=b.outputs,
            inputs=b.inputs,
            usage_missing=b.usage_missing,
            breach=b.breach,
            timeout=b.timeout,
            wake=b.wake,
            remembered=b.remembered,
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise corrupt(where, exc) from None


ACTORS = frozenset(("model", "code", "human", "system"))
_NUMBERS = (float, int)
_READ_NAMES = tuple(c.strip() for c in READ.split(","))


def _mistyped(row: tuple[Any, ...]) -> str:
    """Which column of a `READ` row holds a value of the wrong type (SQLite stores any)."""
    ints = {"id", "visit", *USAGE}
    for name, value in zip(_READ_NAMES, row, strict=True):
        if value is None and name in {"time", "source", "target", "trigger", "actor", *USAGE}:
            return f"column {name} is NULL"
        if name == "time" and type(value) not in _NUMBERS:
            return f"column time holds {type(value).__name__}, not a number"
        if name in ints and value is not None and type(value) is not int:
            return f"column {name} holds {type(value).__name__}, not an integer"
        texts = name not in ints and name not in {"time", "messages", "body"}
        if texts and value is not None and type(value) is not str:
            return f"column {name} holds {type(value).__name__}, not text"
    return "a column holds a value of the wrong type"


def _restore(b: Body, messages: str | None) -> tuple[str | None, tuple[ToolCall, ...]]:
    """Put back what the row's messages carry: the call's result, the reply's calls."""
    stored = decode_messages(messages) if messages else []
    result, calls = b.result, b.calls
    if b.result_at:
        if b.call is None:
            raise KeyError("the body marks a result but names no call")
        found = [m.content for m in stored if m.role == "tool" and m.tool_call_id == b.call.id]
        if not found:
            raise KeyError(f"no tool message answers call {b.call.id}")
        result = found[0]
    if b.calls_at:
        replies = [m.tool_calls for m in stored if m.role == "assistant"]
        if not replies:
            raise KeyError("no assistant message holds the calls")
        calls = replies[0]
    return result, calls


LAST_EVENT = f"e.target, e.id & {SEQ_MASK}, e.time, {', '.join(f'e.{c}' for c in TOTALS)}"
"""The columns of a run's last event a listing line reads (after the runs row's own)."""
LAST_EVENT_JOIN = (
    "LEFT JOIN event_rows e ON e.id = (SELECT max(id) FROM event_rows "
    f"WHERE id BETWEEN r.num << {SEQ_BITS} AND (r.num << {SEQ_BITS}) + {SEQ_MASK})"
)
"""Each runs row `r` joined to its last event `e` (none before its first)."""


def summary_row(row: tuple[Any, ...]) -> RunSummary:
    """A listing line from the runs row and its last event row (see `_summaries`)."""
    run_id, chart, status, state, seq, reason, created, parent, ledger, wake, *last = row
    target, last_seq, at, *totals = last
    where = f"runs row of run {run_id}"
    try:
        if totals[0] is not None and last_seq >= seq:
            spent = Spent(*totals)
        else:  # no event yet, or the run's events predate schema 5: the snapshot is exact
            spent = decode(Spent, ledger) if ledger else ZERO
        return RunSummary(
            run_id=run_id,
            chart=chart,
            status=status,
            state=target if target is not None and last_seq >= seq else state,
            seq=max(seq, last_seq or 0),
            spent=spent,
            reason=reason or "",
            created_at=created or 0.0,
            updated_at=at,
            parent_run=parent,
            wake=float(wake) if wake is not None and status in ("sleeping", "waiting") else None,
        )
    except (ValueError, TypeError) as exc:
        raise corrupt(where, exc) from None


def messages_of(rows: Any, run_id: str) -> list[Message]:
    """The transcript messages stored in `(seq, messages)` rows, in order."""
    out: list[Message] = []
    for seq, text in rows:
        try:
            out.extend(decode_messages(text))
        except (ValueError, TypeError) as exc:
            raise corrupt(f"transcript of run {run_id} at seq {seq}", exc) from None
    return out


def intents_of(rows: Any, closes: Any, run_id: str) -> list[Intent]:
    """Intents from `(call_id, seq, state, call, key)` rows in seq order and the `(seq,
    closes)` of the events that completed them: a close completes the open intent of that
    call id, before any opened at its seq."""
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
            out[n] = replace(out[n], completed=True, completed_seq=seq)


M = TypeVar("M", Run, ToolCall)


def parse(cls: type[M], text: Any, where: str) -> M:
    try:
        return decode(cls, text)
    except (ValueError, TypeError) as exc:
        raise corrupt(where, exc) from None


def corrupt(where: str, exc: Exception) -> CorruptRowError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CorruptRowError(
        f"{where} is corrupt or truncated ({first}); it was changed outside statechart. "
        "Nothing was written; restore the file from a backup or fork the run before that seq"
    )
