"""A child process for the cross-process approval tests: one command per process.

    python -m tests.support.approval_proc start|approve|reject|cancel|resume DB [JSON]

The `send_reply` tool appends what it sends to the file named by `SENT_FILE`.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

from statechart import (
    Budget,
    Chart,
    Edge,
    ScriptedModel,
    SQLiteStore,
    State,
    approve,
    call,
    cancel,
    reject,
    reply,
    resume,
    run_to_end,
    start,
    tool,
)


@tool(retry="never", needs_approval=True)
async def send_reply(text: str) -> str:
    """Send the reply to the customer."""
    with open(os.environ["SENT_FILE"], "a") as f:
        f.write(text + "\n")
    return f"sent: {text}"


def chart() -> Chart:
    return Chart(
        "mail",
        budget=Budget(max_steps=20),
        states=(State("send", tools=(send_reply,)), State("done", kind="terminal")),
        edges=(Edge("send", "done"),),
    )


async def main(command: str, path: str, arg: str) -> dict[str, object]:
    c, store = chart(), SQLiteStore(path)
    if command == "start":
        model = ScriptedModel([reply(call("send_reply", "s1", text="draft"))])
        run = await start(c, store=store, model=model, run_id="r1")
        run = await run_to_end(c, run, store=store, model=model)
    elif command == "approve":
        run = (
            await approve(
                c, "r1", store=store, by="lead", note="ok", edits=json.loads(arg) if arg else None
            )
        ).run
    elif command == "reject":
        run = (await reject(c, "r1", store=store, by="lead", reason=arg)).run
    elif command == "cancel":
        run = (await cancel(c, "r1", store=store, reason=arg, by="ops")).run
    else:
        run = await resume(
            c, "r1", store=store, model=ScriptedModel([reply(call("next_state", target="done"))])
        )
    store.close()
    return {"state": run.state, "status": run.status, "reason": run.reason, "pid": os.getpid()}


if __name__ == "__main__":
    command, path, *rest = sys.argv[1:]
    print(json.dumps(anyio.run(main, command, path, rest[0] if rest else "")))
