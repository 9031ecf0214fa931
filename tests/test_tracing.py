"""Tracing end to end: charts run in child processes (tests/trace_proc.py) that export over
OTLP/HTTP to a real receiver in this process (tests/support/otlp_receiver.py), which decodes each
`ExportTraceServiceRequest` with opentelemetry-proto.

Every tracing configuration lives in its own process, because OpenTelemetry's global
tracer provider can be set only once per process. The scenarios at the end export to an
in-memory exporter in their own process instead, and report the finished spans as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from statechart import tracing as t
from tests.support.otlp_receiver import ReceivedSpan, Receiver, tree

ROOT = Path(__file__).resolve().parent.parent
_OTEL_ENV = (
    "OTEL_EXPORTER_OTLP",
    "OTEL_TRACES",
    "OTEL_SDK",
    "OTEL_SERVICE",
    "OTEL_RESOURCE",
    "OTEL_INSTRUMENTATION_GENAI",
)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rx:
        yield rx


def proc(
    rx: Receiver, db: Path, scenario: str, *flags: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one scenario of tests/trace_proc.py in a new process exporting to `rx`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_OTEL_ENV)}
    clean.update({"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint, **(env or {})})
    command = [sys.executable, "-m", "tests.support.trace_proc", scenario, str(db), *flags]
    done = subprocess.run(command, cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def received(rx: Receiver, count: int) -> list[ReceivedSpan]:
    """Exactly the `count` spans received (the process has exited, so all are in)."""
    spans = rx.wait_for(lambda spans: len(spans) >= count, timeout=10)
    assert len(spans) == count, [s.name for s in spans]
    assert rx.errors == []
    return spans


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_ns)


def transitions(spans: list[ReceivedSpan]) -> dict[int, ReceivedSpan]:
    """The span of each transition (the one with `statechart.step` set), by step number."""
    found = {s.attributes[t.STEP]: s for s in spans if t.STEP in s.attributes}
    assert len(found) == len([s for s in spans if t.STEP in s.attributes])
    return found


def one_span_per_transition(spans: list[ReceivedSpan], events: list[dict[str, Any]]) -> None:
    """Each stored event has exactly one span (and each such span an event), and every span
    of the run is a transition, a state visit, a drive or the run's first span: a second
    span per transition would show in the count."""
    steps = transitions(spans)
    assert {e["seq"]: e["span"] for e in events} == {n: s.span_id for n, s in steps.items()}
    visits = [s for s in spans if s.name.startswith("state ")]
    drives = [s for s in spans if s.name.startswith("invoke_agent ")]
    firsts = [s for s in spans if s.name.startswith("create_agent ")]
    assert len(firsts) == 1
    assert len(spans) == len(events) + len(visits) + len(drives) + len(firsts)


# -- the exact span tree of the three-level chart -------------------------------------------


def facts_of(s: ReceivedSpan) -> tuple[Any, ...]:
    """A transition's facts: trigger, actor and step (its source and target are checked)."""
    a = s.attributes
    assert a[t.SOURCE] and a[t.TARGET], s.name
    return (a[t.TRIGGER], a[t.ACTOR], a[t.STEP])


def key(s: ReceivedSpan) -> Any:
    """The attributes that tell each kind of span apart (the rest are checked separately)."""
    a = s.attributes
    op = a.get(t.GEN_AI_OPERATION_NAME)
    if op == "create_agent":
        return (s.kind, op, a[t.GEN_AI_AGENT_NAME], a[t.RUN_ID])
    if op == "invoke_agent":
        return (
            s.kind,
            op,
            a[t.GEN_AI_AGENT_NAME],
            a[t.GEN_AI_AGENT_ID],
            a[t.GEN_AI_PROVIDER_NAME],
            a[t.GEN_AI_REQUEST_MODEL],
            a[t.MODEL],
            a[t.STATE],
            a["statechart.status"],
        )
    if op == "chat":
        return (
            s.kind,
            op,
            a[t.GEN_AI_PROVIDER_NAME],
            a[t.GEN_AI_REQUEST_MODEL],
            a[t.GEN_AI_RESPONSE_MODEL],
            a[t.GEN_AI_USAGE_INPUT_TOKENS],
            a[t.GEN_AI_USAGE_OUTPUT_TOKENS],
            a[t.GEN_AI_RESPONSE_FINISH_REASONS],
            *facts_of(s),
        )
    if op == "execute_tool":
        return (s.kind, op, a[t.GEN_AI_TOOL_NAME], a[t.GEN_AI_TOOL_CALL_ID], *facts_of(s))
    if s.name.startswith("state "):
        return (s.kind, a[t.STATE], a["statechart.visit"])
    assert s.name.startswith("transition "), s.name
    assert s.name == f"transition {a[t.SOURCE]} -> {a[t.TARGET]}"
    return (s.kind, *facts_of(s))


P = "explore.inner.probe"
CHAT = ("CLIENT", "chat", "acme", "tiny-1", "tiny-1", 10, 5)


def tr(source: str, target: str, trigger: str, actor: str, step: int) -> Any:
    return (f"transition {source} -> {target}", ("INTERNAL", trigger, actor, step), [])


def state(path: str, *children: Any) -> Any:
    return (f"state {path}", ("INTERNAL", path, 1), list(children))


def chat(step: int) -> Any:
    """A model call that proposed a tool call: the think -> act transition."""
    return ("chat tiny-1", (*CHAT, ["tool_call"], "propose", "model", step), [])


def tool(name: str, call_id: str, step: int) -> Any:
    """A tool call whose result went back to the model: the act -> think transition."""
    op = ("INTERNAL", "execute_tool", name, call_id, "results", "code", step)
    return (f"execute_tool {name}", op, [])


AGENT = ("INTERNAL", "invoke_agent", "workflow", "r1", "acme", "tiny-1", "acme:tiny-1")


