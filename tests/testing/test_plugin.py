"""The pytest plugin as a user meets it: a test file in a fresh directory, run by pytest
in its own process. The first run records the cassette (the model and the tool are
called), the next ones replay it (neither is), `--statechart-record` records again, a
changed chart fails with what to do, and a failed test keeps no recording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TEST_FILE = """
from pathlib import Path

import pytest

import statechart as sc
from statechart.testing import assert_called, assert_path, assert_within_budget

pytestmark = pytest.mark.anyio
LOG = Path(__file__).with_name("calls.log")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@sc.tool(retry="keyed", needs_approval=True)
def refund(order: str, amount: int, idempotency_key: str) -> str:
    "Refund an order."
    with LOG.open("a") as f:
        f.write(f"tool {order} {amount}\\n")
    return f"refunded {amount}"


def policy(request: sc.Request) -> sc.Reply:
    with LOG.open("a") as f:
        f.write(f"model {request.state}\\n")
    if not any(m.role == "tool" for m in request.transcript):
        return sc.reply(sc.call("refund", order="A-7", amount=20))
    return sc.reply(sc.call("next_state", target="done"))


chart = sc.Chart(
    "refunds",
    budget=sc.Budget(max_steps=10),
    states=(
        sc.State("resolve", tools=(TOOLS), instructions="Refund the order."),
        sc.State("done", kind="terminal"),
    ),
    edges=(sc.Edge("resolve", "done"),),
)


async def test_refund(statechart_cassette):
    model = sc.FunctionModel(policy, spec="policy")
    ran = await statechart_cassette.run(chart, model=model)
    assert ran.status == "waiting"
    ran = await statechart_cassette.approve(chart, ran, by="dana", edits={"amount": 15})
    assert_path(ran, ["resolve", "done"])
    assert_called(ran, "refund", once=True)
    assert_within_budget(ran)
    assert ran.run.pending == () and "refunded 15" in str(ran.events[-3].result)


async def test_broken(statechart_cassette):
    await statechart_cassette.run(chart, model=sc.FunctionModel(policy, spec="policy"))
    assert False, "broken on purpose"


def test_fixtures(memory_store, scripted_model):
    model = scripted_model(sc.reply(sc.call("next_state", target="done")))
    run = sc.run_sync(chart, store=memory_store, model=model)
    assert run.state == "done"
"""


def pytest_in(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_refund.py", *args],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


def calls(where: Path) -> list[str]:
    log = where / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_record_once_replay_after_record_again_and_a_changed_chart_fails(tmp_path: Path) -> None:
    (tmp_path / "test_refund.py").write_text(TEST_FILE.replace("(TOOLS)", "(refund,)"))
    broken = pytest_in(tmp_path, "-k", "broken")
    assert broken.returncode == 1 and "broken on purpose" in broken.stdout
    assert not (tmp_path / "cassettes").exists()  # a failed test's recording is not kept
    (tmp_path / "calls.log").unlink()
    first = pytest_in(tmp_path, "-k", "not broken")
    assert first.returncode == 0, first.stdout + first.stderr
    assert calls(tmp_path) == ["model resolve", "tool A-7 15", "model resolve"]
    cassette = tmp_path / "cassettes" / "test_refund.test_refund.json"
    doc = json.loads(cassette.read_text())
    assert doc["statechart_cassette"] == 1 and len(doc["runs"]) == 1
    assert [e["trigger"] for e in doc["runs"][0]["events"]][-2:] == ["propose", "go:done"]

    again = pytest_in(tmp_path, "-k", "not broken")
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(calls(tmp_path)) == 3  # replayed: no model, no tool

    recorded = pytest_in(tmp_path, "--statechart-record", "-k", "not broken")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert len(calls(tmp_path)) == 6  # recorded again: both called once more

    (tmp_path / "test_refund.py").write_text(TEST_FILE.replace("(TOOLS)", "()"))
    changed = pytest_in(tmp_path, "-k", "not broken and not test_fixtures")
    assert changed.returncode == 1
    assert "CassetteError" in changed.stdout and "--statechart-record" in changed.stdout
    assert len(calls(tmp_path)) == 6
