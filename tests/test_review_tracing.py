"""Review of the tracing (issue 4): each test shows one place where the spans break a
promise of the issue, DESIGN.md or docs/tracing-jaeger.md, or would mislead a Jaeger user.

OpenTelemetry's global tracer provider can be set only once per process, so every scenario
runs in its own `python -c` process with an SDK `TracerProvider` and an
`InMemorySpanExporter` (an application's own provider: docs/tracing-jaeger.md says no
helper is needed then). The process prints the finished spans and what it observed as
JSON; the assertions run here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import contextlib, json, sys
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from statechart import *
from statechart import tracing

EXPORTER = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)
DONE = State("done", kind="terminal")


def _hex(n, width=16):
    return format(n, f"0{width}x")


def _span(s):
    return {
        "name": s.name, "trace_id": _hex(s.context.trace_id, 32),
        "span_id": _hex(s.context.span_id), "parent": _hex(s.parent.span_id) if s.parent else "",
        "status": s.status.status_code.name, "description": s.status.description,
        "attributes": dict(s.attributes),
        "events": [{"name": e.name, "attributes": dict(e.attributes)} for e in s.events],
        "links": [{"trace_id": _hex(l.context.trace_id, 32), "span_id": _hex(l.context.span_id)}
                  for l in s.links],
    }


def report(**extra):
    spans = [_span(s) for s in EXPORTER.get_finished_spans()]
    print(json.dumps({"spans": spans, **extra}, default=str))
"""


def scenario(body: str) -> dict[str, Any]:
    """Run PRELUDE + `body` in a new process (no OTEL_* variables); its JSON report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + body],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def named(out: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [s for s in out["spans"] if s["name"].startswith(prefix)]


# -- 1. a migrating resume crashes when tracing is on ---------------------------------------

MIGRATE = '''
@tool(retry="safe")
async def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"

old = Chart("desk", budget=Budget(max_steps=20), states=(State("research", tools=(look,)), DONE),
            edges=(Edge("research", "done"),))
new = Chart("desk", budget=Budget(max_steps=20),
            states=(State("investigate", tools=(look,)), DONE),
            edges=(Edge("investigate", "done"),))


def rename(run):
    return run.model_copy(update={
        "state": "investigate.think",
        "visit": run.visit.model_copy(update={"state": "investigate"}),
        "visits": {"investigate": run.visits["research"]}})


async def main():
    store = MemoryStore()
    model = ScriptedModel([reply(call("look", "l1", q="a"))])
    await start(old, store=store, model=model, run_id="r1")
    async with contextlib.aclosing(drive(old, "r1", store=store, model=model)) as steps:
        async for record in steps:
            if record.event.seq == 2:
                break
    error = None
    try:
        end = await resume(new, "r1", store=store, migrate=rename,
                           model=ScriptedModel([reply(call("next_state", "n1", target="done"))]))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    report(error=error, state=(await store.load("r1")).state)

anyio.run(main)
'''


def test_a_resume_that_migrates_to_renamed_states_works_with_tracing_on() -> None:
    """The same script without a tracer provider ends in `done` (the migration is valid);
    with one, `RunTrace.enter` looks the *unmigrated* state up in the new chart."""
    out = scenario(MIGRATE)
    assert out["error"] is None, out["error"]
    assert out["state"] == "done"


# -- 2. a transition span left open when the store refuses the write ------------------------

LEASE_LOST = '''
STORE = MemoryStore()


@tool(retry="safe")
async def slow(q: str) -> str:
    """Slow."""
    await anyio.sleep(0.3)  # the 0.1 s lease expires meanwhile and another driver takes over
    await STORE.acquire("r1", "other-driver", 60)
    return "ok"

c = Chart("desk", budget=Budget(max_steps=20), states=(State("work", tools=(slow,)), DONE),
          edges=(Edge("work", "done"),))


async def main():
    model = ScriptedModel([reply(call("slow", "s1", q="a"))])
    await start(c, store=STORE, model=model, run_id="r1")
    error = None
    try:
        await run_to_end(c, "r1", store=STORE, model=model, lease_ttl=0.1)
    except Exception as exc:
        error = type(exc).__name__
    report(error=error)

anyio.run(main)
'''


def test_the_transition_span_ends_when_storing_its_event_fails() -> None:
    """`drive` ends the transition span only after `store.append` succeeds (or on
    ConflictError); any other failure there (LeaseLostError, a database error, a
    cancellation) leaves it open forever, so the transition where the drive broke is
    missing from the trace."""
    out = scenario(LEASE_LOST)
    assert out["error"] == "LeaseLostError"
    (agent,) = named(out, "invoke_agent")
    assert agent["attributes"]["error.type"] == "LeaseLostError"
    steps = {s["attributes"]["statechart.step"]: s for s in named(out, "transition ")}
    assert sorted(steps) == [1, 2], "the span of the transition that was not stored never ended"
    assert steps[2]["status"] == "ERROR"


# -- 3. stopping early, as documented, marks the drive as failed ----------------------------

EARLY_STOP = """
from tests.engine.test_nesting import workflow