def agent(state_at: str, status: str, *children: Any) -> Any:
    return (
        "invoke_agent workflow",
        (*AGENT, state_at, status),
        list(children),
    )


NESTED_TREE = [
    (
        "create_agent workflow",
        ("INTERNAL", "create_agent", "workflow", "r1"),
        [
            agent(
                f"{P}.approve",
                "waiting",
                state(
                    "explore",
                    state(
                        "explore.inner",
                        state(
                            P,
                            chat(1),
                            tool("dig", "d1", 2),
                            chat(3),
                            tr(f"{P}.act", f"{P}.approve", "ask", "system", 4),
                        ),
                    ),
                ),
            ),
            tr(f"{P}.approve", f"{P}.act", "approved", "human", 5),
            agent(
                "done",
                "ended",
                state(
                    "explore",
                    state(
                        "explore.inner",
                        state(
                            P,
                            tool("buy", "b1", 6),
                            chat(7),
                            tr(f"{P}.act", "report.think", "go:explore.inner.done", "model", 8),
                        ),
                    ),
                ),
                state(
                    "report",
                    chat(9),
                    tr("report.act", "done", "go:done", "model", 10),
                ),
                state("done"),
            ),
        ],
    )
]
"""Every span of run r1 of `workflow()`: names, nesting, siblings by start time, key
attributes. One span per transition: a model call's is its `chat` span, a tool call's its
`execute_tool` span. The human approval sits directly under the run's first span."""
NESTED_SPANS = 21
"""10 events + 8 state visits + 2 drives + the run's first span."""

ROOT_STEPS, ROOT_TOKENS, EXPLORE_STEPS, INNER_TOOLS = 60, 1000, 30, 3


def budget(steps: int, tokens: int, explore: int | None = None, inner: int | None = None) -> Any:
    """What binds after a transition, per budget kind: the least left over the levels
    around its source (`explore` steps and `explore.inner` tool calls only inside them)."""
    b = "statechart.budget"
    out: dict[str, Any] = {
        f"{b}.steps.left": ROOT_STEPS - steps,
        f"{b}.steps.level": "root",
        f"{b}.tokens.left": ROOT_TOKENS - tokens,
        f"{b}.tokens.level": "root",
    }
    if explore is not None:  # explore has fewer steps left than the root here
        assert EXPLORE_STEPS - explore < ROOT_STEPS - steps
        out[f"{b}.steps.left"] = EXPLORE_STEPS - explore
        out[f"{b}.steps.level"] = "explore"
    if inner is not None:
        out[f"{b}.tool_calls.left"] = INNER_TOOLS - inner
        out[f"{b}.tool_calls.level"] = "explore.inner"
    return out


NESTED_BUDGETS = {  # step: (root steps, root tokens, explore steps, inner tool calls)
    1: budget(1, 15, 1, 0),
    2: budget(2, 15, 2, 1),
    3: budget(3, 30, 3, 1),
    4: budget(4, 30, 4, 1),
    5: budget(4, 30, 4, 1),
    6: budget(5, 30, 5, 2),
    7: budget(6, 45, 6, 2),
    8: budget(7, 45, 7, 2),
    9: budget(8, 60),
    10: budget(9, 60),
}
"""Each transition's ledger after it (the human approval spends nothing; `report` is under
the root budget only)."""


def level(**figures: tuple[int, int]) -> dict[str, int]:
    """A budget level's figures on its state's span: cap, spent and left per kind."""
    b = "statechart.budget"
    out = {}
    for kind, (cap, spent) in figures.items():
        out |= {f"{b}.{kind}.cap": cap, f"{b}.{kind}.spent": spent, f"{b}.{kind}.left": cap - spent}
    return out


NESTED_LEVELS = [  # (span name, budget figures when it ended), in start order
    ("invoke_agent workflow", level(steps=(ROOT_STEPS, 4), tokens=(ROOT_TOKENS, 30))),
    ("state explore", level(steps=(EXPLORE_STEPS, 4))),
    ("state explore.inner", level(tool_calls=(INNER_TOOLS, 1))),
    ("state explore.inner.probe", {}),
    ("invoke_agent workflow", level(steps=(ROOT_STEPS, 9), tokens=(ROOT_TOKENS, 60))),
    ("state explore", level(steps=(EXPLORE_STEPS, 7))),
    ("state explore.inner", level(tool_calls=(INNER_TOOLS, 2))),
    ("state explore.inner.probe", {}),
    ("state report", {}),
    ("state done", {}),
]
"""Each budget level's figures on the span of the state (for `root`, the drive) it belongs
to, as they were when that span ended."""


def budgets(s: ReceivedSpan) -> dict[str, Any]:
    return {k: v for k, v in s.attributes.items() if k.startswith(t.BUDGET + ".")}


