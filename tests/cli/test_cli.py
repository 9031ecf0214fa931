"""The `statechart` command, each invocation a real process on a real SQLite file."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from statechart import SQLiteStore
from tests.models.test_openai import completion
from tests.support.cli import (
    CANCELLED,
    DESK,
    ERROR,
    OK,
    ORDER,
    USAGE,
    WAITING,
    cli_env,
    run_cli,
    waiting_id,
)
from tests.support.provider_server import Provider, serve

ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{ROOT}/agents/support_triage.py:chart"
TICKET = '{"ticket_id": "T-1001"}'


def cli(tmp_path: Path, *args: str, code: int | None = OK) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, code=code, environ={**os.environ, "PYTHONPATH": str(ROOT)})


def started(tmp_path: Path) -> str:
    out = cli(tmp_path, "run", AGENT, "--input", TICKET, code=WAITING).stdout
    assert "waiting in 'send.approve'" in out
    assert "steps 1 (59 left)" in out  # live progress shows each budget spent and left
    (line,) = [x for x in out.splitlines() if x.startswith("approve: ")]
    return line.split()[3]


def test_run_waits_then_approve_in_another_process_resumes_to_done(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    assert (tmp_path / "statechart.db").exists()  # the default store, in the working dir
    header, *rows = cli(tmp_path, "runs", "--status", "waiting").stdout.splitlines()
    columns = "RUN CHART STATUS STATE SEQ STEPS TOKENS COST $"
    assert header.split() == columns.split()
    (waiting,) = json.loads(cli(tmp_path, "runs", "--status", "waiting", "--json").stdout)
    assert waiting["steps"] == 17 and waiting["tokens"] > 0  # live, from the last event
    assert [r.split() for r in rows] == [
        [
            *(run_id, "support_triage", "waiting", "send.approve", "17", "17"),
            *(str(waiting["tokens"]), f"{waiting['cost_micros'] / 1e6:.6f}"),
        ]
    ]
    out = cli(tmp_path, "approve", run_id, "--by", "dana", "--note", "checked", code=OK).stdout
    assert "approved by dana" in out and f"run {run_id}: ended in 'done'" in out
    assert cli(tmp_path, "runs", "--status", "waiting").stdout.splitlines() == [header]
    (listed,) = json.loads(cli(tmp_path, "runs", "--json").stdout)
    assert (listed["run_id"], listed["status"], listed["state"]) == (run_id, "ended", "done")
    shown = cli(tmp_path, "show", run_id).stdout
    assert "human:dana" in shown and "send_reply" in shown
    assert "total: 21 transitions, 20 steps, 9 model calls, 5 tool calls" in shown
    data = json.loads(cli(tmp_path, "show", run_id, "--json").stdout)
    assert data["run"]["state"] == "done" and len(data["events"]) == 21
    assert data["totals"]["tool_calls"] == 5
    assert [e["by"] for e in data["events"] if e["actor"] == "human"] == ["dana"]


def test_approve_with_an_edit_and_no_resume_only_records_it(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    out = cli(
        tmp_path, "approve", run_id, "--edit", '{"text": "edited reply"}', "--no-resume"
    ).stdout
    assert "approved by cli" in out and "ended" not in out
    db = sqlite3.connect(tmp_path / "statechart.db")
    status, state = db.execute("SELECT status, state FROM runs").fetchone()
    assert (status, state) == ("running", "send.act")
    assert "done" in cli(tmp_path, "resume", run_id).stdout


def test_reject_then_resume_and_cancel(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    out = cli(tmp_path, "reject", run_id, "--reason", "too terse").stdout
    assert "rejected by cli" in out and "statechart resume" in out
    cli(tmp_path, "cancel", run_id, "--reason", "customer called")
    shown = cli(tmp_path, "show", run_id).stdout
    assert "now: ended in 'cancelled' (cancelled: customer called)" in shown


def test_fork_starts_a_new_run_that_resume_drives(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    out = cli(tmp_path, "fork", run_id, "--at", "4").stdout
    child = out.split()[1]
    assert f"forked from {run_id} at seq 4" in out
    assert "waiting in 'send.approve'" in cli(tmp_path, "resume", child, code=WAITING).stdout


NESTED = """
from statechart import Budget, Chart, Edge, State

