"""The lease heartbeat: one task per event loop renews every lease its drives hold.

A drive joins while it holds a lease and leaves before it releases it. The task renews
each lease every third of its TTL, long model and tool calls included, and ends when no
drive is left (the next one to join starts it again). It is a system task of the event
loop (asyncio's `create_task`, trio's `spawn_system_task`), so a drive costs a
dictionary entry, not a task group of its own (measured: ~6 KiB and ~0.1 ms a drive).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any, Protocol

import anyio
from anyio.lowlevel import RunVar

from statechart.errors import LeaseLostError


class Beating(Protocol):
    """What the heartbeat needs of a drive."""

    due: float
    """When its lease is next to be renewed (monotonic seconds)."""

    @property
    def every(self) -> float: ...

    async def renew(self) -> None: ...


class _Heart:
    def __init__(self) -> None:
        self.drives: dict[int, Beating] = {}
        self.changed = anyio.Event()
        self.running = False

    async def run(self) -> None:
        try:
            while self.drives:
                self.changed = anyio.Event()
                wait = min(d.due for d in self.drives.values()) - time.monotonic()
                if wait > 0:
                    with anyio.move_on_after(wait):
                        await self.changed.wait()
                    continue
                for key, d in list(self.drives.items()):
                    if key in self.drives and time.monotonic() >= d.due:
                        await _renew(self, key, d)
        finally:
            self.running = False


async def _renew(heart: _Heart, key: int, d: Beating) -> None:
    try:
        await d.renew()
    except LeaseLostError:  # its next append says so
        heart.drives.pop(key, None)
    except Exception:  # e.g. the database busy: try again soon, never fail the drive
        d.due = time.monotonic() + d.every / 3


_HEART: RunVar[_Heart] = RunVar("statechart_heart")
_TASKS: set[asyncio.Task[None]] = set()


def join(drive: Beating) -> None:
    """Renew `drive`'s lease from now on, until it leaves."""
    try:
        heart = _HEART.get()
    except LookupError:
        heart = _Heart()
        _HEART.set(heart)
    heart.drives[id(drive)] = drive
    heart.changed.set()
    if not heart.running:
        heart.running = True
        _spawn(heart)


def leave(drive: Beating) -> None:
    """Stop renewing `drive`'s lease."""
    with contextlib.suppress(LookupError):
        _HEART.get().drives.pop(id(drive), None)


def _spawn(heart: _Heart) -> None:
    trio = sys.modules.get("trio")  # imported already if this loop is trio's
    if trio is not None and _in_trio(trio):
        trio.lowlevel.spawn_system_task(heart.run)
        return
    task = asyncio.get_running_loop().create_task(heart.run())
    _TASKS.add(task)  # a task nobody references may be collected mid-run
    task.add_done_callback(_TASKS.discard)


def _in_trio(trio: Any) -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
