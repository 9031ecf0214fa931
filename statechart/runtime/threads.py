"""Sync user code (a `def` tool, handler, reconcile or resume hook) runs in a worker thread.

A function that blocks on the event loop's thread stops every other task of the loop,
the lease heartbeat included: another process may then take the run over and run the
same call a second time. So the driver hands sync functions to `anyio.to_thread`, under
one capacity limiter per event loop (`set_thread_limit`, or `STATECHART_THREADS`, default
16). A cancelled or timed-out call abandons its thread: the driver goes on at once, and
the function's own return is ignored when it comes.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from anyio.lowlevel import RunVar

from statechart.chart.tools import asynchronous

DEFAULT_THREADS = 16
_limit = int(os.environ.get("STATECHART_THREADS") or DEFAULT_THREADS)
_limiter: RunVar[anyio.CapacityLimiter] = RunVar("statechart_threads")


def set_thread_limit(threads: int) -> None:
    """How many sync tools and handlers may run at once in one event loop (default 16).

    Called inside a running event loop, it also resizes that loop's limiter at once.

    Example:
        ```python
        from statechart import set_thread_limit

        set_thread_limit(32)  # before (or while) driving many runs whose tools block
        ```
    """
    global _limit
    if threads < 1:
        raise ValueError(f"set_thread_limit({threads}): give at least one thread")
    _limit = threads
    with contextlib.suppress(LookupError, RuntimeError):  # no loop, or no limiter made yet
        _limiter.get().total_tokens = threads


def limiter() -> anyio.CapacityLimiter:
    """This event loop's limiter of threads for sync user code."""
    try:
        return _limiter.get()
    except LookupError:
        made = anyio.CapacityLimiter(_limit)
        _limiter.set(made)
        return made


async def call(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, awaited: in a worker thread when `fn` may block, else on the
    loop. An awaitable a sync function returns is awaited on the loop."""
    if not asynchronous(fn):
        out = await anyio.to_thread.run_sync(
            partial(fn, *args, **kwargs), limiter=limiter(), abandon_on_cancel=True
        )
    else:
        out = fn(*args, **kwargs)
    if inspect.isawaitable(out):
        out = await out
    return out
