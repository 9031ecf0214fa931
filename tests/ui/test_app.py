"""`statechart ui` in a real process, driven by real headless Chromium (Debian's package,
through Playwright's Python API pointed at it): the runs table, a run's diagram, decisions,
escaping, the token and Host checks, live updates from another process, forks."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from statechart import RunNotFoundError, SQLiteStore
from statechart.runtime.relay import where
from tests.support.cli import AGENT, DESK, ROOT, TICKET, WAITING, cli_env, run_cli

CHROMIUM = os.environ.get("STATECHART_CHROMIUM") or shutil.which("chromium") or ""
SHOTS = ROOT / "tests" / "ui" / "screenshots"
TOKEN = "test-token-7"
ODD_ID = 'odd"<b>?#%41 1'
PAYLOAD = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
XSS_AGENT = f'''
from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply, tool


@tool(retry="safe")
def fetch(page: str) -> str:
    """Fetch a page."""
    return {PAYLOAD!r}


def policy(request):
    if not any(m.role == "tool" for m in request.transcript):
        return reply(call("fetch", "f1", page="home"))
    return reply(call("next_state", target="done"))


chart = Chart(
    "hostile",
    budget=Budget(max_steps=10),
    states=(State("work", tools=(fetch,), instructions="Fetch."), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
)


def demo_model():
    return FunctionModel(policy, spec="demo:hostile")
'''


SLEEPY_AGENT = """
from statechart import Budget, Chart, Edge, FunctionModel, Retry, State, call, reply, tool


@tool(retry="safe", retries=Retry(attempts=2, initial=3600, jitter=0))
def fetch(order: str) -> str:
    "Fetch an order from a system that is down."
    raise ConnectionError("the order system is down")


def policy(request):
    return reply(call("fetch", order="A-7"))


