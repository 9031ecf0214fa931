"""Records to JSON and back: one encoder for every store, typed decoders that validate.

Encoding leaves default values out (the rows stay small); decoding checks every field's
type, so a corrupt row is refused where it is read. Records written by 0.1 (pydantic)
decode to the same values: the JSON shape did not change. Two names written before the
root level was named (`""` in a ledger, `:kind` in an exhaustion label) read as `root`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from statechart.records.messages import Message, Reply, ToolCall
from statechart.records.record import Record
from statechart.records.run import ROOT_LEVEL, Event, Intent, Run
from statechart.records.spent import Spent

R = TypeVar("R", bound=Record)

encode = msgspec.json.Encoder().encode
"""A record (or any JSON value holding records) as compact JSON bytes, defaults left out."""

_RUN = msgspec.json.Decoder(Run)
_EVENT = msgspec.json.Decoder(Event)
_MESSAGES = msgspec.json.Decoder(list[Message])
_REPLY = msgspec.json.Decoder(Reply, strict=False)
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {
    Run: _RUN,
    Event: _EVENT,
    ToolCall: msgspec.json.Decoder(ToolCall),
    Spent: msgspec.json.Decoder(Spent),
    Intent: msgspec.json.Decoder(Intent),
    Message: msgspec.json.Decoder(Message),
}


def decode(cls: type[R], text: str | bytes) -> R:
    """A record of `cls` from its JSON, every field's type checked (`msgspec.ValidationError`,
    a `ValueError`, when one is wrong)."""
    found = _DECODERS.get(cls)
    if found is None:
        found = _DECODERS[cls] = msgspec.json.Decoder(cls)
    record: R = found.decode(text)
    return _legacy(cls, record)


def decode_messages(text: str | bytes) -> list[Message]:
    """Transcript messages from a JSON list of them."""
    return _MESSAGES.decode(text)


def convert(cls: type[R], value: Any) -> R:
    """A record of `cls` from JSON-ready values (dicts, lists, ...), every field checked."""
    return _legacy(cls, msgspec.convert(value, cls))


def checked_reply(value: Any) -> Any:
    """A model's `Reply` with every field checked, and coerced as 0.1's pydantic records
    coerced them (whole floats and numeric strings to ints, dicts to calls, lists to
    tuples); raises `msgspec.ValidationError` naming the field that does not fit. A value
    that is not a `Reply` is returned as it is: the engine refuses it."""
    if not isinstance(value, Reply):
        return value
    return _REPLY.decode(encode(value))  # through JSON: cheaper than `convert` here


def to_dict(record: Record) -> dict[str, Any]:
    """Every field of `record`, defaults included, as JSON-ready values (tuples as lists):
    what 0.1's `record.model_dump(mode="json")` gave."""
    out: dict[str, Any] = {name: _plain(getattr(record, name)) for name in record.__struct_fields__}
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return to_dict(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return msgspec.to_builtins(value)


def _legacy(cls: type[R], record: R) -> R:
    """`record` with the names 0.1 wrote before the root level was named read as `root`."""
    if cls is Run:
        return _root_named(record)  # type: ignore[arg-type, return-value]
    if cls is Event:
        return _root_exhausted(record)  # type: ignore[arg-type, return-value]
    return record


def root_label(exhausted: str | None) -> str | None:
    """An exhaustion label, `:steps` (stored before the root level was named) as `root:steps`."""
    if exhausted is None or not exhausted.startswith(":"):
        return exhausted
    return ROOT_LEVEL + exhausted


def _root_named(run: Run) -> Run:
    """A ledger stored before the root level was named `root` (key `""`) reads as named."""
    if "" not in run.ledger:
        return run
    ledger = {(k or ROOT_LEVEL): v for k, v in run.ledger.items()}
    return msgspec.structs.replace(run, ledger=ledger)


def _root_exhausted(event: Event) -> Event:
    """`:steps`, as stored before the root level was named, reads as `root:steps`."""
    label = root_label(event.exhausted)
    return event if label == event.exhausted else msgspec.structs.replace(event, exhausted=label)