DONE = State("done", kind="terminal")


def inner():
    return Chart("deep", states=(State("probe"), DONE), edges=(Edge("probe", "done"),))


def middle():
    return Chart("middle", states=(State("inner", kind="chart", chart=inner,
                                         exits={"done": "done"}), DONE))


def workflow():
    return Chart("workflow", budget=Budget(max_steps=60), states=(
        State("explore", kind="chart", chart=middle, exits={"done": "report"}),
        State("report"), DONE), edges=(Edge("report", "done"),))
"""


def test_check_and_diagram(tmp_path: Path) -> None:
    assert cli(tmp_path, "check", AGENT).stdout.startswith("ok: support_triage version ")
    (tmp_path / "nested.py").write_text(NESTED)
    nested = cli(tmp_path, "diagram", "nested.py:workflow").stdout
    assert nested.startswith("stateDiagram-v2\n")
    assert 'state "explore" as s_explore {' in nested
    assert 'state "inner" as s_explore__inner {' in nested
    assert "s_explore --> s_report : exit done" in nested
    run_id = started(tmp_path)
    marked = cli(tmp_path, "diagram", "--run", run_id).stdout
    assert "s_intake --> s_research : taken 1x" in marked
    assert marked.rstrip().endswith("class s_send current")


@pytest.mark.parametrize(
    "args",
    [
        ("resume", "no-such-run"),
        ("check", f"{ROOT}/agents/support_triage.py:nope"),
        ("check", "agents/missing.py:chart"),
        ("run", AGENT, "--input", "{not json"),
    ],
)
def test_errors_are_one_line_and_exit_1(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = cli(tmp_path, *args, code=ERROR)
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [("run",), ("show", "r", "--bogus"), ("nope",)])
def test_a_wrong_command_line_is_a_usage_error_exit_2(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = cli(tmp_path, *args, code=USAGE)
    assert "Usage: statechart" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "statechart.db").exists()


def test_an_unknown_status_is_one_error_line_exit_2(tmp_path: Path) -> None:
    done = cli(tmp_path, "runs", "--status", "bogus", code=USAGE)
    assert done.stderr.splitlines() == [
        "error: --status 'bogus': use running, waiting, sleeping or ended"
    ]
    assert not (tmp_path / "statechart.db").exists()


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "statechart.db").close()
    done = cli(tmp_path, "--debug", "resume", "no-such-run", code=None)
    assert done.returncode != 0 and "Traceback" in done.stderr
    assert "RunNotFoundError" in done.stderr


@pytest.mark.parametrize(
    "command",
    ["run", "runs", "show", "resume", "approve", "reject", "cancel", "fork", "check", "diagram"],
)
def test_every_command_has_help_with_an_example(tmp_path: Path, command: str) -> None:
    assert "Example" in cli(tmp_path, command, "--help").stdout


def test_input_file_and_filtering_runs_by_chart(tmp_path: Path) -> None:
    (tmp_path / "ticket.json").write_text(TICKET)
    out = cli(
        tmp_path, "run", AGENT, "--input-file", "ticket.json", "--run-id", "r-1", code=WAITING
    ).stdout
    assert "run r-1 of support_triage" in out and "waiting" in out
    assert (
        cli(tmp_path, "runs", "--chart", "support_triage").stdout.splitlines()[1].startswith("r-1 ")
    )
    assert len(cli(tmp_path, "runs", "--chart", "refund_desk").stdout.splitlines()) == 1


# -- approving: edits, recorded servers and models, other directories ----------------------


def one_clear_line(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert done.stderr.startswith("error: "), done.stderr[-600:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


TWICE = '''
from pydantic import BaseModel
from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply, tool
from statechart.models import register


class Ctx(BaseModel):
    first: str | None = None
    second: str | None = None


@tool(retry="never", needs_approval=True)
def act_one() -> str:
    """Step one."""
    return "one done"


@tool(retry="never", needs_approval=True)
def act_two() -> str:
    """Step two."""
    return "two done"


chart = Chart("twice", context=Ctx, budget=Budget(max_steps=40), states=(
    State("one", tools=(act_one,), writes=("first",), instructions="one"),
    State("two", tools=(act_two,), writes=("second",), instructions="two"),
    State("done", kind="terminal")), edges=(Edge("one", "two"), Edge("two", "done")))


def policy_for(spec):
    def policy(request):
        ran = {m.tool_call_id for m in request.transcript if m.role == "tool"}
        if request.state == "one":
            if "a1" not in ran:
                return reply(call("act_one", "a1"))
            return reply(call("next_state", "n1", target="two", first=spec))
        if "a2" not in ran:
            return reply(call("act_two", "a2"))
        return reply(call("next_state", "n2", target="done", second=spec))
    return policy


def demo_model(spec="demo:twice-a"):
    return FunctionModel(policy_for(spec), spec=spec)


register("demo:twice-a", demo_model)
register("demo:twice-b", demo_model)
'''


def test_approve_edit_with_an_unknown_field_is_refused_not_dropped(tmp_path: Path) -> None:
    """`approve --edit` with a field the tool does not have (`amount` on the refund desk,
    whose field is `amount_cents`) is an error before any money moves, not silently dropped."""
    run_id = waiting_id(run_cli(tmp_path, "run", DESK, "--input", ORDER, code=WAITING).stdout)
    done = run_cli(tmp_path, "approve", run_id, "--edit", '{"amount": 15}', code=None)
    bank = tmp_path / "refund_bank.db"
    refunds = (
        sqlite3.connect(bank).execute("SELECT amount_cents FROM refunds").fetchall()
        if bank.exists()
        else []
    )
    assert refunds == [], f"the edit was dropped and {refunds} cents were refunded"
    assert done.returncode != 0 and "amount" in done.stderr


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as found:
        yield found


def test_the_printed_approve_command_keeps_the_openai_compatible_server(
    tmp_path: Path, provider: Provider
) -> None:
    """A run started with `--base-url` against an OpenAI-compatible server records it: the
    printed `approve` command, run as is, resumes against the same server. (Every host but
    127.0.0.1 goes to a closed proxy port, so nothing leaves the machine.)"""
    for answer in [
        completion(("c1", "next_state", '{"target": "gather", "category": "billing"}')),
        completion(("c2", "lookup_order", '{"order_id": "A-7"}')),
        completion(("c3", "next_state", '{"target": "resolve", "facts": "charged twice"}')),
        completion(("c4", "issue_refund", '{"order_id": "A-7", "amount_cents": 2000}')),
        completion(("c5", "next_state", '{"target": "verify", "resolution": "refunded"}')),
    ]:
        provider.answer(answer)
    environ = cli_env(
        OPENAI_API_KEY="test",
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        ALL_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    out = run_cli(
        tmp_path,
        "--base-url",
        f"{provider.url}/v1",
        "run",
        DESK,
        "--input",
        ORDER,
        "--model",
        "openai:tiny-1",
        environ=environ,
        code=WAITING,
    ).stdout
    assert "waiting in 'resolve.approve'" in out and len(provider.requests) == 4
    (line,) = [x for x in out.splitlines() if x.startswith("approve: ")]
    printed = line.removeprefix("approve: statechart ").split()
    done = run_cli(tmp_path, *printed, environ=environ)
    assert len(provider.requests) == 5, done.stdout[-800:]
    assert "ended in 'done'" in done.stdout


def test_a_run_started_with_a_relative_path_can_be_approved_from_another_directory(
    tmp_path: Path,
) -> None:
    """`run` stores the chart source resolved, so a run started as `agent.py:chart` can be
    approved (resumed, forked, drawn) from any other directory."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "agent.py").write_text(TWICE)
    run_id = waiting_id(run_cli(a, "run", "agent.py:chart", code=WAITING).stdout)
    done = run_cli(b, "approve", run_id, "--db", str(a / "statechart.db"), code=WAITING)
    assert "waiting in 'two.approve'" in done.stdout