chart = Chart(
    "sleepy",
    budget=Budget(max_steps=10),
    states=(State("work", tools=(fetch,), instructions="Fetch."), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
)


def demo_model():
    return FunctionModel(policy)
"""

GATE_AGENT = """
from pydantic import BaseModel

from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply


class Note(BaseModel):
    note: str = ""


def policy(request):
    return reply(call("next_state", target="ask"))


chart = Chart(
    "gate",
    context=Note,
    states=(
        State("write", reads=("note",), instructions="Hand over."),
        State("ask", kind="approval", on_approve="done", on_reject="failed"),
        State("done", kind="terminal"),
        State("failed", kind="terminal", outcome="failure"),
    ),
    edges=(Edge("write", "ask"),),
    budget=Budget(max_steps=10),
)


def demo_model():
    return FunctionModel(policy, spec="demo:gate")
"""


@dataclass
class Inspector:
    url: str
    port: int
    db: Path
    cwd: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("Chromium is required under CI (.ci/run installs Debian's package)")
        pytest.skip("no chromium executable (apt-get install chromium); CI=true fails instead")
    cwd = tmp_path_factory.mktemp("ui")
    db = cwd / "statechart.db"
    for run_id in ("desk-1", "desk-2", "desk-3"):  # each its own order
        order = json.dumps({"order_id": f"O-{run_id}"})
        run_cli(
            cwd, "run", DESK, "--input", order, "--run-id", run_id, "--db", str(db), code=WAITING
        )
    run_cli(
        cwd, "run", AGENT, "--input", TICKET, "--run-id", "tri-1", "--db", str(db), code=WAITING
    )
    traced = cli_env(OTEL_TRACES_EXPORTER="console")  # a run that stores its trace context
    order = json.dumps({"order_id": "O-traced"})
    run_cli(
        cwd,
        "run",
        DESK,
        "--input",
        order,
        "--run-id",
        "traced-1",
        "--db",
        str(db),
        code=WAITING,
        environ=traced,
    )
    agents = cwd / "agents"  # the inspector's folder: the reference agents and the gate
    shutil.copytree(ROOT / "agents", agents, ignore=shutil.ignore_patterns("__pycache__"))
    (agents / "gate.py").write_text(GATE_AGENT)
    question = json.dumps({"question": "tides"})
    topics = f"{agents}/research_topics.py:chart"
    run_cli(cwd, "run", topics, "--input", question, "--run-id", "topics-1", "--db", str(db))
    hostile_note = json.dumps({"note": PAYLOAD})
    run_cli(
        cwd,
        "run",
        f"{agents}/gate.py:chart",
        "--input",
        hostile_note,
        "--run-id",
        "gate-1",
        "--db",
        str(db),
        code=WAITING,
    )
    elsewhere = cwd / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "hostile.py").write_text(XSS_AGENT)
    run_cli(cwd, "run", f"{elsewhere}/hostile.py:chart", "--run-id", "xss-1", "--db", str(db))
    run_cli(cwd, "run", f"{elsewhere}/hostile.py:chart", "--run-id", ODD_ID, "--db", str(db))
    (agents / "sleepy.py").write_text(SLEEPY_AGENT)
    slept = run_cli(
        cwd, "run", f"{agents}/sleepy.py:chart", "--run-id", "sleepy-1", "--db", str(db), code=6
    )
    assert "sleeping" in slept.stdout and "resume once it is due (20" in slept.stdout
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "statechart.cli",
            "ui",
            "--db",
            str(db),
            "--port",
            str(port),
            "--agents",
            str(agents),
            "--token",
            TOKEN,
            "--trace-url",
            "http://localhost:16686/trace/{trace_id}",
        ],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=1).read()
            break
        except OSError:
            assert server.poll() is None, server.communicate()
            assert time.monotonic() < deadline, "the inspector did not start"
            time.sleep(0.1)
    try:
        yield Inspector(url, port, db, cwd)
    finally:
        server.terminate()
        server.communicate(timeout=20)


@pytest.fixture(scope="module")
def browser(inspector: Inspector) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield found
        found.close()


@pytest.fixture
def page(browser, inspector: Inspector):  # type: ignore[no-untyped-def]
    # CSP bypassed: Playwright's waits evaluate strings, and escaping must hold without it
    context = browser.new_context(viewport={"width": 1300, "height": 900}, bypass_csp=True)
    found = context.new_page()
    found.errors = []
    found.on("console", lambda m: found.errors.append(f"console {m.type}: {m.text}"))
    found.on("pageerror", lambda e: found.errors.append(f"pageerror: {e}"))
    found.on("dialog", lambda d: (found.errors.append(f"dialog: {d.message}"), d.dismiss()))
    found.goto(f"{inspector.url}/?token={TOKEN}")  # the link the command prints
    yield found
    context.close()


def stored(db: Path, run_id: str) -> tuple[str, str, list[str]]:
    async def read() -> tuple[str, str, list[str]]:
        store = SQLiteStore(db)
        try:
            loaded = await store.load(run_id)
            events = await store.events(run_id)
        finally:
            store.close()
        return loaded.snapshot.status, loaded.state, [f"{e.actor}:{e.by}" for e in events]

    return in_thread(read)


def in_thread(fn):  # type: ignore[no-untyped-def]
    """`anyio.run(fn)` off this thread: Playwright's sync API keeps an event loop on it."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, fn).result()


def test_the_runs_table_lists_the_reference_agents_runs(page, inspector: Inspector) -> None:  # type: ignore[no-untyped-def]
    rows = page.locator("#runs tbody tr")
    ids = [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())]
    assert ids == [
        "sleepy-1",
        ODD_ID,
        "xss-1",
        "gate-1",
        "topics-1",
        "traced-1",
        "tri-1",
        "desk-3",
        "desk-2",
        "desk-1",
    ]
    assert "support_triage" in page.locator("#runs").inner_text()
    page.select_option("select[name=status]", "waiting")
    page.fill("input[name=q]", "desk")
    page.click("form.filters button")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 3 and "refund_desk" in rows.first.inner_text()
    page.goto(f"{inspector.url}/")
    page.click(f"#runs a >> text={ODD_ID}")  # an id with URL and HTML characters
    page.wait_for_selector("#run")
    assert page.eval_on_selector("#run", "node => node.dataset.run") == ODD_ID
    SHOTS.mkdir(exist_ok=True)
    page.goto(f"{inspector.url}/")
    page.screenshot(path=str(SHOTS / "runs.png"), full_page=True)
    assert page.errors == []


