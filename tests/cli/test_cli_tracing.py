"""Tracing from the command line with no code: each `statechart` command that records a
transition sets up the SDK from the standard `OTEL_*` variables, exports to a real OTLP/HTTP
receiver on 127.0.0.1 (decoded with opentelemetry-proto) and flushes before it exits."""

from __future__ import annotations

import importlib.util
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from statechart import SQLiteStore
from tests.support.cli import AGENT, ERROR, OK, ROOT, TICKET, WAITING, cli_env, run_cli
from tests.support.otlp_receiver import ReceivedSpan, Receiver
from tests.test_tracing import one_span_per_transition

_OTEL = ("OTEL_",)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rx:
        yield rx


def env(**otel: str) -> dict[str, str]:
    """The CLI's environment with no `OTEL_*` variable but `otel`."""
    clean = {k: v for k, v in cli_env().items() if not k.startswith(_OTEL)}
    return {**clean, **otel}


def cli(cwd: Path, environ: dict[str, str], *args: str, code: int | None = OK) -> Any:
    return run_cli(cwd, *args, code=code, environ=environ)


def stored(db: Path, run_id: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The run's stored trace context and its events (seq and span id)."""

    async def read() -> tuple[dict[str, str], list[dict[str, Any]]]:
        store = SQLiteStore(db)
        try:
            loaded = await store.load(run_id)
            events = await store.events(run_id)
        finally:
            store.close()
        return loaded.snapshot.trace, [{"seq": e.seq, "span": e.span} for e in events]

    return anyio.run(read)


def one_trace(spans: list[ReceivedSpan], trace: dict[str, str]) -> None:
    """Every span is in the run's stored trace and has its parent among them, but the first."""
    trace_id = trace["traceparent"].split("-")[1]
    assert {s.trace_id for s in spans} == {trace_id}
    ids = {s.span_id for s in spans}
    orphans = [s.name for s in spans if s.parent_span_id and s.parent_span_id not in ids]
    assert orphans == []
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "create_agent support_triage"
    assert root.span_id == trace["traceparent"].split("-")[2]


def test_run_approve_and_resume_in_three_processes_are_one_trace(
    receiver: Receiver, tmp_path: Path
) -> None:
    """Only `OTEL_EXPORTER_OTLP_ENDPOINT` set: the run waits, a second process approves, a
    third resumes; the receiver holds one trace, every span parented, one per transition."""
    otel = env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
    out = cli(tmp_path, otel, "run", AGENT, "--input", TICKET, "--run-id", "t1", code=WAITING)
    assert "waiting in 'send.approve'" in out.stdout
    first = len(receiver.snapshot()[0])
    assert first > 0  # flushed when the first process exited
    cli(tmp_path, otel, "approve", "t1", "--no-resume", "--by", "dana")
    assert len(receiver.snapshot()[0]) == first + 1  # the human decision's one span
    cli(tmp_path, otel, "resume", "t1")
    trace, events = stored(tmp_path / "statechart.db", "t1")
    spans, posts = receiver.snapshot()
    assert receiver.errors == [] and posts
    one_trace(spans, trace)
    one_span_per_transition(spans, events)
    assert len(events) == 21  # as the same run in tests/cli/test_cli.py
    assert len([s for s in spans if s.name == "invoke_agent support_triage"]) == 2
    (human,) = [s for s in spans if s.attributes.get("statechart.actor") == "human"]
    assert human.name == "transition send.approve -> send.act"
    assert {s.resource["service.name"] for s in spans} == {"statechart"}  # the default


@pytest.mark.parametrize(
    "otel",
    [
        {},
        {"OTEL_SERVICE_NAME": "desk"},  # a name alone exports nothing
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "{endpoint}"},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "{endpoint}"},
    ],
    ids=["nothing-set", "service-name-only", "sdk-disabled", "exporter-none"],
)
def test_nothing_is_exported_or_stored_unless_asked(
    receiver: Receiver, tmp_path: Path, otel: dict[str, str]
) -> None:
    given = {k: v.format(endpoint=receiver.endpoint) for k, v in otel.items()}
    cli(tmp_path, env(**given), "run", AGENT, "--input", TICKET, "--run-id", "t1", code=WAITING)
    trace, events = stored(tmp_path / "statechart.db", "t1")
    assert trace == {} and {e["span"] for e in events} == {None}
    assert receiver.snapshot() == ([], [])


def test_service_name_resource_attributes_and_sampler_come_from_the_environment(
    receiver: Receiver, tmp_path: Path
) -> None:
    otel = env(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.endpoint}/v1/traces",
        OTEL_SERVICE_NAME="triage-desk",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test,service.name=ignored",
    )
    cli(tmp_path, otel, "run", AGENT, "--input", TICKET, "--run-id", "t1", code=WAITING)
    spans, _ = receiver.snapshot()
    assert spans and {s.resource["service.name"] for s in spans} == {"triage-desk"}
    assert {s.resource["deployment.environment"] for s in spans} == {"test"}
    receiver.clear()
    off = {**otel, "OTEL_TRACES_SAMPLER": "always_off"}
    cli(tmp_path, off, "run", AGENT, "--input", TICKET, "--run-id", "t2", code=WAITING)
    assert receiver.snapshot()[0] == []


def test_console_exporter_prints_the_spans(tmp_path: Path) -> None:
    out = cli(
        tmp_path,
        env(OTEL_TRACES_EXPORTER="console"),
        *("run", AGENT, "--input", TICKET, "--run-id", "t1"),
        code=WAITING,
    ).stdout
    assert '"name": "invoke_agent support_triage"' in out
    assert '"name": "chat support_triage"' in out