async def main():
    c, store = workflow(), MemoryStore()
    model = ScriptedModel([reply(call("dig", "d1", q="1")), reply(call("buy", "b1", item="x"))])
    run = await start(c, store=store, model=model, run_id="r1")
    async with contextlib.aclosing(drive(c, run, store=store, model=model)) as steps:
        async for record in steps:
            if record.event.seq == 2:
                break
    report()

anyio.run(main)
"""


def test_closing_a_drive_early_with_aclosing_is_not_an_error() -> None:
    """The drive docstring says to close the iterator with `contextlib.aclosing` when you
    stop early; `drive`'s `except BaseException` records the GeneratorExit as the failure,
    so every early stop shows as an ERROR `invoke_agent` span with error.type=GeneratorExit."""
    out = scenario(EARLY_STOP)
    (agent,) = named(out, "invoke_agent")
    assert agent["attributes"].get("error.type") is None
    assert agent["status"] == "UNSET"


# -- 4. a fork continues its parent's trace --------------------------------------------------

FORK = '''
@tool(retry="safe", repeatable=True)
async def look(q: str) -> str:
    """Look."""
    return "ok"

c = Chart("desk", budget=Budget(max_steps=20), states=(State("work", tools=(look,)), DONE),
          edges=(Edge("work", "done"),))


async def main():
    store = MemoryStore()
    model = ScriptedModel([reply(call("look", "l1", q="a")),
                           reply(call("next_state", "n1", target="done"))])
    parent = await start(c, store=store, model=model, run_id="parent")
    await run_to_end(c, parent, store=store, model=model)
    child = await fork(c, "parent", 2, store=store, new_run_id="child")
    await run_to_end(c, "child", store=store,
                     model=ScriptedModel([reply(call("next_state", "n2", target="done"))]))
    report(parent=parent.trace, child=child.trace)

anyio.run(main)
'''


def test_a_fork_is_a_run_of_its_own_with_a_trace_of_its_own() -> None:
    """ "One trace per run": `lineage.fork` copies the parent's stored trace context, so the
    fork's drives are children of the *parent's* `create_agent` span, in the parent's trace;
    the parent's trace (found from its run id) then holds two runs."""
    out = scenario(FORK)
    agents = {s["attributes"]["statechart.run.id"]: s for s in named(out, "invoke_agent")}
    assert set(agents) == {"parent", "child"}
    assert agents["child"]["trace_id"] != agents["parent"]["trace_id"]


# -- 5. a human decision that was never stored looks like one that was ----------------------

HUMAN_RACE = '''
class YieldingStore(MemoryStore):
    """A store whose load awaits I/O (as a real one does), so two deciders interleave."""

    async def load(self, run_id):
        found = await super().load(run_id)
        await anyio.sleep(0)
        return found

c = Chart("gate", budget=Budget(max_steps=5),
          states=(State("ok", kind="approval", on_approve="done", on_reject="done"), DONE))


async def main():
    store = YieldingStore()
    await start(c, store=store, model=ScriptedModel([]), run_id="r1")
    results = {}

    async def decide(who):
        try:
            await approve(c, "r1", store=store, by=who)
            results[who] = "stored"
        except ConflictError:
            results[who] = "ConflictError"

    async with anyio.create_task_group() as tg:
        tg.start_soon(decide, "alice")
        tg.start_soon(decide, "bob")
    report(results=results, events=[e.span for e in await store.events("r1")])

anyio.run(main)
'''