def test_a_run_page_draws_its_chart_with_the_current_state_marked(
    page, inspector: Inspector
) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/tri-1")
    page.wait_for_selector("#diagram svg", timeout=15000)
    marked = page.locator("#diagram svg .current")
    assert marked.count() >= 1 and "send" in (marked.first.text_content() or "")
    # research's self-loop goes round a choice point, drawn full size, not a tick
    loop = page.locator("#diagram svg g[id*='s_research_loop']")
    assert loop.count() == 1 and loop.first.bounding_box() is not None
    assert page.locator("#timeline tbody.event").count() == 17
    assert page.locator(".bars tr").count() >= 3
    page.click("details.visit summary >> nth=0")
    page.wait_for_selector("details.visit .message")
    page.click("#timeline button.open >> nth=3")
    page.wait_for_selector(".context pre")
    assert "ticket_id" in page.locator(".context pre").first.inner_text()
    page.screenshot(path=str(SHOTS / "run.png"), full_page=True)
    assert page.errors == []


def test_approve_in_the_page_moves_the_refund_to_done(page, inspector: Inspector) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/desk-1")
    intents = page.locator("#intents tr")  # the header, the lookup, the refund waiting
    assert (
        "lookup_order" in intents.nth(1).inner_text() and "completed" in intents.nth(1).inner_text()
    )
    assert "issue_refund" in intents.nth(2).inner_text() and "open" in intents.nth(2).inner_text()
    assert len(intents.nth(2).locator("td").nth(4).inner_text()) == 32  # its idempotency key
    page.fill("#by", "dana")
    page.click("#approve")
    page.wait_for_function("document.querySelector('#run').dataset.status !== 'waiting'")
    assert stored(inspector.db, "desk-1")[:2] == ("running", "resolve.act")
    assert stored(inspector.db, "desk-1")[2][-1] == "human:dana"
    # nothing drives a SQLite store by itself: the page says so, not "Running"
    said = page.inner_text("#decide")
    assert "Decision recorded" in said and "Running" not in said
    assert f"statechart resume desk-1 --db {inspector.db}" in page.inner_text("#idle")
    run_cli(inspector.cwd, "resume", "desk-1", "--db", str(inspector.db))  # the API drives it
    page.wait_for_function(
        "document.querySelector('#run').dataset.status === 'ended'", timeout=5000
    )
    assert stored(inspector.db, "desk-1")[:2] == ("ended", "done")
    assert page.get_attribute("#status", "class") == "badge done"
    summary = page.inner_text("p.summary")
    assert summary.count("ended in") == 1 and "'done'" not in summary  # said once


def test_approve_with_invalid_edits_shows_the_schema_error_and_changes_nothing(
    page, inspector: Inspector
) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/desk-2")
    before = stored(inspector.db, "desk-2")
    page.fill("#by", "dana")
    page.fill("#edits", json.dumps({"order_id": "O-desk-2", "amount_cents": "lots"}))
    page.click("#approve-edits")
    page.wait_for_function("document.querySelector('#decide-error').textContent.length > 0")
    assert "amount_cents" in page.inner_text("#decide-error")
    assert stored(inspector.db, "desk-2") == before
    page.fill("#edits", "{not json")
    page.click("#approve-edits")
    page.wait_for_function(
        "document.querySelector('#decide-error').textContent.includes('not JSON')"
    )
    assert stored(inspector.db, "desk-2") == before


def test_a_hostile_tool_result_is_shown_as_text_and_runs_nothing(
    page, inspector: Inspector
) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/xss-1")
    assert "cannot be loaded here" in page.inner_text("#no-chart")  # outside --agents
    for i in range(page.locator("#timeline button.open").count()):
        page.click(f"#timeline button.open >> nth={i}")
    for i in range(page.locator("details.visit summary").count()):
        page.click(f"details.visit summary >> nth={i}")
    page.wait_for_selector("details.visit .message")
    page.wait_for_timeout(300)
    assert PAYLOAD in page.inner_text("#timeline")  # the text itself, on the page
    assert page.evaluate("window.__xss") is None  # no script ran, no handler fired
    assert page.locator("#main script, #main img").count() == 0  # nothing became markup
    assert page.errors == []


