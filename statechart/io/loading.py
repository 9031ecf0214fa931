"""Loading a chart by path (`agents/support_triage.py:chart`), as the CLI does.

`agents/` is not an importable package (the name is taken on PyPI), so a chart
file is imported from its path under a module name derived from that path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from statechart.chart.chart import Chart
from statechart.errors import LoadError, StatechartError


def load_chart(target: str) -> tuple[Chart, ModuleType]:
    """The chart `target` names (a `Chart`, or a function returning one) and its module."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise LoadError(f"'{target}' is not PATH.py:NAME; e.g. agents/support_triage.py:chart")
    module = load_module(Path(path))
    found = getattr(module, name, None)
    if found is None:
        raise LoadError(f"{path} has no '{name}'; name the Chart object (e.g. {path}:chart)")
    if callable(found) and not isinstance(found, Chart):
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
