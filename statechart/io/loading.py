"""Loading a chart by path (`agents/support_triage.py:chart`), as the CLI does.

`agents/` is not an importable package (the name is taken on PyPI), so a chart
file is imported from its path under a module name derived from that path.

Installed packages register charts under the `statechart.charts` entry-point group
(`registered_charts()`); a target without a `:` is one of those names.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType

from statechart.chart.chart import Chart
from statechart.errors import LoadError, SourceRefusedError, StatechartError


def load_chart(target: str, *, builders: bool = True) -> tuple[Chart, ModuleType]:
    """The chart `target` names (a `Chart`, or a function returning one) and its module.

    `target` is `PATH.py:NAME` (a file, imported by path), `MODULE:NAME` (an importable
    module, e.g. `myapp.agents:chart`) or, without a `:`, the name an installed package
    registered the chart under (`registered_charts()`). With `builders=False` only a
    `Chart` object is taken, never a function called (a name read from a database)."""
    if ":" not in target:
        return load_chart(registered(target).value, builders=builders)
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise LoadError(
            f"'{target}' is not PATH.py:NAME or MODULE:NAME; e.g. agents/support_triage.py:chart"
        )
    module = load_module(Path(path)) if _is_path(path) else _import(path)
    found = getattr(module, name, None)
    if found is None:
        raise LoadError(f"{path} has no '{name}'; name the Chart object (e.g. {path}:chart)")
    if callable(found) and not isinstance(found, Chart):
        if not builders:
            raise SourceRefusedError(
                f"{target} is a function, not a Chart; a worker calls no function a stored "
                "chart source names: name the Chart object"
            )
        required = [
            p
            for p in inspect.signature(found).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            raise LoadError(
                f"{target} is a function that needs arguments; name a Chart or a "
                "function that builds one with none"
            )
        found = found()
    if not isinstance(found, Chart):
        raise LoadError(f"{target} is a {type(found).__name__}, not a Chart")
    return found, module


def load_module(path: Path) -> ModuleType:
    """Import a Python file by path, once per process."""
    resolved = path.resolve()
    if not resolved.is_file():
        raise LoadError(f"no file {path}; give the path of a Python file")
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"statechart_agent_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except StatechartError:
        del sys.modules[name]
        raise
    except Exception as exc:
        del sys.modules[name]
        raise LoadError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _is_path(text: str) -> bool:
    return text.endswith(".py") or "/" in text or Path(text).is_file()


def _import(name: str) -> ModuleType:
    """Import `name` as `python -m` would: the working directory is on the path."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except StatechartError:
        raise
    except Exception as exc:
        raise LoadError(
            f"cannot import module '{name}' ({type(exc).__name__}: {exc}); give PATH.py:NAME, "
            "or run from where the module is importable"
        ) from None


GROUP = "statechart.charts"
"""The entry-point group installed packages register charts under."""


def registered_charts() -> list[EntryPoint]:
    """The charts installed packages register, by name: in a package's `pyproject.toml`,
    `[project.entry-points."statechart.charts"]` then `NAME = "MODULE:ATTR"` (a `Chart`
    or a function with no arguments that builds one)."""
    return sorted(entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value))


def registered(name: str) -> EntryPoint:
    """The entry point registered as `name`; a LoadError if none or two disagree."""
    found = {ep.value: ep for ep in registered_charts() if ep.name == name}
    if not found:
        names = ", ".join(sorted({ep.name for ep in registered_charts()})) or "none"
        raise LoadError(
            f"'{name}' is not PATH.py:NAME or MODULE:NAME, nor a chart an installed package "
            f"registers (registered: {names}; see `statechart charts`); e.g. "
            "agents/support_triage.py:chart"
        )
    if len(found) > 1:
        raise LoadError(
            f"chart name '{name}' is registered twice, as {' and '.join(sorted(found))}; "
            "give the one you mean as MODULE:NAME"
        )
    (ep,) = found.values()
    if ":" not in ep.value:
        raise LoadError(
            f"registered chart '{name}' names '{ep.value}', not MODULE:ATTR; the package "
            f'that registers it must give e.g. {name} = "{ep.value}:chart"'
        )
    return ep