def test_a_human_decision_that_lost_the_race_is_not_a_successful_transition_span() -> None:
    """`_append_human` ends its span in `finally`, with no status, whether or not the event
    was stored: the approval that got ConflictError shows in Jaeger as a second successful
    `transition ok -> done` (same step number, `statechart.human.approved` by bob), while
    the driver marks its own unstored transitions ERROR. `cancel()` retries up to 20 times,
    leaving one such phantom per retry."""
    out = scenario(HUMAN_RACE)
    assert sorted(out["results"].values()) == ["ConflictError", "stored"]
    (stored_span,) = out["events"]
    ok = [s for s in named(out, "transition ok -> done") if s["status"] != "ERROR"]
    assert [s["span_id"] for s in ok] == [stored_span]


# -- 6. the late result of a cancelled run has no span ---------------------------------------

LATE_RESULT = '''
STORE = MemoryStore()


@tool(retry="safe")
async def ship(q: str) -> str:
    """Ship."""
    await cancel(c, "r1", store=STORE, reason="customer withdrew", by="ops")  # meanwhile
    return "shipped"

c = Chart("desk", budget=Budget(max_steps=20), states=(State("work", tools=(ship,)), DONE),
          edges=(Edge("work", "done"),))


async def main():
    model = ScriptedModel([reply(call("ship", "s1", q="a"))])
    await start(c, store=STORE, model=model, run_id="r1")
    end = await run_to_end(c, "r1", store=STORE, model=model)
    events = [{"seq": e.seq, "trigger": e.trigger, "span": e.span}
              for e in await STORE.events("r1")]
    report(state=end.state, events=events)

anyio.run(main)
'''


def test_the_late_result_of_a_cancelled_run_has_a_transition_span() -> None:
    """docs/tracing-jaeger.md: "every event row stores its span id". When a tool finishes
    after a cancel, `drive` stores `late_result` with no span: the event's span is None and
    the trace has no transition for it (only an ERROR span for the unstored 'results')."""
    out = scenario(LATE_RESULT)
    assert out["state"] == "cancelled"
    assert [e["trigger"] for e in out["events"]] == ["propose", "cancel", "late_result"]
    late = out["events"][2]
    assert late["span"] is not None
    steps = [s for s in named(out, "transition ") if s["attributes"]["statechart.step"] == 3]
    assert [s["span_id"] for s in steps] == [late["span"]]


# -- 7. a tool's error text (its result) on the span with content capture off ---------------

TOOL_ERROR = '''
@tool(retry="safe")
async def lookup(email: str) -> str:
    """Find a customer."""
    raise LookupError(f"no account for {email}")

c = Chart("desk", budget=Budget(max_steps=20), states=(State("work", tools=(lookup,)), DONE),
          edges=(Edge("work", "done"),))


async def main():
    store = MemoryStore()
    model = ScriptedModel([reply(call("lookup", "l1", email="alice@example.com")),
                           reply(call("next_state", "n1", target="done"))])
    await run_to_end(c, await start(c, store=store, model=model), store=store, model=model)
    events = await store.events((await store.runs())[0].run_id)
    report(capture=tracing.capture_content, result=events[1].result)

anyio.run(main)
'''


def test_a_failing_tools_error_text_stays_out_of_the_trace_without_content_capture() -> None:
    """The tool's error message is its result (the model is told "error: tool 'lookup'
    failed: LookupError: no account for alice@example.com"); `_failed` copies it into the
    execute_tool span's status description, which is exported, with capture off."""
    out = scenario(TOOL_ERROR)
    assert out["capture"] is False
    assert "alice@example.com" in out["result"]
    (tool_span,) = named(out, "execute_tool lookup")
    assert tool_span["status"] == "ERROR"
    assert tool_span["attributes"]["error.type"] == "LookupError"
    leaked = [s["name"] for s in out["spans"] if "alice@example.com" in json.dumps(s)]
    assert leaked == []