def check_nested(spans: list[ReceivedSpan], out: dict[str, Any]) -> None:
    """The whole trace of run r1: tree, ids, budgets, events, and the stored span ids."""
    assert tree(spans, key) == NESTED_TREE
    run = out["runs"]["r1"]
    trace_id = run["trace"]["traceparent"].split("-")[1]
    assert {s.trace_id for s in spans} == {trace_id}
    assert all(s.scope == "statechart" and s.status_code == "UNSET" for s in spans)
    by_id = {s.span_id: s for s in spans}
    (root,) = named(spans, "create_agent workflow")
    assert run["trace"]["traceparent"].split("-")[2] == root.span_id
    for s in spans:  # below the agent spans, a parent's time covers its children
        parent = by_id.get(s.parent_span_id)
        if parent is not None and parent is not root:
            assert parent.start_ns <= s.start_ns <= s.end_ns <= parent.end_ns, s.name
    one_span_per_transition(spans, run["events"])  # the stored events name their spans
    steps = transitions(spans)
    for n, expected in NESTED_BUDGETS.items():
        assert budgets(steps[n]) == expected, n
    others = sorted((s for s in spans if t.STEP not in s.attributes), key=lambda s: s.start_ns)
    assert [(s.name, budgets(s)) for s in others[1:]] == NESTED_LEVELS
    assert steps[4].event("statechart.approval.requested").attributes == {
        "reason": f"tool 'buy' needs approval in state '{P}'"
    }
    assert steps[5].event("statechart.human.approved").attributes["by"] == "lead"
    assert all(not s.events for n, s in steps.items() if n not in (4, 5))
    for s in spans:  # the run is the GenAI conversation; tools are client-side functions
        op = s.attributes.get(t.GEN_AI_OPERATION_NAME)
        if op in ("invoke_agent", "chat"):
            assert s.attributes[t.GEN_AI_CONVERSATION_ID] == "r1", s.name
        if op == "execute_tool":
            assert s.attributes[t.GEN_AI_TOOL_TYPE] == "function", s.name
    first, resumed = named(spans, "invoke_agent workflow")
    assert first.links == ()
    (link,) = resumed.links  # to the last transition before the resumed drive
    assert (link.trace_id, link.span_id) == (trace_id, steps[5].span_id)


@pytest.fixture(scope="module")
def nested_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[ReceivedSpan], dict[str, Any]]]:
    """Run r1 of `workflow()` start to done in one process (asyncio), and what arrived."""
    with Receiver() as rx:
        out = proc(rx, tmp_path_factory.mktemp("nested") / "runs.db", "nested")
        yield received(rx, NESTED_SPANS), out


def test_exact_span_tree_of_a_three_level_chart(
    nested_run: tuple[list[ReceivedSpan], dict[str, Any]],
) -> None:
    spans, out = nested_run
    assert out["runs"]["r1"]["state"] == "done"
    check_nested(spans, out)
    (chat_span, *_) = named(spans, "chat tiny-1")
    assert chat_span.resource["service.name"] == "trace-proc"
    assert {s.kind for s in spans} == {"INTERNAL", "CLIENT"}


def test_every_transition_span_names_its_run(
    nested_run: tuple[list[ReceivedSpan], dict[str, Any]],
) -> None:
    spans, _ = nested_run
    steps = transitions(spans)
    assert {n: s.attributes.get(t.RUN_ID) for n, s in steps.items()} == dict.fromkeys(
        range(1, 11), "r1"
    )


def test_the_same_tree_under_trio(receiver: Receiver, tmp_path: Path) -> None:
    out = proc(receiver, tmp_path / "runs.db", "nested", "--backend", "trio")
    check_nested(received(receiver, NESTED_SPANS), out)


# -- one trace across processes ----------------------------------------------------------


def test_one_trace_across_start_approve_and_resume_in_three_processes(
    receiver: Receiver, tmp_path: Path
) -> None:
    db, gz = tmp_path / "runs.db", {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
    first = proc(receiver, db, "nested-start", "--service", "p1", env=gz)
    second = proc(receiver, db, "nested-approve", "--service", "p2", env=gz)
    third = proc(receiver, db, "nested-resume", "--service", "p3", env=gz)
    assert len({first["pid"], second["pid"], third["pid"]}) == 3
    assert first["runs"]["r1"]["status"] == "waiting"
    assert third["runs"]["r1"]["state"] == "done"
    spans = received(receiver, NESTED_SPANS)
    assert {r.content_encoding for r in receiver.snapshot()[1]} == {"gzip"}
    # the same tree as in one process, every span in the trace stored at start
    check_nested(spans, third)
    assert first["runs"]["r1"]["trace"] == third["runs"]["r1"]["trace"]
    steps = transitions(spans)
    service = {s.span_id: s.resource["service.name"] for s in spans}
    assert [service[steps[n].span_id] for n in range(1, 11)] == [
        "p1",
        "p1",
        "p1",
        "p1",
        "p2",
        "p3",
        "p3",
        "p3",
        "p3",
        "p3",
    ]
    first_agent, resumed = named(spans, "invoke_agent workflow")
    assert (service[first_agent.span_id], service[resumed.span_id]) == ("p1", "p3")
    # the resumed drive links to the span of the last stored event: process 2's approval
    events = {e["seq"]: e for e in third["runs"]["r1"]["events"]}
    (link,) = resumed.links
    assert link.span_id == events[5]["span"] == steps[5].span_id
    assert events[4]["span"] == steps[4].span_id  # process 1's last transition


def test_a_resume_in_a_new_process_links_to_the_last_transition_of_the_first(
    receiver: Receiver, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    first = proc(receiver, db, "nested-stop", "--service", "p1")
    assert first["runs"]["r1"]["state"] == f"{P}.think"
    second = proc(receiver, db, "nested-continue", "--service", "p2")
    assert second["runs"]["r1"]["status"] == "waiting"
    spans = received(receiver, 7 + 6)  # create_agent, a drive to seq 2; a drive to the wait
    trace_id = first["runs"]["r1"]["trace"]["traceparent"].split("-")[1]
    assert {s.trace_id for s in spans} == {trace_id}
    steps = transitions(spans)
    assert sorted(steps) == [1, 2, 3, 4]
    last_of_first = next(e for e in first["runs"]["r1"]["events"] if e["seq"] == 2)
    assert steps[2].span_id == last_of_first["span"]
    assert steps[2].resource["service.name"] == "p1"
    _, resumed = named(spans, "invoke_agent workflow")
    assert resumed.resource["service.name"] == "p2"
    (link,) = resumed.links
    assert (link.trace_id, link.span_id) == (trace_id, last_of_first["span"])
    assert link.attributes == {"statechart.link": "last transition before this drive"}
    # each drive has its own state spans, both under the run's first span
    (root,) = named(spans, "create_agent workflow")
    assert [a.parent_span_id for a in named(spans, "invoke_agent workflow")] == [
        root.span_id,
        root.span_id,
    ]


# -- refusals, exhaustion, errors --------------------------------------------------------


def test_a_refused_guard_and_an_exhausted_budget_are_span_events(
    receiver: Receiver, tmp_path: Path
) -> None:
    out = proc(receiver, tmp_path / "runs.db", "gate")
    assert out["runs"]["gate"]["state"] == "escalated"
    spans = received(receiver, 9)
    steps = transitions(spans)
    one_span_per_transition(spans, out["runs"]["gate"]["events"])
    refused = [s for s in steps.values() if any(e.name == t.GUARD_REFUSED for e in s.events)]
    assert [s.attributes[t.STEP] for s in refused] == [2]
    why = "edge work->done refused: ok is not set"
    assert refused[0].event(t.GUARD_REFUSED).attributes == {"reason": why}
    assert refused[0].attributes[t.GUARD_REFUSED] == why
    assert refused[0].name == "transition work.act -> work.think"
    exhausted = [s for s in steps.values() if any(e.name == t.EXHAUSTED for e in s.events)]
    assert [s.name for s in exhausted] == ["transition work.think -> escalated"]
    (last,) = exhausted
    assert last.event(t.EXHAUSTED).attributes == {
        "which": "root:tool_calls",
        "reason": "budget exhausted at root:tool_calls; routed to 'escalated'",
    }
    assert last.attributes[t.EXHAUSTED] == "root:tool_calls"
    assert last.attributes["statechart.budget.tool_calls.left"] == 0
    assert last.attributes["statechart.budget.tool_calls.level"] == "root"
    assert [n for n, s in steps.items() if s.events] == [2, 5]
    # the second lookup never ran: the budget was spent before its model call
    assert [s.attributes[t.GEN_AI_TOOL_CALL_ID] for s in named(spans, "execute_tool lookup")] == [
        "l1"
    ]


@pytest.fixture(scope="module")
def errors_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[ReceivedSpan], dict[str, Any]]]:
    """A failing tool, model and code-state handler (three runs, one process)."""
    with Receiver() as rx:
        out = proc(rx, tmp_path_factory.mktemp("errors") / "runs.db", "errors")
        spans = rx.wait_for(lambda spans: len(named(spans, "invoke_agent coded")) == 1)
        assert rx.errors == []
        yield spans, out


