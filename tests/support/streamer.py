"""A driver for the mid-stream crash test: starts run "streamed" of the live agent on
the SQLite file DB and drives it with a 1-second lease, printing one JSON line per live
event (kind, seq, call, call_id) as it happens, so the test can kill it mid-stream.

    python -m tests.support.streamer DB
"""

from __future__ import annotations

import json
import sys

import anyio

from statechart import CallStarted, LiveEvent, SQLiteStore, Step, run_to_end, start
from tests.support.live_agent import chart, demo_model


def said(event: LiveEvent) -> None:
    line: dict[str, object] = {"kind": event.kind}
    if isinstance(event, Step):
        line["seq"] = event.event.seq
    elif hasattr(event, "seq"):
        line["seq"] = event.seq
        line["call_id"] = getattr(event, "call_id", "")
    if isinstance(event, CallStarted):
        line["call"] = event.call
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(db: str) -> None:
    store = SQLiteStore(db)
    model = demo_model()
    run = await start(chart, store=store, model=model, run_id="streamed")
    await run_to_end(chart, run, store=store, model=model, lease_ttl=1, on=said)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
