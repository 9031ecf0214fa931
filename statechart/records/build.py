"""Records copied and built on the hot path without validation (only from values the
runtime built itself; everything from outside is validated first)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def build(cls: type[M], values: dict[str, Any]) -> M:
    """A record from runtime-built `values`, defaults filled in, unvalidated (hot path only)."""
    found = _TEMPLATES.get(cls)
    if found is None:
        found = _TEMPLATES[cls] = _template(cls)
    template, factories = found
    data = template.copy()
    data.update(values)
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    new = _new(cls)
    _set(new, "__dict__", data)
    _set(new, "__pydantic_fields_set__", fields_set(values.keys()))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def _template(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """Every field of `cls` in order, with its default (None where it must be given or is
    made by a factory), and the factories."""
    template = {n: None if f.is_required() else f.default for n, f in cls.model_fields.items()}
    factories = tuple(
        (n, f.default_factory) for n, f in cls.model_fields.items() if f.default_factory
    )
    return template, factories


_TEMPLATES: dict[type[BaseModel], tuple[dict[str, Any], tuple[tuple[str, Any], ...]]] = {}
_new = object.__new__
_set = object.__setattr__
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


_WIDENED: dict[tuple[int, frozenset[str]], tuple[set[str], set[str]]] = {}


def _widened(given: set[str], names: Any) -> set[str]:
    """`fields_set(given | names)`, remembered per shared `given` set (kept alive with its
    entry, so its id is not reused) for the few name sets the runtime adds."""
    key = (id(given), frozenset(names))
    found = _WIDENED.get(key)
    if found is not None and found[0] is given:
        return found[1]
    wider = fields_set(given | names)
    if len(_WIDENED) < 4096:
        _WIDENED[key] = (given, wider)
    return wider


def evolve(model: M, update: dict[str, Any]) -> M:
    """A copy of a frozen record with `update` applied, unvalidated (the hot-path `model_copy`).

    Only for values the runtime built itself; everything from outside is validated first.
    """
    new = _new(model.__class__)
    fields = model.__dict__.copy()
    fields.update(update)
    _set(new, "__dict__", fields)
    given = model.__pydantic_fields_set__
    if not update.keys() <= given:
        given = _widened(given, update.keys())
    _set(new, "__pydantic_fields_set__", given)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def assemble(cls: type[T], fields: dict[str, Any]) -> T:
    """A frozen dataclass from every one of its fields, without the `object.__setattr__`
    per field its `__init__` makes (hot path only; `fields` must name them all)."""
    new: T = _new(cls)
    _set(new, "__dict__", fields)
    return new