def chart_source(target: str) -> str:
    """`target` as a source that loads from any working directory: a path made absolute,
    a registered name as the `MODULE:NAME` it stands for."""
    if ":" not in target:
        return registered(target).value
    path, _, name = target.rpartition(":")
    return f"{Path(path).resolve()}:{name}" if _is_path(path) else target


_FOUND: dict[str, str | None] = {}


def source_of(chart: Chart) -> str | None:
    """Where a chart defined at module level can be loaded again (`PATH.py:NAME` for a
    script or a file loaded by path, `MODULE:NAME` for an importable module), or None
    (a chart built inside a function). Searched once per chart version per process."""
    if chart.version in _FOUND:
        return _FOUND[chart.version]
    try:
        found = next((w for w in _homes(chart) if w is not None), None)
    except Exception:  # a module attribute that breaks on inspection: best effort only
        found = None
    _FOUND[chart.version] = found
    return found


def _homes(chart: Chart) -> Iterator[str | None]:
    for module in list(sys.modules.values()):
        attrs = getattr(module, "__dict__", None)
        for attr, value in list(attrs.items()) if isinstance(attrs, dict) else ():
            kind = type(value)  # not isinstance: a lazy proxy's __class__ may raise
            same = issubclass(kind, Chart) and (value is chart or value.version == chart.version)
            if same and not attr.startswith("_"):
                yield _where(module, attr)


def _where(module: ModuleType, attr: str) -> str | None:
    name = module.__name__
    file = getattr(module, "__file__", None)
    if name == "__main__" or name.startswith("statechart_agent_"):
        return f"{Path(file).resolve()}:{attr}" if file else None
    return f"{name}:{attr}"


def trusted_target(source: str, agents: Path | None) -> str:
    """The chart target a stored `source` may be loaded from by a worker, or
    `SourceRefusedError`: a `MODULE:NAME` only if an installed package registers it, a
    `PATH.py:NAME` only inside `agents` (an absolute path from another machine is looked
    for there by its file name). A database row must never make a worker import code."""
    path, sep, name = source.rpartition(":")
    if not sep or not path or not name:
        raise SourceRefusedError(
            f"stored chart source {source!r} is not PATH.py:NAME or MODULE:NAME"
        )
    if not _is_path(path):
        if source in {ep.value for ep in registered_charts()}:
            return source
        raise SourceRefusedError(
            f"stored chart source {source!r} is a module no installed package registers "
            f"under the {GROUP!r} entry points; a worker imports only registered modules "
            "and files in its --agents folder"
        )
    if agents is None:
        raise SourceRefusedError(
            f"stored chart source {source!r} is a file, and this worker has no --agents "
            "folder to find it in; start it with --agents DIR"
        )
    root = agents.resolve()
    given = Path(path)
    candidates = [given if given.is_absolute() else root / given]
    if given.is_absolute():
        candidates.append(root / given.name)
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_relative_to(root) and resolved.is_file():
            return f"{resolved}:{name}"
    raise SourceRefusedError(
        f"stored chart source {source!r} is not a file in the --agents folder "
        f"{root}; chart files are loaded only from there"
    )


def load_trusted(source: str, agents: Path | None) -> tuple[Chart, ModuleType]:
    """The chart a stored `source` names, loaded only as `trusted_target` allows: a function
    is called only when an installed package registers that very source."""
    target = trusted_target(source, agents)
    path = target.rpartition(":")[0]
    return load_chart(target, builders=not _is_path(path))


def builds_by_function(target: str, module: ModuleType) -> bool:
    """Whether a `PATH.py:NAME` target names a function that builds its chart (which a
    worker will not call: it takes only `Chart` objects from files)."""
    path, _, name = target.rpartition(":")
    return bool(path) and _is_path(path) and not isinstance(getattr(module, name, None), Chart)