# -- 8. provider and model names from a spec with colons -------------------------------------

MODEL_SPEC = """
c = Chart("desk", budget=Budget(max_steps=20), states=(State("work"), DONE),
          edges=(Edge("work", "done"),))


async def main():
    store = MemoryStore()
    model = ScriptedModel([reply(call("next_state", "n1", target="done"))],
                          spec="ollama:llama3.1:8b")
    await run_to_end(c, await start(c, store=store, model=model), store=store, model=model)
    report()

anyio.run(main)
"""


def test_provider_and_model_of_a_spec_whose_model_name_has_a_colon() -> None:
    """The registry splits a spec at its first colon (`ollama` + `llama3.1:8b`; Ollama tags
    and OpenAI fine-tunes `ft:...` have colons); `RunTrace` splits at the last one, so the
    chat span says provider `ollama:llama3.1`, model `8b`, and is named `chat 8b`."""
    out = scenario(MODEL_SPEC)
    (chat,) = named(out, "chat ")
    assert chat["attributes"]["gen_ai.provider.name"] == "ollama"
    assert chat["attributes"]["gen_ai.request.model"] == "llama3.1:8b"
    assert chat["name"] == "chat llama3.1:8b"


# -- 9. a reconciled call: the hook's failure and its result ---------------------------------

RECONCILE = '''
HOOK = sys.argv[1]


async def check(order: str):
    if HOOK == "raise":
        raise RuntimeError("payments API down")
    return "refund 7 already issued"


@tool(retry="reconcile", reconcile=check)
async def refund(order: str) -> str:
    """Refund."""
    return "refund 8 issued"

c = Chart("pay", budget=Budget(max_steps=20), states=(State("work", tools=(refund,)), DONE),
          edges=(Edge("work", "done"),))


async def main():
    store = MemoryStore()
    model = ScriptedModel([reply(call("refund", "r1", order="o1"))])
    await start(c, store=store, model=model, run_id="p")
    async with contextlib.aclosing(drive(c, "p", store=store, model=model)) as steps:
        async for record in steps:
            break  # the refund's intent is recorded; it has not run
    await fork(c, "p", 1, store=store, new_run_id="f")  # the fork is in doubt about r1
    EXPORTER.clear()
    end = await run_to_end(c, "f", store=store,
                           model=ScriptedModel([reply(call("next_state", "n", target="done"))]))
    events = await store.events("f", after=1)
    report(state=end.state, first=events[0].trigger, result=events[0].result)

anyio.run(main)
'''


def reconcile_scenario(hook: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + RECONCILE, hook],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_a_reconcile_hook_that_raises_is_an_error_on_its_tool_span() -> None:
    """`_perform` wraps the hook's exception in `Reconciled(None, failed=exc)`, which
    `effect_end` treats as a result: the execute_tool span is UNSET, with no error.type, and
    its result attribute is the repr `Reconciled(value=None, failed=RuntimeError(...))`."""
    out = reconcile_scenario("raise")
    assert out["first"] == "ask"  # the run waits: the hook could not tell
    (tool_span,) = named(out, "execute_tool refund")
    assert tool_span["status"] == "ERROR"
    assert tool_span["attributes"].get("error.type") == "RuntimeError"


def test_a_reconciled_calls_result_attribute_is_the_result() -> None:
    """With content capture on, the result attribute of a call settled by its reconcile hook
    is `str(Reconciled(...))`, not the result the run recorded."""
    out = reconcile_scenario("ok")
    assert out["first"] == "results" and out["result"] == "refund 7 already issued"
    (tool_span,) = named(out, "execute_tool refund")
    assert tool_span["attributes"]["gen_ai.tool.call.result"] == "refund 7 already issued"


# -- 10. a code state's own calls are outside the run's trace -------------------------------

HANDLER = """
app = trace.get_tracer("app")


async def check(ctx):
    with app.start_as_current_span("GET /crm"):  # an instrumented client in a code state
        pass
    return "done"

c = Chart("coded", budget=Budget(max_steps=5),
          states=(State("check", kind="code", handler=check), DONE), edges=(Edge("check", "done"),))


async def main():
    store = MemoryStore()
    run = await start(c, store=store, model=ScriptedModel([]))
    await run_to_end(c, run, store=store, model=ScriptedModel([]))
    report(trace=run.trace)

anyio.run(main)
"""


