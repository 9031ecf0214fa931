"""Models by spec: how `resume` finds the model a stored run recorded.

A run stores its model's `spec` (`"openai:gpt-4o"`, `"demo:support_triage"`).
`register(prefix, factory)` teaches this process to build models for specs
starting with `prefix:` (or equal to it); `from_spec` builds one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from statechart.errors import ModelError
from statechart.models.base import Model

ModelFactory = Callable[[str], Model]
"""Builds a model from its full spec."""


def _adapter(module: str) -> ModelFactory:
    """A factory that imports an adapter module (and its SDK) only when used."""

    def build(spec: str) -> Model:
        found: Model = importlib.import_module(f"{__package__}.{module}").from_spec(spec)
        return found

    return build


_FACTORIES: dict[str, ModelFactory] = {
    "openai": _adapter("openai"),
    "anthropic": _adapter("anthropic"),
}


def register(prefix: str, factory: ModelFactory) -> None:
    """Build models for specs `prefix` and `prefix:...` with `factory`."""
    _FACTORIES[prefix] = factory


def model_name(spec: str, provider: str) -> str:
    """The model name of a `provider:MODEL` spec; `ModelError` when it names none."""
    name = spec.split(":", 1)[1] if ":" in spec else ""
    if not name:
        raise ModelError(f"model spec '{spec}' names no model; use {provider}:MODEL")
    return name


def from_spec(spec: str, run_id: str = "") -> Model:
    """The model for `spec`; `ModelError` naming the spec when none is registered."""
    factory = _FACTORIES.get(spec) or _FACTORIES.get(spec.split(":", 1)[0])
    if factory is None:
        whose = f"run {run_id} was driven by" if run_id else "no factory for"
        raise ModelError(
            f"{whose} model '{spec}', and this process cannot build it: pass model= to "
            "resume, or register a factory for it with statechart.models.register"
        )
    return factory(spec)
