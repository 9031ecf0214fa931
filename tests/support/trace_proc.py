"""A child process for the tracing tests: one scenario per process, spans exported over
OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` (the test's receiver).

    python -m tests.support.trace_proc SCENARIO DB [--no-configure] [--content] [--backend trio]
                               [--service NAME]

Scenarios (run ids are fixed, so later processes find the run):

- ``nested``: the three-level `workflow()` chart of tests/engine/test_nesting.py, run "r1" from
  start to done in this process: drive to the approval wait, approve, resume.
- ``nested-start`` / ``nested-approve`` / ``nested-resume``: the same three steps, one per
  process.
- ``nested-stop``: start "r1" and stop driving after event 2 (as a process that exits);
  ``nested-continue`` resumes it until it waits for approval.
- ``gate``: a guard refuses `next_state`, then the tool-call budget runs out.
- ``content``: one tool call with arguments and a result, then done.
- ``streamed``: the same run watched (`on=`): the model's replies stream.
- ``errors``: a failing tool (run "tool"), a failing model ("model"), a failing code-state
  handler ("handler").
- ``parallel``: the three-region desk of tests/support/parallel.py, run to done, its
  lookups meeting at a barrier only three concurrent calls pass.
- ``rebuilt``: a fresh one-state chart per run (runs "b5", "b6", ...: `max_steps` is the
  number), each dropped after its run, until a new chart's root budget level lands at the
  address of a dropped one (as in a server that builds its chart per request).

Prints one JSON object: each run's final state, stored trace context and events.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
from typing import Any

import anyio
from pydantic import BaseModel

from statechart import (
    Budget,
    Chart,
    Decision,
    Edge,
    Facts,
    FunctionModel,
    Model,
    Request,
    Retry,
    Run,
    ScriptedModel,
    SQLiteStore,
    State,
    Usage,
    approve,
    call,
    drive,
    reply,
    resume,
    run_to_end,
    start,
    tool,
    tracing,
)
from statechart.engine import compiled
from tests.engine.test_nesting import workflow

SPEC = "acme:tiny-1"
"""The model spec of every run: provider `acme`, model `tiny-1`."""
U = Usage(input_tokens=10, output_tokens=5)
DONE = State("done", kind="terminal")


class Desk(BaseModel):
    ok: bool = False


@tool(retry="safe", repeatable=True)
async def lookup(email: str) -> str:
    """Find a customer's account by email."""
    if not email:
        raise ValueError("no email given")
    return f"account 42 for {email}"


def needs_ok(f: Facts) -> str | None:
    return None if getattr(f.context, "ok", False) else "ok is not set"


def desk(tool_calls: int) -> Chart:
    """One model state with `lookup`; leaving it needs `ok`; `tool_calls` caps the tools."""
    return Chart(
        "desk",
        context=Desk,
        budget=Budget(max_steps=20, max_tool_calls=tool_calls),
        states=(State("work", tools=(lookup,), writes=("ok",)), DONE),
        edges=(Edge("work", "done", guard=needs_ok),),
    )


FLAKY_TRIES: list[str] = []


@tool(retry="safe", retries=Retry(attempts=2, initial=0.01, jitter=0))
async def flaky(email: str) -> str:
    """Find a customer's account; the first attempt fails."""
    FLAKY_TRIES.append(email)
    if len(FLAKY_TRIES) == 1:
        raise ConnectionError("accounts are down")
    return f"account 42 for {email}"


def retried() -> Chart:
    return Chart(
        "retried",
        budget=Budget(max_steps=20),
        states=(State("work", tools=(flaky,), instructions="Look it up."), DONE),
        edges=(Edge("work", "done"),),
    )


async def broken(ctx: Any) -> Decision:
    raise ValueError("handler broke")


def coded() -> Chart:
    return Chart(
        "coded",
        budget=Budget(max_steps=5),
        states=(State("check", kind="code", handler=broken), DONE),
        edges=(Edge("check", "done"),),
    )


def scripted(*replies: Any) -> ScriptedModel:
    return ScriptedModel(list(replies), spec=SPEC)


def timing_out(request: Request) -> Any:
    raise TimeoutError("provider timed out")


async def summary(store: SQLiteStore, run: Run) -> dict[str, Any]:
    events = await store.events(run.run_id)
    return {
        "state": run.state,
        "status": run.status,
        "trace": run.trace,
        "events": [
            {
                "seq": e.seq,
                "span": e.span,
                "source": e.source,
                "target": e.target,
                "trigger": e.trigger,
                "actor": e.actor,
                "error": e.error,
            }
            for e in events
        ],
    }


async def go(
    chart: Chart, store: SQLiteStore, model: Model, run_id: str, *, watched: bool = False
) -> Run:
    run = await start(chart, store=store, model=model, run_id=run_id)
    seen: list[Any] = []
    return await run_to_end(
        chart, run, store=store, model=model, on=seen.append if watched else None
    )


NESTED_FIRST = (
    reply(call("dig", "d1", q="1"), usage=U),
    reply(call("buy", "b1", item="archive"), usage=U),
)
NESTED_LAST = (
    reply(call("next_state", "n1", target="done", notes="found"), usage=U),
    reply(call("next_state", "n2", target="done"), usage=U),
)