def test_a_model_given_on_approve_is_recorded_for_the_next_resume(tmp_path: Path) -> None:
    """`approve --model` is recorded in the run: the next plain `approve` keeps that model,
    and `show` credits the moves to it."""
    (tmp_path / "agent.py").write_text(TWICE)
    run_id = waiting_id(run_cli(tmp_path, "run", "agent.py:chart", code=WAITING).stdout)
    out = run_cli(tmp_path, "approve", run_id, "--model", "demo:twice-b", code=WAITING).stdout
    assert "waiting in 'two.approve'" in out
    run_cli(tmp_path, "approve", run_id)
    data = json.loads(run_cli(tmp_path, "show", run_id, "--json").stdout)
    assert data["run"]["context"]["first"] == "demo:twice-b"
    assert data["run"]["context"]["second"] == "demo:twice-b", data["run"]["context"]
    assert data["run"]["model"] == "demo:twice-b"


def test_approve_of_an_agent_that_only_defines_demo_model_is_not_half_done(tmp_path: Path) -> None:
    """For an agent that defines `demo_model()` but registers no spec, `approve` either
    resumes the run or leaves it waiting: it never stores the approval and then fails."""
    agent = "\n".join(x for x in TWICE.splitlines() if not x.startswith("register("))
    (tmp_path / "agent.py").write_text(agent)
    run_id = waiting_id(run_cli(tmp_path, "run", "agent.py:chart", code=WAITING).stdout)
    done = run_cli(tmp_path, "approve", run_id, code=None)
    still_waiting = run_id in run_cli(tmp_path, "runs", "--status", "waiting").stdout
    assert done.returncode == 0 or still_waiting, done.stderr