def test_spans_made_inside_a_code_state_handler_are_in_the_runs_trace() -> None:
    """Model and tool calls run with their span current, so instrumented clients nest under
    them; a code state's handler runs with no span of the run current, so its client spans
    start a trace of their own (one trace per run is broken for code states)."""
    out = scenario(HANDLER)
    run_trace = out["trace"]["traceparent"].split("-")[1]
    (crm,) = named(out, "GET /crm")
    (state,) = named(out, "state check")
    assert crm["trace_id"] == run_trace
    below_state = {state["span_id"]} | {
        s["span_id"] for s in out["spans"] if s["parent"] == state["span_id"]
    }
    assert crm["parent"] in below_state


# -- 11. an interrupted tool call looks like a finished one ----------------------------------

INTERRUPTED = '''
@tool(retry="safe")
async def slow(q: str) -> str:
    """Slow."""
    await anyio.sleep(10)
    return "ok"

c = Chart("desk", budget=Budget(max_steps=20), states=(State("work", tools=(slow,)), DONE),
          edges=(Edge("work", "done"),))


async def main():
    store = MemoryStore()
    model = ScriptedModel([reply(call("slow", "s1", q="a"))])
    await start(c, store=store, model=model, run_id="r1")
    with anyio.move_on_after(0.2):
        await run_to_end(c, "r1", store=store, model=model)
    report()

anyio.run(main)
'''


def test_a_tool_call_cut_off_by_cancellation_is_marked_on_its_span() -> None:
    """`effect_end(span, None)` runs in `finally` with outcome None, so the execute_tool
    span of a call interrupted by an anyio cancellation ends UNSET, like a call that
    finished; only the invoke_agent span says (error.type=CancelledError) that it stopped."""
    out = scenario(INTERRUPTED)
    (agent,) = named(out, "invoke_agent")
    assert agent["status"] == "ERROR"
    (tool_span,) = named(out, "execute_tool slow")
    assert tool_span["status"] == "ERROR"
    assert tool_span["attributes"].get("error.type") is not None


# -- 12. budget attributes of a state named "root" -------------------------------------------


def test_a_state_cannot_be_named_like_the_charts_budget_level() -> None:
    """The chart's level is written `statechart.budget.root.*`, so `root` is a reserved
    state name: a state of that name could not share those attributes."""
    from statechart import Budget, Chart, Edge, MalformedStateNameError, State

    with pytest.raises(MalformedStateNameError, match="'root' is reserved"):
        Chart(
            "c",
            budget=Budget(max_steps=20),
            states=(State("root", budget=Budget(max_steps=3)), State("done", kind="terminal")),
            edges=(Edge("root", "done"),),
        )


# -- 13. a start that fails still exports a create_agent span for the run id ---------------

DUPLICATE_START = """
c = Chart("desk", budget=Budget(max_steps=20), states=(State("work"), DONE),
          edges=(Edge("work", "done"),))


async def main():
    store = MemoryStore()
    run = await start(c, store=store, model=ScriptedModel([]), run_id="r1")
    error = None
    try:
        await start(c, store=store, model=ScriptedModel([]), run_id="r1")
    except ConflictError as exc:
        error = type(exc).__name__
    report(error=error, trace=run.trace)

anyio.run(main)
"""


def test_a_start_that_is_refused_leaves_no_second_trace_for_the_run_id() -> None:
    """`start` ends a `create_agent` span (tagged statechart.run.id=r1) before
    `store.create`; when the create fails (the id exists), that span is still exported,
    without error, in a new trace: searching Jaeger for the run id finds two runs."""
    out = scenario(DUPLICATE_START)
    assert out["error"] == "ConflictError"
    run_trace = out["trace"]["traceparent"].split("-")[1]
    traces = {
        s["trace_id"]
        for s in out["spans"]
        if s["attributes"].get("statechart.run.id") == "r1" and s["status"] != "ERROR"
    }
    assert traces == {run_trace}