async def nested(store: SQLiteStore, step: str) -> dict[str, Run]:
    c = workflow()
    if step in ("nested", "nested-start"):
        run = await go(c, store, scripted(*NESTED_FIRST), "r1")
        if step == "nested-start":
            return {"r1": run}
    if step in ("nested", "nested-approve"):
        run = (await approve(c, "r1", store=store, by="lead")).run
        if step == "nested-approve":
            return {"r1": run}
    if step == "nested-stop":
        model = scripted(*NESTED_FIRST)
        run = await start(c, store=store, model=model, run_id="r1")
        async with contextlib.aclosing(drive(c, run, store=store, model=model)) as steps:
            async for record in steps:
                if record.event.seq == 2:
                    break
        return {"r1": (await store.load("r1")).snapshot}
    if step == "nested-continue":
        return {"r1": await resume(c, "r1", store=store, model=scripted(*NESTED_FIRST[1:]))}
    return {"r1": await resume(c, "r1", store=store, model=scripted(*NESTED_LAST))}


async def rebuilt(store: SQLiteStore) -> dict[str, Run]:
    runs: dict[str, Run] = {}
    seen: set[int] = set()
    for steps in range(5, 2000):
        c = Chart(
            "rebuilt",
            budget=Budget(max_steps=steps),
            states=(State("work", instructions="Finish."), DONE),
            edges=(Edge("work", "done"),),
        )
        model = scripted(reply(call("next_state", "n1", target="done")))
        runs[f"b{steps}"] = await go(c, store, model, f"b{steps}")
        level = id(compiled(c).levels["root"])
        del c
        gc.collect()
        if level in seen:
            break
        seen.add(level)
    return runs


class Outer(BaseModel):
    customer: str = "alice@example.com"
    summary: str | None = None


class Inner(BaseModel):
    who: str
    notes: str | None = None


def ported() -> Chart:
    """A sub-chart on a context of its own: its state span may carry its input."""

    def inner() -> Chart:
        return Chart(
            "inner",
            states=(State("note", writes=("notes",), instructions="Note."), DONE),
            edges=(Edge("note", "done"),),
            context=Inner,
        )

    return Chart(
        "ported",
        states=(
            State(
                "look",
                kind="chart",
                chart=inner,
                input={"who": "customer"},
                output={"summary": "notes"},
                exits={"done": "done"},
            ),
            DONE,
        ),
        context=Outer,
        budget=Budget(max_steps=10),
    )


async def scenario(name: str, store: SQLiteStore) -> dict[str, Run]:
    if name == "ported":
        model = scripted(reply(call("next_state", "n1", target="done", notes="ok"), usage=U))
        return {"ported": await go(ported(), store, model, "ported")}
    if name.startswith("nested"):
        return await nested(store, name)
    if name == "rebuilt":
        return await rebuilt(store)
    if name == "gate":
        model = scripted(
            reply(call("next_state", "n1", target="done")),
            reply(call("lookup", "l1", email="a@example.com")),
            reply(call("lookup", "l2", email="b@example.com")),
        )
        return {"gate": await go(desk(1), store, model, "gate")}
    if name in ("content", "streamed"):
        model = scripted(
            reply(
                call("lookup", "l1", email="alice@example.com"),
                content="Looking." if name == "streamed" else "",
                usage=U,
            ),
            reply(call("next_state", "n1", target="done", ok=True), usage=U),
        )
        return {name: await go(desk(5), store, model, name, watched=name == "streamed")}
    if name == "retried":
        model = scripted(
            reply(call("flaky", "f1", email="a@example.com")),
            reply(call("next_state", "n1", target="done")),
        )
        return {"retried": await go(retried(), store, model, "retried")}
    if name == "errors":
        failing_tool = scripted(
            reply(call("lookup", "l1", email="")),
            reply(call("next_state", "n1", target="done", ok=True)),
        )
        return {
            "tool": await go(desk(5), store, failing_tool, "tool"),
            "model": await go(desk(5), store, FunctionModel(timing_out, spec=SPEC), "model"),
            "handler": await go(coded(), store, scripted(), "handler"),
        }
    if name == "parallel":
        import threading

        from tests.support.parallel import desk as three_regions
        from tests.support.parallel import policy

        together = threading.Barrier(3, timeout=10)

        @tool(retry="safe", name="lookup", repeatable=True)
        def lookup_together(query: str) -> str:
            """Look a query up: passes only with the three regions' calls in flight at once."""
            together.wait()
            return "met"

        chart = three_regions(names=("web", "papers", "people"), tools=(lookup_together,))
        return {"parallel": await go(chart, store, policy(lookups=1), "parallel")}
    raise SystemExit(f"unknown scenario {name!r}")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    provider = None
    if not args.no_configure:
        provider = tracing.configure(
            service_name=args.service,
            exporter="otlp",
            batch=False,
            content=True if args.content else None,
        )
    store = SQLiteStore(args.db)
    try:
        runs = await scenario(args.scenario, store)
        out = {name: await summary(store, run) for name, run in runs.items()}
    finally:
        store.close()
        if provider is not None:
            provider.shutdown()
    return {"pid": os.getpid(), "capture_content": tracing.capture_content, "runs": out}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("db")
    parser.add_argument(
        "--no-configure", action="store_true", help="never call tracing.configure (no SDK provider)"
    )
    parser.add_argument("--content", action="store_true", help="configure(content=True)")
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    parser.add_argument("--service", default="trace-proc", help="the service.name resource")
    parsed = parser.parse_args()
    print(json.dumps(anyio.run(main, parsed, backend=parsed.backend)))