# -- Ctrl-C --------------------------------------------------------------------------------

SLOW = '''
import time
from pathlib import Path
from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply, tool


@tool(retry="safe")
def slow() -> str:
    """Takes a while."""
    Path("started").write_text("x")
    time.sleep(4)
    return "slow done"


@tool(retry="never")
def mark() -> str:
    """A side effect."""
    Path("marked").write_text("x")
    return "marked"


chart = Chart("slow", budget=Budget(max_steps=20), states=(
    State("work", tools=(slow, mark), instructions="work"), State("done", kind="terminal")),
    edges=(Edge("work", "done"),))


def policy(request):
    ran = {m.tool_call_id for m in request.transcript if m.role == "tool"}
    if "s" not in ran:
        return reply(call("slow", "s"))
    if "m" not in ran:
        return reply(call("mark", "m"))
    return reply(call("next_state", "n", target="done"))


def demo_model(spec="demo:slow"):
    return FunctionModel(policy, spec=spec)
'''


def test_ctrl_c_during_a_tool_stops_the_run_before_its_next_side_effect(tmp_path: Path) -> None:
    """Ctrl-C while a synchronous tool runs stops `statechart run` before its next tool (a
    side effect) runs: the run does not go on to `done`, and the exit is nonzero."""
    (tmp_path / "slow.py").write_text(SLOW)
    proc = subprocess.Popen(
        [sys.executable, "-m", "statechart.cli", "run", "slow.py:chart"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the tool never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert not (tmp_path / "marked").exists(), f"Ctrl-C ignored; the run went on:\n{out}"
    assert proc.returncode != 0
    assert "ended in 'done'" not in out


# -- errors and reading commands -----------------------------------------------------------


@pytest.fixture
def waiting_run(tmp_path: Path) -> str:
    return waiting_id(run_cli(tmp_path, "run", AGENT, "--input", TICKET, code=WAITING).stdout)


@pytest.mark.parametrize(
    "args",
    [
        ("diagram", DESK, "--run", "{run}"),  # KeyError: 'send.approve' in diagram._active
        ("approve", "{run}", "--edit", "[1]"),  # TypeError in human._edited ({**base, **edits})
        ("approve", "{run}", "--edit", '"checked"'),  # same, with a JSON string
        ("run", AGENT, "--input", "[1]"),  # TypeError in driver.start: dict([1])
        ("run", AGENT, "--input", TICKET, "--model", "openai"),  # IndexError in openai.from_spec
        ("run", AGENT, "--input", TICKET, "--model", "anthropic"),  # same in anthropic.from_spec
        ("check", f"{ROOT}/agents/support_triage.py:demo_policy"),  # TypeError: loading calls it
    ],
)
def test_more_errors_are_one_line_and_a_nonzero_exit(
    tmp_path: Path, waiting_run: str, args: tuple[str, ...]
) -> None:
    """Bad JSON shapes, bare model specs, a non-chart target, a context that fails validation
    and a diagram of a run on another chart are each one `error:` line and a nonzero exit."""
    done = run_cli(tmp_path, *(a.replace("{run}", waiting_run) for a in args), code=None)
    one_clear_line(done)


def test_bad_json_in_edit_names_the_option(tmp_path: Path, waiting_run: str) -> None:
    """Malformed JSON given to `approve --edit` is one error line that names `--edit`."""
    done = run_cli(tmp_path, "approve", waiting_run, "--edit", "{bad", code=None)
    one_clear_line(done)
    assert "--edit" in done.stderr


def test_reading_commands_do_not_create_a_store(tmp_path: Path) -> None:
    """`show` (like every reading command) with a --db path that does not exist fails
    without creating an empty store there."""
    done = run_cli(tmp_path, "show", "some-run", "--db", "typo.db", code=None)
    assert done.returncode != 0
    assert not (tmp_path / "typo.db").exists()


def test_input_that_does_not_validate_lists_every_field_and_creates_no_store(
    tmp_path: Path,
) -> None:
    """A context that fails validation names every field with what is wrong (pydantic's
    own message would be cut), and nothing is created: no store file."""
    done = run_cli(
        tmp_path,
        "run",
        DESK,
        "--input",
        '{"order_id": 7, "category": "x", "facts": [1]}',
        code=ERROR,
    )
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "error: Ticket is not valid:" or lines[0].endswith("is not valid:")
    assert "  order_id: Input should be a valid string" in lines
    assert any(x.startswith("  category: Input should be") for x in lines), lines
    assert any(x.startswith("  facts: Input should be a valid string") for x in lines), lines
    assert "Traceback" not in done.stderr and "https://" not in done.stderr
    assert not (tmp_path / "statechart.db").exists()


@pytest.mark.parametrize("model", ["nope", "gpt-4o", "openai:"])
def test_an_unknown_model_speaks_of_the_flag_and_creates_no_store(
    tmp_path: Path, model: str
) -> None:
    done = run_cli(tmp_path, "run", AGENT, "--input", TICKET, "--model", model, code=ERROR)
    assert "--model" in done.stderr and "model=" not in done.stderr, done.stderr
    assert not (tmp_path / "statechart.db").exists()


def test_a_garbled_store_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / "broken.db").write_bytes(b"this is not a database" * 100)
    for args in (("runs",), ("show", "r-1"), ("run", AGENT, "--input", TICKET)):
        done = run_cli(tmp_path, *args, "--db", "broken.db", code=ERROR)
        assert done.stderr.startswith("error: ") and "broken.db" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_hints_are_shell_quoted(tmp_path: Path) -> None:
    """A run id holding quotes and a semicolon is printed quoted: pasting the printed
    command approves that run and runs nothing else."""
    weird = "r'1; touch pwned"
    out = run_cli(tmp_path, "run", AGENT, "--input", TICKET, "--run-id", weird, code=WAITING)
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("approve: ")]
    argv = shlex.split(line.removeprefix("approve: "))
    assert argv[:3] == ["statechart", "approve", weird]
    done = subprocess.run(
        ["bash", "-c", line.removeprefix("approve: ").replace("statechart", "$SC", 1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**cli_env(), "SC": f"{sys.executable} -m statechart.cli"},
        timeout=120,
    )
    assert done.returncode == OK, done.stderr
    assert not (tmp_path / "pwned").exists()


def test_exit_codes_tell_done_waiting_failed_and_cancelled_apart(tmp_path: Path) -> None:
    waiting = started(tmp_path)
    assert cli(tmp_path, "resume", waiting, code=WAITING).stdout.count("waiting in") == 1
    cli(tmp_path, "cancel", waiting, "--reason", "duplicate", code=OK)
    assert "ended in 'cancelled'" in cli(tmp_path, "resume", waiting, code=CANCELLED).stdout
    other = started(tmp_path)
    cli(tmp_path, "approve", other, code=OK)
    assert "ended in 'done'" in cli(tmp_path, "resume", other, code=OK).stdout


PYTHON_STARTED = """
import anyio
from statechart import Budget, Chart, Edge, FunctionModel, SQLiteStore, State, call, reply
from statechart import run_to_end, start, tool


@tool(retry="never", needs_approval=True)
def send(text: str) -> str:
    \"\"\"Send it.\"\"\"
    return "sent"


def make():
    return Chart(
        NAME,
        states=(
            State("write", tools=(send,), instructions="Write, send, finish."),
            State("done", kind="terminal"),
        ),
        edges=(Edge("write", "done"),),
        budget=Budget(max_steps=20),
    )


def policy(request):
    sent = any(m.role == "tool" for m in request.transcript)
    return reply(call("next_state", target="done") if sent else call("send", text="hi"))


def demo_model():
    return FunctionModel(policy, spec="demo:none")


async def main(chart):
    store = SQLiteStore("statechart.db")
    run = await start(chart, store=store, model=demo_model())
    run = await run_to_end(chart, run, store=store, model=demo_model())
    print(run.run_id, run.status)
"""
MODULE_LEVEL = (
    "\nNAME = 'made'\nchart = make()\nif __name__ == '__main__':\n    anyio.run(main, chart)\n"
)
IN_A_FUNCTION = "\nNAME = 'made'\nif __name__ == '__main__':\n    anyio.run(main, make())\n"


@pytest.mark.parametrize("tail", [MODULE_LEVEL, IN_A_FUNCTION], ids=["module", "function"])
def test_a_run_started_from_python_can_be_driven_from_the_cli(tmp_path: Path, tail: str) -> None:
    """A chart defined at module level records where it came from, so the CLI can approve a
    run Python started; one built inside a function needs --chart, checked by version."""
    (tmp_path / "script.py").write_text(PYTHON_STARTED + tail)
    (tmp_path / "other.py").write_text(PYTHON_STARTED + tail.replace("'made'", "'other'"))
    started_by_python = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert started_by_python.returncode == 0, started_by_python.stderr
    run_id, status = started_by_python.stdout.split()
    assert status == "waiting"
    if tail is IN_A_FUNCTION:
        done = cli(tmp_path, "approve", run_id, code=ERROR)
        assert "--chart PATH.py:NAME" in done.stderr
        wrong = cli(tmp_path, "approve", run_id, "--chart", "other.py:make", code=ERROR)
        assert "version" in wrong.stderr and "'other'" in wrong.stderr
        done = cli(tmp_path, "approve", run_id, "--chart", "script.py:make", code=OK)
    else:
        done = cli(tmp_path, "approve", run_id, code=OK)
    assert f"run {run_id}: ended in 'done'" in done.stdout
    child = cli(tmp_path, "fork", run_id, "--at", "2", code=OK).stdout.split()[1]
    assert "waiting in 'write.approve'" in cli(tmp_path, "resume", child, code=WAITING).stdout


def _on_a_terminal(cwd: Path, *args: str, **env: str) -> str:
    """What `statechart ARGS` writes to a pseudo-terminal (as a person at a shell sees it)."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "statechart.cli", *args],
        cwd=cwd,
        stdout=follower,
        stderr=follower,
        env={**cli_env(), "TERM": "xterm-256color", **env},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_none_when_piped_or_no_color(tmp_path: Path) -> None:
    run_id = started(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "environ", env)
        coloured = _on_a_terminal(tmp_path, "resume", run_id)
        plain = _on_a_terminal(tmp_path, "resume", run_id, NO_COLOR="1")
    assert "\x1b[" in coloured and "waiting in 'send.approve'" in coloured
    assert "\x1b[" not in plain and "waiting in 'send.approve'" in plain
    piped = cli(tmp_path, "resume", run_id, code=WAITING)
    assert "\x1b[" not in piped.stdout + piped.stderr


def test_a_command_that_drives_a_run_freezes_its_heap_first(tmp_path: Path) -> None:
    """`run` compiles the chart and calls `gc.freeze()` before driving: the modules and
    the chart outlive the run, and the cyclic GC's full passes over them cost about a
    third of a transition (docs/performance.md). Before any command, nothing is frozen."""
    script = (
        "import gc, sys\n"
        "from statechart.cli import app\n"
        "before = gc.get_freeze_count()\n"
        "try:\n"
        f"    app(['run', {AGENT!r}, '--input', {TICKET!r}], prog_name='statechart')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print(before, gc.get_freeze_count(), code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(),
    )
    before, after, code = done.stdout.split()[-3:]
    assert (int(before), code) == (0, str(WAITING)), done.stderr
    assert int(after) > 10_000  # the imported modules, the compiled chart, ...


def test_runs_pages_newest_first_and_searches_ids(tmp_path: Path) -> None:
    for i in range(5):
        cli(tmp_path, "submit", DESK, "--input", ORDER, "--run-id", f"page-{i}")
    cli(tmp_path, "submit", DESK, "--input", ORDER, "--run-id", "other-9")
    first = cli(tmp_path, "runs", "--limit", "2", "--json")
    assert [r["run_id"] for r in json.loads(first.stdout)] == ["other-9", "page-4"]
    assert "runs 1-2 of 6, newest first" in first.stderr
    second = cli(tmp_path, "runs", "--limit", "2", "--offset", "2", "--json")
    assert [r["run_id"] for r in json.loads(second.stdout)] == ["page-3", "page-2"]
    assert "runs 3-4 of 6" in second.stderr
    found = cli(tmp_path, "runs", "--search", "age-", "--json")
    assert [r["run_id"] for r in json.loads(found.stdout)] == [f"page-{i}" for i in (4, 3, 2, 1, 0)]
    assert found.stderr == ""  # all of them shown: nothing to say


def test_a_misspelt_input_field_is_one_error_naming_it_and_the_fields_taken(
    tmp_path: Path,
) -> None:
    """`--input` with a key the chart's context does not have is refused before anything is
    stored, naming the key and the fields the chart takes (it used to be dropped, and the
    run escalated for want of it)."""
    done = run_cli(tmp_path, "run", AGENT, "--input", '{"tix": 1}', code=ERROR)
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "--input names tix" in line and "ticket_id" in line, done.stderr
    assert not (tmp_path / "statechart.db").exists()


WARNED = """
from statechart import Budget, Chart, Edge, State, tool


@tool(retry="safe")
def look(q: str) -> str:
    return q


chart = Chart(
    "warned",
    states=(State("work", tools=(look,)), State("done", kind="terminal")),
    edges=(Edge("work", "done"),{extra}),
    budget=Budget(max_steps=5),
)
"""


def test_check_says_a_chart_warning_in_one_line_and_only_the_error_when_it_fails(
    tmp_path: Path,
) -> None:
    (tmp_path / "warned.py").write_text(WARNED.format(extra=""))
    done = cli(tmp_path, "check", f"{tmp_path}/warned.py:chart", code=OK)
    assert done.stdout.startswith("ok: warned version")
    assert done.stderr.splitlines() == [
        "warning: tool 'look' has no description (no docstring, no description=), so the "
        "model is shown only its name; add a docstring saying what it does",
        "warning: chart 'warned', state 'work': a model state with neither reads= nor "
        "instructions= shows the model only its tools and exits; say what it should do",
    ]
    (tmp_path / "broken.py").write_text(WARNED.format(extra=' Edge("work", "nowhere")'))
    done = cli(tmp_path, "check", f"{tmp_path}/broken.py:chart", code=ERROR)
    assert done.stderr.splitlines() == [
        "error: chart 'warned', edge work->nowhere: 'nowhere' is not a state of the chart; "
        "fix the name or add the state"
    ]
