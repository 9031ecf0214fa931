"""The base of every record: a frozen `msgspec` struct that encodes without its defaults.

Records are data the engine builds and the stores keep: immutable, compared by value,
untracked by the garbage collector (a record never holds a cycle) and built without
validation (what comes from outside is validated where it enters: by the stores'
decoders, the chart's pydantic types and the tools' argument models).
"""

from __future__ import annotations

from msgspec import Struct


class Record(Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A frozen, keyword-built, GC-untracked struct whose JSON leaves out default values."""