def of_run(spans: list[ReceivedSpan], out: dict[str, Any], run_id: str) -> list[ReceivedSpan]:
    """The spans of one run: its trace (each run is one trace)."""
    trace_id = out["runs"][run_id]["trace"]["traceparent"].split("-")[1]
    return [s for s in spans if s.trace_id == trace_id]


def test_model_and_tool_errors_are_error_spans(
    errors_run: tuple[list[ReceivedSpan], dict[str, Any]],
) -> None:
    spans, out = errors_run
    tool_run = of_run(spans, out, "tool")
    (failed,) = [s for s in tool_run if s.status_code == "ERROR" and s.name.startswith("exec")]
    assert failed.name == "execute_tool lookup"
    assert failed.attributes[t.ERROR_TYPE] == "ValueError"
    assert failed.status_message == "ValueError"  # messages only with content capture
    # the tool span is the transition that records the failed call (one span each); the
    # run goes on, the model hears of it
    assert transitions(tool_run)[2].span_id == failed.span_id
    assert failed.attributes[t.TRIGGER] == "results"
    assert out["runs"]["tool"]["state"] == "done"  # the model heard the error and went on
    model_run = of_run(spans, out, "model")
    (chat_span,) = named(model_run, "chat tiny-1")
    assert chat_span.status_code == "ERROR"
    assert chat_span.attributes[t.ERROR_TYPE] == "TimeoutError"
    assert chat_span.status_message == "TimeoutError"
    (escalation,) = transitions(model_run).values()  # the failed call's span: one per step
    assert escalation.span_id == chat_span.span_id
    assert (escalation.attributes[t.SOURCE], escalation.attributes[t.TARGET]) == (
        "work.think",
        "escalated",
    )
    handler_run = of_run(spans, out, "handler")
    (handled,) = transitions(handler_run).values()
    assert handled.status_code == "ERROR" and handled.status_message == "ValueError"
    ok = [s for s in spans if s.status_code == "ERROR"]
    assert {s.span_id for s in ok} == {failed.span_id, chat_span.span_id, handled.span_id}


def test_each_attempt_of_a_retried_call_is_its_own_span(receiver: Receiver, tmp_path: Path) -> None:
    """A tool's failed attempt is an `execute_tool` span with `error.type` (its transition,
    `retry`), the end of the backoff a `transition` span (`wake`), and the next attempt a
    span of its own: one span per transition still."""
    out = proc(receiver, tmp_path / "runs.db", "retried")
    events = out["runs"]["retried"]["events"]
    assert [e["trigger"] for e in events][:4] == ["propose", "retry", "wake", "results"]
    spans = receiver.wait_for(lambda spans: len(named(spans, "invoke_agent retried")) == 1)
    one_span_per_transition(spans, events)
    steps = transitions(spans)
    failed, woke, ran = steps[2], steps[3], steps[4]
    assert failed.name == "execute_tool flaky" and failed.status_code == "ERROR"
    assert failed.attributes[t.ERROR_TYPE] == "ConnectionError"
    assert failed.attributes[t.TRIGGER] == "retry"
    assert woke.name == "transition work.act -> work.act" and woke.attributes[t.TRIGGER] == "wake"
    assert ran.name == "execute_tool flaky" and ran.status_code != "ERROR"


