"""Fail-points: named places where a crash test can make the process kill itself.

Set `STATECHART_FAILPOINT=name` (or `name:N` for the Nth time it is reached)
before the process starts; reaching it sends SIGKILL to the process itself, so
nothing after it runs: no `finally`, no flush. Unset, each check costs one
comparison. Points: `intent.recorded` (an event that records an intent has
committed; the tool has not started), `tool.returned` (the tool's side effect is
done; its result is not stored), `store.append.uncommitted` (inside the append
transaction, before COMMIT), `cli.run.chart_saved` (`statechart run` stored where
the chart came from; the run is not created yet).
"""

from __future__ import annotations

import os
import signal

_ARMED: list[str] = []
_AT = 1
_SEEN = 0


def _arm(spec: str) -> None:
    """Arm `name[:N]`, or disarm with an empty spec; the count starts again."""
    global _AT, _SEEN
    name, _, count = spec.partition(":")
    _ARMED[:] = [name] if name else []
    _AT = int(count) if count.isdigit() else 1
    _SEEN = 0


_arm(os.environ.get("STATECHART_FAILPOINT", ""))


def hit(name: str) -> None:
    """Kill this process with SIGKILL if `name` is the armed point and its count is reached."""
    global _SEEN
    if not _ARMED or _ARMED[0] != name:
        return
    _SEEN += 1
    if _SEEN >= _AT:
        os.kill(os.getpid(), signal.SIGKILL)