@pytest.mark.parametrize(
    ("otel", "says"),
    [
        (
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc",
        ),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json is not a supported protocol",
        ),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "names 'zipkin', which statechart cannot set up"),
    ],
    ids=["grpc-missing", "http-json", "unknown-exporter"],
)
def test_an_exporter_that_cannot_be_set_up_is_a_one_line_error(
    receiver: Receiver, tmp_path: Path, otel: dict[str, str], says: str
) -> None:
    if "OTEL_EXPORTER_OTLP_PROTOCOL" in otel and importlib.util.find_spec(
        "opentelemetry.exporter.otlp.proto.grpc"
    ):
        pytest.skip("the gRPC exporter is installed here: grpc is a supported protocol")
    given = env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, **otel)
    done = cli(tmp_path, given, "run", AGENT, "--input", TICKET, code=ERROR)
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr
    assert not (tmp_path / "statechart.db").exists()  # nothing was started


SLOW = '''
import anyio

from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply, tool


class Boom(BaseException):
    """Not an Exception: nothing in the framework catches it."""


@tool(retry="safe", repeatable=True)
async def tick(n: int) -> str:
    """Wait a little."""
    if n == {boom}:
        raise Boom("the disk went away")
    await anyio.sleep(0.05)
    return f"tick {{n}}"


def policy(request):
    done = sum(m.role == "tool" for m in request.transcript)
    if done < 8 and any(t.name == "tick" for t in request.tools):
        return reply(call("tick", n=done))
    return reply(call("next_state", target="done"))


def demo_model():
    return FunctionModel(policy, spec="demo:slow")


chart = Chart(
    "slow",
    budget=Budget(max_steps=400),
    states=(State("work", tools=(tick,), instructions="Tick.", max_iterations=20, max_visits=20),
            State("done", kind="terminal")),
    edges=(Edge("work", "done"), Edge("work", "work")),
)
'''


def _events(db: Path) -> int:
    try:
        with sqlite3.connect(db) as c:
            return int(c.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_spans_are_flushed_on_ctrl_c_and_after_an_error(receiver: Receiver, tmp_path: Path) -> None:
    """Exports are batched for a minute here, so only the flush at exit can send them."""
    otel = env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="60000")
    (tmp_path / "slow.py").write_text(SLOW.format(boom=-1))
    command = [sys.executable, "-m", "statechart.cli", "run", "slow.py:chart", "--run-id", "c1"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=otel, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _events(tmp_path / "statechart.db") < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # stops after the transition under way is stored
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    trace, events = stored(tmp_path / "statechart.db", "c1")
    assert 4 <= len(events) < 18  # stopped part way (a whole run makes 18)
    spans, _ = receiver.snapshot()
    one_span_per_transition(spans, events)
    assert {s.trace_id for s in spans} == {trace["traceparent"].split("-")[1]}

    receiver.clear()
    (tmp_path / "slow.py").write_text(SLOW.format(boom=2))
    command[-1] = "c2"
    done = subprocess.run(command, cwd=tmp_path, env=otel, capture_output=True, text=True)
    assert done.returncode != 0 and "Boom" in done.stderr
    _, events = stored(tmp_path / "statechart.db", "c2")
    spans, _ = receiver.snapshot()
    assert len(events) == 5  # two calls made and stored, the third proposed; running it raised
    (agent,) = [s for s in spans if s.name == "invoke_agent slow"]
    assert agent.status_code == "ERROR" and agent.attributes["error.type"] == "Boom"
    (cut,) = [
        s for s in spans if s.name == "execute_tool tick" and "statechart.step" not in s.attributes
    ]
    assert cut.attributes["gen_ai.tool.call.id"] and cut.status_code == "ERROR"


def test_run_help_says_how_to_trace(tmp_path: Path) -> None:
    out = cli(tmp_path, env(), "run", "--help").stdout
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in " ".join(out.split())


def test_an_applications_own_provider_is_left_alone(receiver: Receiver) -> None:
    """`configure_from_environment()` does nothing once a provider is installed."""
    script = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from statechart import tracing

mine = TracerProvider()
trace.set_tracer_provider(mine)
print(json.dumps([tracing.configure_from_environment() is None,
                  trace.get_tracer_provider() is mine]))
"""
    given = env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=given, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, True]


OWN_PROVIDER = """
import atexit
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply

mine = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(mine))
trace.set_tracer_provider(provider)  # the application's own, installed on import
atexit.register(lambda: print("mine:", len(mine.get_finished_spans()), file=sys.stderr))


def demo_model():
    return FunctionModel(lambda request: reply(call("next_state", target="done")), spec="demo:own")


chart = Chart("own", budget=Budget(max_steps=5), states=(State("work", instructions="Go."),
              State("done", kind="terminal")), edges=(Edge("work", "done"),))
"""


def test_a_chart_module_that_installs_its_own_provider_keeps_it(tmp_path: Path) -> None:
    """The command sets tracing up only after loading the chart, so the application's
    provider (installed when its module is imported) gets the spans, not the console."""
    (tmp_path / "own.py").write_text(OWN_PROVIDER)
    done = cli(tmp_path, env(OTEL_TRACES_EXPORTER="console"), "run", "own.py:chart")
    assert '"name": ' not in done.stdout  # the console exporter was never set up
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("mine: ")]
    assert int(line.split()[1]) == 2 + 2 + 2  # first span, drive, 2 states, 2 transitions