def test_error_type_on_a_transition_span_is_the_exception_class(
    errors_run: tuple[list[ReceivedSpan], dict[str, Any]],
) -> None:
    spans, out = errors_run
    (model_escalation,) = transitions(of_run(spans, out, "model")).values()
    (handler_escalation,) = transitions(of_run(spans, out, "handler")).values()
    assert [
        model_escalation.attributes[t.ERROR_TYPE],
        handler_escalation.attributes[t.ERROR_TYPE],
    ] == ["TimeoutError", "ValueError"]


def test_budget_attributes_follow_each_chart_when_charts_are_rebuilt(
    receiver: Receiver, tmp_path: Path
) -> None:
    out = proc(receiver, tmp_path / "runs.db", "rebuilt")
    runs = out["runs"]
    spans = receiver.wait_for(lambda spans: len(spans) == 6 * len(runs))
    left = {}
    for run_id in runs:
        of = of_run(spans, out, run_id)
        (last,) = [s for s in of if s.name == "transition work.act -> done"]
        (agent,) = [s for s in of if s.name == "invoke_agent rebuilt"]
        left[run_id] = (
            last.attributes["statechart.budget.steps.left"],
            last.attributes["statechart.budget.steps.level"],
            agent.attributes["statechart.budget.steps.cap"],
            agent.attributes["statechart.budget.steps.spent"],
        )
    assert left == {run_id: (int(run_id[1:]) - 2, "root", int(run_id[1:]), 2) for run_id in runs}


# -- content capture -----------------------------------------------------------------------

EMAIL = "alice@example.com"


@pytest.mark.parametrize(
    ("how", "flags", "env"),
    [
        ("default", (), {}),
        ("configure", ("--content",), {}),
        ("environment", (), {t.CAPTURE_CONTENT_ENV: "true"}),
    ],
)
def test_tool_arguments_and_results_only_when_content_capture_is_on(
    receiver: Receiver, tmp_path: Path, how: str, flags: tuple[str, ...], env: dict[str, str]
) -> None:
    out = proc(receiver, tmp_path / "runs.db", "content", *flags, env=env)
    assert out["runs"]["content"]["state"] == "done"
    spans = received(receiver, 8)
    (lookup,) = named(spans, "execute_tool lookup")
    a = lookup.attributes
    assert a[t.GEN_AI_TOOL_CALL_ID] == "l1"
    if how == "default":
        assert out["capture_content"] is False
        assert t.GEN_AI_TOOL_CALL_ARGUMENTS not in a and t.GEN_AI_TOOL_CALL_RESULT not in a
        contents = (t.GEN_AI_INPUT_MESSAGES, t.GEN_AI_OUTPUT_MESSAGES, t.GEN_AI_SYSTEM_INSTRUCTIONS)
        assert not [k for s in spans for k in s.attributes if k in contents]
        everything = [v for s in spans for v in s.attributes.values()] + [
            v for s in spans for e in s.events for v in e.attributes.values()
        ]
        assert not [v for v in everything if EMAIL in str(v)]  # nowhere in the trace
    else:
        assert out["capture_content"] is True
        assert a[t.GEN_AI_TOOL_CALL_ARGUMENTS] == json.dumps(
            {"email": EMAIL}, separators=(",", ":")
        )
        assert a[t.GEN_AI_TOOL_CALL_RESULT] == f"account 42 for {EMAIL}"
        # the chat spans: what was sent and received, in the GenAI message format
        first, second = named(spans, "chat tiny-1")
        asked = {"type": "tool_call", "id": "l1", "name": "lookup", "arguments": {"email": EMAIL}}
        assert json.loads(first.attributes[t.GEN_AI_OUTPUT_MESSAGES]) == [
            {"role": "assistant", "parts": [asked], "finish_reason": "tool_call"}
        ]
        (context, *transcript) = json.loads(second.attributes[t.GEN_AI_INPUT_MESSAGES])
        assert context["role"] == "user"
        assert context["parts"][0]["content"].startswith("Context: {")
        assert transcript == [
            {"role": "assistant", "parts": [asked]},
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": "l1",
                        "response": f"account 42 for {EMAIL}",
                    }
                ],
            },
        ]
        (instructions,) = json.loads(first.attributes[t.GEN_AI_SYSTEM_INSTRUCTIONS])
        assert instructions["type"] == "text" and instructions["content"]


