"""Shared by the resume tests: a one-state refund chart, refund tools that record their
calls in `CALLS`, and a driver that stops as a killed one would."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from statechart import (
    Budget,
    Chart,
    Edge,
    Run,
    ScriptedModel,
    SQLiteStore,
    State,
    Tool,
    call,
    drive,
    reply,
    start,
    tool,
)

DONE = State("done", kind="terminal")
CALLS: list[tuple[str, Any]] = []
"""(order, idempotency key) of every refund that ran; the `db` fixture clears it."""
FINISH = reply(call("next_state", target="done"))


def pay_chart(refund: Tool, *, steps: int = 20, on_resume: Any = None) -> Chart:
    return Chart(
        "pay",
        budget=Budget(max_steps=steps),
        states=(State("resolve", tools=(refund,), on_resume=on_resume), DONE),
        edges=(Edge("resolve", "done"),),
    )


def refund_tool(retry: str, *, reconcile: Any = None) -> Tool:
    if retry == "keyed":

        async def refund(order: str, idempotency_key: str | None = None) -> str:
            CALLS.append((order, idempotency_key))
            return f"refunded {order}"

        return tool(retry="keyed")(refund)

    async def plain(order: str) -> str:
        CALLS.append((order, None))
        return f"refunded {order}"

    return tool(retry=retry, reconcile=reconcile, name="refund")(plain)  # type: ignore[arg-type]


def never_refund() -> Tool:
    """A retry='never' refund that records its call in `CALLS`."""

    async def refund(order: str) -> str:
        CALLS.append((order, None))
        return f"refunded {order}"

    return tool(retry="never")(refund)


async def interrupted(
    chart: Chart, path: Path, replies: list[Any], stop_at: int, holder: str = "killed-driver"
) -> Run:
    """Drive a run "r1" until event `stop_at`, then leave it as a killed driver would: the
    lease held by `holder` and never released, so the next driver takes over."""
    store = SQLiteStore(path)
    model = ScriptedModel(replies)
    run = await start(chart, store=store, model=model, run_id="r1")
    async with contextlib.aclosing(drive(chart, run, store=store, model=model)) as steps:
        async for record in steps:
            if record.event.seq == stop_at:
                break
    lease = await store.acquire("r1", holder, ttl=60)
    await store.release(lease, clean=False)
    last = (await store.load("r1")).snapshot
    store.close()
    return last
