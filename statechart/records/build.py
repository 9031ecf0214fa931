"""Records copied and built on the hot path without validation (only from values the
runtime built itself; everything from outside is validated first)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def build(cls: type[M], values: dict[str, Any]) -> M:
    """A record from runtime-built `values`, defaults filled in, unvalidated (hot path only)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        fields = cls.model_fields.items()
        found = _DEFAULTS[cls] = (
            tuple(cls.model_fields),
            {n: f.default for n, f in fields if not f.is_required() and f.default_factory is None},
            {n: f.default_factory for n, f in fields if f.default_factory is not None},
        )
    names, defaults, factories = found
    data = {
        n: values[n] if n in values else defaults[n] if n in defaults else factories[n]()
        for n in names
    }
    new = cls.__new__(cls)
    object.__setattr__(new, "__dict__", data)
    object.__setattr__(new, "__pydantic_fields_set__", fields_set(values.keys()))
    object.__setattr__(new, "__pydantic_extra__", None)
    object.__setattr__(new, "__pydantic_private__", None)
    return new


_DEFAULTS: dict[type[BaseModel], tuple[tuple[str, ...], dict[str, Any], dict[str, Any]]] = {}
_FIELD_SETS: dict[frozenset[str], set[str]] = {}


def fields_set(names: Any) -> set[str]:
    """One shared set per distinct set of names. Records are frozen, so the set pydantic
    keeps per record (which fields were given) is never changed in place (`model_copy`
    copies it first); sharing it saves a set per record, a good part of a run's memory."""
    key = frozenset(names)
    found = _FIELD_SETS.get(key)
    if found is None:
        if len(_FIELD_SETS) >= 4096:  # bounded: records built from outside vary freely
            return set(key)
        found = _FIELD_SETS[key] = set(key)
    return found


def evolve(model: M, update: dict[str, Any]) -> M:
    """A copy of a frozen record with `update` applied, unvalidated (the hot-path `model_copy`).

    Only for values the runtime built itself; everything from outside is validated first.
    """
    new = model.__class__.__new__(model.__class__)
    fields = dict(model.__dict__)
    fields.update(update)
    object.__setattr__(new, "__dict__", fields)
    given = model.__pydantic_fields_set__
    if not update.keys() <= given:
        given = fields_set(given | update.keys())
    object.__setattr__(new, "__pydantic_fields_set__", given)
    object.__setattr__(new, "__pydantic_extra__", None)
    object.__setattr__(new, "__pydantic_private__", None)
    return new