def test_decisions_need_the_token_and_the_inspectors_own_host(inspector: Inspector) -> None:
    def post(headers: dict[str, str]) -> int:
        request = urllib.request.Request(
            f"{inspector.url}/decide/cancel/desk-3",
            data=json.dumps({"by": "mallory", "reason": "x"}).encode(),
            headers={"Content-Type": "application/json", **headers},
            method="POST",
        )
        try:
            return urllib.request.urlopen(request, timeout=5).status
        except urllib.error.HTTPError as exc:
            return exc.code

    with urllib.request.urlopen(inspector.url + "/runs/desk-3", timeout=5) as answer:
        assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
    assert post({}) == 403
    assert post({"X-Statechart-Token": "wrong"}) == 403
    assert post({"X-Statechart-Token": TOKEN, "Origin": "http://evil.example"}) == 403
    assert post({"X-Statechart-Token": TOKEN, "Sec-Fetch-Site": "cross-site"}) == 403
    assert post({"X-Statechart-Token": "tëst"}) == 403  # not ASCII: refused, not a crash
    assert post({"X-Statechart-Token": TOKEN, "Host": f"evil.example:{inspector.port}"}) == 421
    request = urllib.request.Request(inspector.url + "/", headers={"Host": "rebound.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 421
    assert stored(inspector.db, "desk-3")[0] == "waiting"  # nothing was decided


def test_the_page_of_a_run_shows_a_step_made_by_another_process(page, inspector: Inspector) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/desk-3")
    page.wait_for_selector("#diagram svg")
    page.evaluate("window.__same = true")  # gone if the browser reloaded the page
    shown = page.locator("#timeline tbody.event").count()
    run_cli(inspector.cwd, "approve", "desk-3", "--by", "eve", "--db", str(inspector.db))
    started = time.monotonic()
    page.wait_for_function(
        f"document.querySelectorAll('#timeline tbody.event').length > {shown}", timeout=2000
    )
    assert time.monotonic() - started < 2.0
    assert page.evaluate("window.__same") is True
    page.wait_for_function(
        "document.querySelector('#run').dataset.status === 'ended'", timeout=3000
    )


def test_fork_from_a_step_in_the_page_creates_the_fork(page, inspector: Inspector) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/tri-1")
    with page.expect_navigation(timeout=5000):
        page.click("#timeline button.fork >> nth=3")  # after step 4
    page.wait_for_selector("#run")
    child = page.eval_on_selector("#run", "node => node.dataset.run")
    assert child != "tri-1"

    async def read() -> tuple[str | None, int | None]:
        store = SQLiteStore(inspector.db)
        try:
            run = (await store.load(child)).snapshot
        finally:
            store.close()
        return run.parent_run, run.parent_seq

    assert in_thread(read) == ("tri-1", 4)
    assert "forked from tri-1" in page.inner_text(".lineage")


def test_reject_and_cancel_in_the_page_are_a_persons_events(page, inspector: Inspector) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/traced-1")
    link = page.get_attribute("#trace-link", "href") or ""
    trace_id = link.rsplit("/", 1)[-1]
    assert link.startswith("http://localhost:16686/trace/") and len(trace_id) == 32
    page.click("#reject")
    page.wait_for_function("document.querySelector('#decide-error').textContent.length > 0")
    assert "your name" in page.inner_text("#decide-error")  # nobody said who: nothing stored
    assert stored(inspector.db, "traced-1")[0] == "waiting"
    page.fill("#by", "rita")
    page.fill("#note", "wrong amount")
    page.click("#reject")
    page.wait_for_function("document.querySelector('#run').dataset.status !== 'waiting'")
    status, _, actors = stored(inspector.db, "traced-1")
    assert status == "running" and actors[-1] == "human:rita"
    page.goto(f"{inspector.url}/runs/desk-2")
    page.fill("#by", "carl")
    page.fill("#note", "duplicate")
    page.click("#cancel")
    page.wait_for_function("document.querySelector('#run').dataset.status === 'ended'")
    status, state, actors = stored(inspector.db, "desk-2")
    assert (status, state, actors[-1]) == ("ended", "cancelled", "human:carl")
    assert page.get_attribute("#status", "class") == "badge cancelled"
    page.goto(f"{inspector.url}/?status=ended")
    assert page.locator("tr:has(a[href='/runs/desk-2']) .badge").get_attribute("class") == (
        "badge cancelled"
    )


def test_a_failed_ending_gets_its_own_badge(page, inspector: Inspector) -> None:  # type: ignore[no-untyped-def]
    """The refund desk's `failed` (declared `outcome="failure"`) is red, not done's green."""
    out = run_cli(
        inspector.cwd,
        "run",
        DESK,
        "--input",
        '{"order_id": "O-failing"}',
        "--run-id",
        "failing-1",
        "--db",
        str(inspector.db),
        code=WAITING,
    )
    assert "failing-1" in out.stdout
    run_cli(inspector.cwd, "reject", "failing-1", "--reason", "no", "--db", str(inspector.db))
    run_cli(inspector.cwd, "resume", "failing-1", "--db", str(inspector.db), code=4)
    page.goto(f"{inspector.url}/runs/failing-1")
    assert page.get_attribute("#status", "class") == "badge failed"
    assert page.inner_text("#state") == "failed"


def test_an_approval_state_is_decided_in_the_page_and_context_stays_text(
    page, inspector: Inspector
) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{inspector.url}/runs/gate-1")
    assert page.locator("#edits").count() == 0  # no call to edit: a gate
    page.click("#timeline button.open >> nth=0")
    page.wait_for_selector(".context pre")
    assert "<script>window.__xss = 1</script>" in page.inner_text(".context")  # as text
    assert page.evaluate("window.__xss") is None and page.locator("#main script").count() == 0
    page.fill("#by", "gil")
    page.click("#approve")
    page.wait_for_function("document.querySelector('#run').dataset.status === 'ended'")
    assert stored(inspector.db, "gate-1")[:2] == ("ended", "done")
    assert page.errors == []


def test_a_decision_names_the_step_and_call_it_was_made_on(inspector: Inspector) -> None:
    def post(run_id: str, body: object) -> tuple[int, str]:
        request = urllib.request.Request(
            f"{inspector.url}/decide/approve/{run_id}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "X-Statechart-Token": TOKEN},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    before = stored(inspector.db, "tri-1")
    assert post("tri-1", {"by": "x", "seq": 3, "call": "whatever"})[0] == 409  # moved on
    code, text = post("tri-1", {"by": "x", "seq": 17, "call": "another"})
    assert code == 409 and "no longer waits on that call" in text
    assert post("tri-1", ["not", "an", "object"])[0] == 400
    assert post("tri-1", {"by": "x", "seq": 17, "call": None, "edits": [1]})[0] in (400, 409)
    assert post("no-such-run", {"by": "x"})[0] == 404
    assert stored(inspector.db, "tri-1") == before  # nothing was decided
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{inspector.url}/seq/no-such-run", timeout=5)
    assert missing.value.code == 404


def test_the_pages_work_under_their_own_content_security_policy(
    browser, inspector: Inspector
) -> None:  # type: ignore[no-untyped-def]
    context = browser.new_context()  # no bypass: the real policy
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{inspector.url}/runs/tri-1")
    page.wait_for_selector("#diagram svg", timeout=15000)
    page.click("#timeline button.open >> nth=1")
    page.wait_for_selector(".context pre")
    context.close()
    assert errors == []


def test_a_sleeping_run_shows_when_it_wakes(inspector: Inspector) -> None:
    """A failed call's backoff (an hour here): the list filters by `sleeping` and says when
    the run wakes; its page says what it sleeps for and until when."""
    with urllib.request.urlopen(inspector.url + "/?status=sleeping", timeout=5) as answer:
        listing = answer.read().decode()
    assert "sleepy-1" in listing and "desk-1" not in listing and "wakes 20" in listing
    with urllib.request.urlopen(inspector.url + "/runs/sleepy-1", timeout=5) as answer:
        page = answer.read().decode()
    assert "<h2>Sleeping until 20" in page and 'id="wake">wakes 20' in page
    assert "tool &#39;fetch&#39; failed (attempt 1 of 2)" in page


def test_a_run_driven_by_another_process_streams_its_text_before_its_step_is_stored(
    page, inspector: Inspector
) -> None:  # type: ignore[no-untyped-def]
    """The page takes the driving process's tokens over server-sent events and shows the
    reply as it is written, before the step that stores it; then the stored step."""
    gate = inspector.cwd / "watching"  # the tool returns once the page listens
    slow = cli_env(LIVE_AGENT_DELAY="0.08", LIVE_AGENT_GATE=str(gate))
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "statechart.cli",
            "run",
            f"{ROOT}/tests/support/live_agent.py:chart",
            "--run-id",
            "live-1",
            "--db",
            str(inspector.db),
        ],
        cwd=inspector.cwd,
        env=slow,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:  # the run exists once the driver stored it
            try:
                stored(inspector.db, "live-1")
                break
            except RunNotFoundError:
                assert driver.poll() is None, driver.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        listeners = where(SimpleNamespace(path=str(inspector.db)))  # type: ignore[arg-type]
        assert listeners is not None  # where the inspector listens for this store
        before = set(listeners.glob("*.sock"))
        page.goto(f"{inspector.url}/runs/live-1")
        while not set(listeners.glob("*.sock")) - before:  # a driver streams only to a
            assert time.monotonic() < deadline + 20  # listener: wait for the page's
            time.sleep(0.05)
        gate.touch()
        # the reply (seq 3) is being written: its words show while the page, refreshed
        # by every stored step, still says no step past 2 is stored
        page.wait_for_function(
            "document.getElementById('live-text').textContent.includes('word3')"
            " && Number(document.getElementById('run').dataset.seq) <= 2",
            timeout=15000,
        )
        head = page.locator("#live-head").inner_text()
        assert "model scripted in work.think, step 3" in head
        page.wait_for_function(
            "document.querySelector('#run').dataset.status === 'ended'", timeout=15000
        )
        assert page.locator("#live").is_hidden()  # the stored step replaced the live text
        assert page.errors == []
    finally:
        driver.wait(timeout=30)
    assert driver.returncode == 0, driver.communicate()


def test_the_live_stream_answers_only_the_inspectors_own_host(inspector: Inspector) -> None:
    request = urllib.request.Request(
        f"{inspector.url}/live/desk-1", headers={"Host": "rebound.example"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 421
    with urllib.request.urlopen(f"{inspector.url}/live/desk-1", timeout=5) as answer:
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        assert answer.readline() == b"retry: 2000\n"


def test_mermaid_draws_a_history_state_and_the_edge_that_interrupts_it(page) -> None:  # type: ignore[no-untyped-def]
    """The diagram of a chart with a deep history state renders in the vendored Mermaid:
    the state labelled with UML's H*, the after= edge leaving the composite state."""
    from statechart.io.diagram import mermaid
    from tests.engine.test_history import desk

    text = mermaid(desk("deep"))
    assert 'state "research (H*)" as s_research {' in text
    assert "s_research --> s_check_u_in : after 1 min" in text  # `_` is escaped in ids
    vendored = ROOT / "statechart" / "ui" / "static" / "vendor" / "mermaid-12.3.0.min.js"
    page.add_script_tag(path=str(vendored))
    svg = page.evaluate(
        "async (text) => { mermaid.initialize({startOnLoad: false});"
        " return (await mermaid.render('history', text)).svg; }",
        text,
    )
    assert "research (H*)" in svg and "check_in" in svg
    assert page.errors == []


def test_a_parallel_run_shows_each_regions_timeline_and_transcript(inspector: Inspector) -> None:
    """The three-region agent's page: a timeline per region (its own steps, in order), and
    each region's first visit a transcript of its own, though the three share a seq."""
    with urllib.request.urlopen(inspector.url + "/runs/topics-1", timeout=5) as answer:
        page = answer.read().decode()
    regions = page.split('<section id="regions">', 1)[1].split("</section>", 1)[0]
    for angle in ("history", "economics", "ecology"):
        table = regions.split(f'data-region="research.{angle}"', 1)[1].split("</table>", 1)[0]
        assert table.count("<tr class=") == 4  # think->act, act->think, think->act, ->found
        assert f"research.{angle}.survey.act → research.{angle}.found" in table
        others = {"history", "economics", "ecology"} - {angle}
        assert not any(f"research.{o}." in table for o in others)
        assert f"?region=research.{angle}" in page
    with urllib.request.urlopen(
        inspector.url + "/transcript/2/topics-1?region=research.ecology", timeout=5
    ) as answer:
        shown = answer.read().decode()
    assert "tides ecology" in shown and "tides history" not in shown


def test_mermaid_draws_parallel_regions_and_a_map_state(page) -> None:  # type: ignore[no-untyped-def]
    """The vendored Mermaid renders a parallel state's regions (split by `--`) and a map
    state's one drawn instance."""
    from statechart.io.diagram import mermaid
    from tests.engine.test_map import desk as map_desk
    from tests.support.parallel import desk

    vendored = ROOT / "statechart" / "ui" / "static" / "vendor" / "mermaid-12.3.0.min.js"
    page.add_script_tag(path=str(vendored))
    for name, text in (("parallel", mermaid(desk())), ("map", mermaid(map_desk()))):
        svg = page.evaluate(
            "async ([name, text]) => { mermaid.initialize({startOnLoad: false});"
            " return (await mermaid.render(name, text)).svg; }",
            [name, text],
        )
        assert ("papers" in svg and "web" in svg) if name == "parallel" else "each document" in svg
    assert page.errors == []