def test_a_streamed_reply_adds_its_time_to_first_chunk_and_no_span(
    receiver: Receiver, tmp_path: Path
) -> None:
    plain = proc(receiver, tmp_path / "plain.db", "content")["runs"]["content"]
    before = received(receiver, 8)
    receiver.clear()
    out = proc(receiver, tmp_path / "streamed.db", "streamed")["runs"]["streamed"]
    spans = received(receiver, 8)  # the same spans as the unwatched run: none per chunk
    assert out["state"] == plain["state"] == "done"
    assert sorted(s.name for s in spans) == sorted(s.name for s in before)
    one_span_per_transition(spans, out["events"])
    chats = named(spans, "chat tiny-1")
    assert len(chats) == 2
    for chat in chats:
        waited = chat.attributes[t.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
        assert 0 <= waited <= (chat.end_ns - chat.start_ns) / 1e9
    assert not [s for s in before if t.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in s.attributes]


@pytest.mark.parametrize("content", [False, True])
def test_a_ported_sub_chart_span_carries_its_input_only_with_content_capture(
    receiver: Receiver, tmp_path: Path, content: bool
) -> None:
    flags = ("--content",) if content else ()
    out = proc(receiver, tmp_path / "runs.db", "ported", *flags)
    assert out["runs"]["ported"]["state"] == "done"
    spans = rx_spans = receiver.wait_for(lambda found: any(s.name == "state look" for s in found))
    (look,) = named(spans, "state look")
    (note,) = named(spans, "state look.note")
    assert note.parent_span_id == look.span_id  # the nesting, as for any sub-chart
    if content:
        assert json.loads(look.attributes[t.INPUT]) == {"who": "alice@example.com", "notes": None}
    else:
        assert t.INPUT not in look.attributes
        assert not [s for s in rx_spans for v in s.attributes.values() if "alice@" in str(v)]


# -- nothing without configure; sampling ---------------------------------------------------


def test_nothing_is_exported_when_tracing_is_not_configured(
    receiver: Receiver, tmp_path: Path
) -> None:
    out = proc(
        receiver,
        tmp_path / "runs.db",
        "nested",
        "--no-configure",
        env={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "unconfigured"},
    )
    run = out["runs"]["r1"]
    assert run["state"] == "done"
    assert run["trace"] == {}
    assert [e["span"] for e in run["events"]] == [None] * 10
    spans, requests = receiver.snapshot()
    assert spans == [] and requests == []


def test_a_run_sampled_out_at_start_exports_nothing(receiver: Receiver, tmp_path: Path) -> None:
    out = proc(
        receiver,
        tmp_path / "runs.db",
        "nested-start",
        env={"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
    )
    assert out["runs"]["r1"]["status"] == "waiting"
    spans, _ = receiver.snapshot()
    assert [s.name for s in spans] == []


CALLER = """
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from statechart import MemoryStore, ScriptedModel, call, reply, run_to_end, start
from tests.engine.test_nesting import workflow

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
app = trace.get_tracer("app")


async def main():
    chart, store = workflow(), MemoryStore()
    model = ScriptedModel([reply(call("dig", q="1"))])
    run = await start(chart, store=store, model=model)
    with app.start_as_current_span("request") as request:
        await run_to_end(chart, run, store=store, model=model)
    (agent,) = [s for s in spans.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert format(agent.context.trace_id, "032x") == run.trace["traceparent"].split("-")[1]
    assert agent.context.trace_id != request.get_span_context().trace_id
    assert [link.context.span_id for link in agent.links] == [
        request.get_span_context().span_id]


anyio.run(main)
"""


def test_a_drive_inside_the_callers_span_stays_in_the_run_trace_and_links_to_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CALLER], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


# -- scenarios with an in-memory exporter --------------------------------------------------

# OpenTelemetry's global tracer provider can be set only once per process, so each scenario
# below runs in its own `python -c` process with an SDK `TracerProvider` and an
# `InMemorySpanExporter` (an application's own provider: docs/tracing-jaeger.md says no
# helper is needed then). The process prints the finished spans and what it observed as
# JSON; the assertions run here.

PRELUDE = """
import contextlib, json, sys, time
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
        "start": s.start_time, "end": s.end_time,
        "attributes": dict(s.attributes),
        "events": [{"name": e.name, "attributes": dict(e.attributes)} for e in s.events],
        "links": [{"trace_id": _hex(l.context.trace_id, 32), "span_id": _hex(l.context.span_id)}
                  for l in s.links],
    }


def report(**extra):
    spans = [_span(s) for s in EXPORTER.get_finished_spans()]
    print(json.dumps({"spans": spans, **extra}, default=str))
"""


def memory_scenario(body: str) -> dict[str, Any]:
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


def exported(out: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The exported spans whose name starts with `prefix`."""
    return [s for s in out["spans"] if s["name"].startswith(prefix)]


def stepped(out: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The exported spans that carry a `statechart.step` (one each), by step."""
    found = [s for s in out["spans"] if "statechart.step" in s["attributes"]]
    steps = {s["attributes"]["statechart.step"]: s for s in found}
    assert len(steps) == len(found), "two spans carry one step"
    return steps


def one_span_each(out: dict[str, Any]) -> None:
    """Each stored event has its one span, and nothing but transitions, state visits, drives
    and the run's first span is a span."""
    events = out["events"]
    assert {n: s["span_id"] for n, s in stepped(out).items()} == {
        e["seq"]: e["span"] for e in events
    }
    others = [s for s in out["spans"] if "statechart.step" not in s["attributes"]]
    kinds = [s["name"].split()[0] for s in others]
    assert kinds.count("create_agent") == 1
    assert set(kinds) <= {"create_agent", "invoke_agent", "state"}, kinds


# -- a resume that migrates the run --------------------------------------------------------

MIGRATE = '''
from msgspec.structs import replace

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
    return replace(run, state="investigate.think",
                   visit=replace(run.visit, state="investigate"),
                   visits={"investigate": run.visits["research"]})


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
    events = [{"seq": e.seq, "trigger": e.trigger, "span": e.span}
              for e in await store.events("r1")]
    report(error=error, state=(await store.load("r1")).snapshot.state, events=events)

anyio.run(main)
'''


def test_a_resume_that_migrates_to_renamed_states_works_with_tracing_on() -> None:
    """A resume that migrates the run to renamed states works with a tracer provider set,
    as it does without one, and reaches `done`, one span per event."""
    out = memory_scenario(MIGRATE)
    assert out["error"] is None, out["error"]
    assert out["state"] == "done"
    assert "migrate" in [e["trigger"] for e in out["events"]]
    one_span_each(out)


def test_a_migration_ends_the_spans_of_the_states_the_run_left() -> None:
    """The new chart still has the state the run was in: its span (opened for the drive's
    first event) ends with the migration, before the state the run moved to opens."""
    kept = MIGRATE.replace(
        """new = Chart("desk", budget=Budget(max_steps=20),
            states=(State("investigate", tools=(look,)), DONE),
            edges=(Edge("investigate", "done"),))""",
        """new = Chart("desk", budget=Budget(max_steps=20),
            states=(State("research", tools=(look,)), State("investigate", tools=(look,)), DONE),
            edges=(Edge("research", "investigate"), Edge("investigate", "done")))""",
    )
    assert kept != MIGRATE
    out = memory_scenario(kept)
    assert out["error"] is None, out["error"]
    assert out["state"] == "done"
    one_span_each(out)
    (migrate,) = [e for e in out["events"] if e["trigger"] == "migrate"]
    _, research = exported(out, "state research")  # the first drive's, the second's
    (investigate,) = exported(out, "state investigate")
    (migration,) = [s for s in out["spans"] if s["span_id"] == migrate["span"]]
    assert migration["end"] <= research["end"] <= investigate["start"]


# -- a transition whose event could not be stored ------------------------------------------

LEASE_LOST = '''
STORE = MemoryStore()


@tool(retry="safe")
async def slow(q: str) -> str:
    """Slow."""
    await anyio.sleep(0.3)
    STORE._leases["r1"] = ("other-driver", time.time() + 60, 0)  # another process took over
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
    """When storing a transition's event fails (here with LeaseLostError), the transition's
    span still ends, as ERROR, and the invoke_agent span carries the error type."""
    out = memory_scenario(LEASE_LOST)
    assert out["error"] == "LeaseLostError"
    (agent,) = exported(out, "invoke_agent")
    assert agent["attributes"]["error.type"] == "LeaseLostError"
    assert sorted(stepped(out)) == [1]  # a refused append leaves no span of a step
    (refused,) = exported(out, "execute_tool slow")  # ended, as an error
    assert refused["status"] == "ERROR" and "statechart.step" not in refused["attributes"]
    assert refused["attributes"]["error.type"] == "LeaseLostError"


# -- a drive closed early ------------------------------------------------------------------

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
    """Closing a drive early with `contextlib.aclosing`, as its docstring says to, leaves the
    invoke_agent span UNSET, with no error.type."""
    out = memory_scenario(EARLY_STOP)
    (agent,) = exported(out, "invoke_agent")
    assert agent["attributes"].get("error.type") is None
    assert agent["status"] == "UNSET"


# -- a fork --------------------------------------------------------------------------------

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
    """One trace per run: a fork's invoke_agent span is in a trace of its own, not in its
    parent's."""
    out = memory_scenario(FORK)
    agents = {s["attributes"]["statechart.run.id"]: s for s in exported(out, "invoke_agent")}
    assert set(agents) == {"parent", "child"}
    assert agents["child"]["trace_id"] != agents["parent"]["trace_id"]


# -- a human decision that lost a race -----------------------------------------------------

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
    """Of two racing approvals, only the stored one has a successful transition span; the one
    refused with ConflictError is not exported as a second successful transition."""
    out = memory_scenario(HUMAN_RACE)
    assert sorted(out["results"].values()) == ["ConflictError", "stored"]
    (stored_span,) = out["events"]
    ok = [s for s in exported(out, "transition ok -> done") if s["status"] != "ERROR"]
    assert [s["span_id"] for s in ok] == [stored_span]


# -- the late result of a cancelled run ----------------------------------------------------

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
    """The `late_result` event of a call that finished after a cancel stores its span id, and
    that span is the transition span of its step."""
    out = memory_scenario(LATE_RESULT)
    assert out["state"] == "cancelled"
    assert [e["trigger"] for e in out["events"]] == ["propose", "cancel", "late_result"]
    late = out["events"][2]
    assert late["span"] is not None
    one_span_each(out)  # the refused append of the call's result left no span of its own
    late_span = stepped(out)[3]
    assert late_span["span_id"] == late["span"]
    assert late_span["name"] == "execute_tool ship"  # the call's own span records its result
    assert late_span["status"] == "UNSET"
    assert late_span["attributes"]["statechart.trigger"] == "late_result"


# -- a tool's error text with content capture off ------------------------------------------

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
    """With content capture off, a failing tool's error text (its result) is nowhere in the
    exported spans; the execute_tool span is ERROR with the exception's type."""
    out = memory_scenario(TOOL_ERROR)
    assert out["capture"] is False
    assert "alice@example.com" in out["result"]
    (tool_span,) = exported(out, "execute_tool lookup")
    assert tool_span["status"] == "ERROR"
    assert tool_span["attributes"]["error.type"] == "LookupError"
    leaked = [s["name"] for s in out["spans"] if "alice@example.com" in json.dumps(s)]
    assert leaked == []


# -- provider and model from a spec with colons --------------------------------------------

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
    """A spec is split at its first colon, as the registry does: `ollama:llama3.1:8b` gives
    provider `ollama`, model `llama3.1:8b` and the span name `chat llama3.1:8b`."""
    out = memory_scenario(MODEL_SPEC)
    (chat,) = exported(out, "chat ")
    assert chat["attributes"]["gen_ai.provider.name"] == "ollama"
    assert chat["attributes"]["gen_ai.request.model"] == "llama3.1:8b"
    assert chat["name"] == "chat llama3.1:8b"


# -- a call settled by its reconcile hook --------------------------------------------------

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
    """A reconcile hook that raises makes the call's execute_tool span ERROR with the hook's
    exception type, and the run asks a human."""
    out = reconcile_scenario("raise")
    assert out["first"] == "ask"  # the run waits: the hook could not tell
    (tool_span,) = exported(out, "execute_tool refund")
    assert tool_span["status"] == "ERROR"
    assert tool_span["attributes"].get("error.type") == "RuntimeError"


def test_a_reconciled_calls_result_attribute_is_the_result() -> None:
    """With content capture on, the result attribute of a call settled by its reconcile hook
    is the result the run recorded."""
    out = reconcile_scenario("ok")
    assert out["first"] == "results" and out["result"] == "refund 7 already issued"
    (tool_span,) = exported(out, "execute_tool refund")
    assert tool_span["attributes"]["gen_ai.tool.call.result"] == "refund 7 already issued"


# -- a code state's own calls --------------------------------------------------------------

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
    """Spans made inside a code state's handler (an instrumented client) are in the run's
    trace, under the state's span or one of its children."""
    out = memory_scenario(HANDLER)
    run_trace = out["trace"]["traceparent"].split("-")[1]
    (crm,) = exported(out, "GET /crm")
    (state,) = exported(out, "state check")
    assert crm["trace_id"] == run_trace
    below_state = {state["span_id"]} | {
        s["span_id"] for s in out["spans"] if s["parent"] == state["span_id"]
    }
    assert crm["parent"] in below_state


# -- a tool call cut off by cancellation ---------------------------------------------------

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
    """A tool call interrupted by an anyio cancellation ends its execute_tool span as ERROR
    with an error.type, as the invoke_agent span does."""
    out = memory_scenario(INTERRUPTED)
    (agent,) = exported(out, "invoke_agent")
    assert agent["status"] == "ERROR"
    (tool_span,) = exported(out, "execute_tool slow")
    assert tool_span["status"] == "ERROR"
    assert tool_span["attributes"].get("error.type") is not None
    assert "statechart.step" not in tool_span["attributes"]  # no event recorded it


# -- a start that is refused ---------------------------------------------------------------

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
    """A start refused because the run id exists exports no successful span tagged with that
    run id outside the run's own trace."""
    out = memory_scenario(DUPLICATE_START)
    assert out["error"] == "ConflictError"
    run_trace = out["trace"]["traceparent"].split("-")[1]
    traces = {
        s["trace_id"]
        for s in out["spans"]
        if s["attributes"].get("statechart.run.id") == "r1" and s["status"] != "ERROR"
    }
    assert traces == {run_trace}


# -- message content, clipped ----------------------------------------------------------------


def test_content_is_clipped_and_stays_valid_json() -> None:
    from statechart import Message, Reply, Request, ToolCall
    from statechart.tracing import content

    long = "x" * (content.LIMIT + 904)
    assert content.clipped(long) == "x" * content.LIMIT + "…[904 more]"
    assert content.clipped("short") == "short"
    request = Request(
        state="s",
        instructions="",
        context={"note": long},
        transcript=(
            Message(role="assistant", tool_calls=(ToolCall(id="c1", name="f", arguments={}),)),
            Message(role="tool", tool_call_id="c1", content=long),
        ),
        tools=(),
    )
    found = content.request_attributes(request)
    (context, asked, answered) = json.loads(found[t.GEN_AI_INPUT_MESSAGES])
    assert context["parts"][0]["content"].endswith("…[925 more]")  # "Context: {...}" clipped
    assert asked == {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {}}],
    }
    assert answered["parts"][0]["response"] == content.clipped(long)
    assert json.loads(found[t.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "You are in state 's'."}  # what the adapters send
    ]
    said = json.loads(content.reply_attributes(Reply(content="hi"))[t.GEN_AI_OUTPUT_MESSAGES])
    assert said == [
        {"role": "assistant", "parts": [{"type": "text", "content": "hi"}], "finish_reason": "stop"}
    ]
    assert content.finish_reason(Reply(content="x", finish_reason="length")) == "length"


def test_the_budget_that_binds_is_the_outermost_on_a_tie_even_when_both_overshot() -> None:
    """Two levels spent past their caps (overshoot is at most one call): both have 0 left,
    and the outermost, which routes first, is the level named."""
    from types import SimpleNamespace

    from statechart import Spent
    from statechart.engine import compiled
    from statechart.tracing import facts
    from tests.engine.test_nesting import workflow

    event = SimpleNamespace(
        run_id="r1",
        source=f"{P}.think",
        target=f"{P}.act",
        trigger="propose",
        actor="model",
        refused=None,
        exhausted=None,
        error=None,
        call=None,
    )
    for root, explore, binds in ((70, 45, "root"), (55, 45, "explore"), (20, 25, "explore")):
        ledger = {"root": Spent(steps=root), "explore": Spent(steps=explore)}
        record = SimpleNamespace(event=event, run=SimpleNamespace(ledger=ledger))
        found = facts.transition_attributes(compiled(workflow()), record)  # type: ignore[arg-type]
        left = max(min(ROOT_STEPS - root, EXPLORE_STEPS - explore), 0)
        assert (found["statechart.budget.steps.left"], found["statechart.budget.steps.level"]) == (
            left,
            binds,
        ), (root, explore)


def test_regions_are_sibling_spans_under_the_parallel_state(
    receiver: Receiver, tmp_path: Path
) -> None:
    """Three regions, traced and still concurrent (their lookups meet at a barrier): a
    state span each, all children of the parallel state's span; every region transition
    (the ones the engine makes without a call too) has its one span, under its own
    region's state spans."""
    out = proc(receiver, tmp_path / "runs.db", "parallel")
    events = out["runs"]["parallel"]["events"]
    assert out["runs"]["parallel"]["state"] == "done"
    assert [e for e in events if e["error"]] == []  # the barrier was met: no call failed
    spans = received(receiver, 26)
    one_span_per_transition(spans, events)
    by_id = {s.span_id: s for s in spans}
    (gather,) = named(spans, "state gather")
    regions = [s for s in spans if s.parent_span_id == gather.span_id]
    assert sorted(s.name for s in regions) == [  # and the join, the state's own transition
        "state gather.papers",
        "state gather.people",
        "state gather.web",
        "transition gather -> write.think",
    ]
    for e in events:
        if not e["source"].startswith("gather."):
            continue
        region = ".".join(e["source"].split(".")[:2])
        span = by_id[e["span"]]
        chain = []
        while span.parent_span_id in by_id:
            span = by_id[span.parent_span_id]
            chain.append(span.name)
        assert chain[:3] == [f"state {region}.search", f"state {region}", "state gather"], e
