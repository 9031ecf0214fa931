"""The worker in this process, on the local PostgreSQL: it drives what is submitted, wakes on
notifications (the poll interval in these tests is far longer than they wait), reopens a
dropped LISTEN connection, and never imports code a database row names."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from statechart import Budget, Chart, Edge, State, approve, start
from statechart.io.loading import chart_source, load_chart
from statechart.runtime.worker import Worker, WorkerSettings
from statechart.store.postgres import PostgresStore
from statechart.store.queue import RunQueue

pytestmark = pytest.mark.anyio

AGENT = '''
from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply, tool
from statechart.models import register

SPEC = "demo:work-{tag}"


@tool(retry="safe", needs_approval={approval})
def note(text: str) -> str:
    """Write a note."""
    return text.upper()


def policy(request):
    if not any(m.role == "tool" for m in request.transcript):
        return reply(call("note", "n1", text="hello"))
    return reply(call("next_state", target="done"))


chart = Chart(
    "work_{tag}",
    budget=Budget(max_steps=10),
    states=(State("work", tools=(note,), instructions="Note."), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
)


def demo_model(spec=SPEC):
    return FunctionModel(policy, spec=spec)


register(SPEC, demo_model)
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API runs on asyncio only


def _agent(folder: Path, *, approval: bool) -> str:
    """A chart file in `folder` (a module of its own: a new tag per test); its target."""
    folder.mkdir(exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    path = folder / f"work_{tag}.py"
    path.write_text(textwrap.dedent(AGENT.format(tag=tag, approval=approval)))
    return f"{path}:chart"


async def _submit(pg_store: PostgresStore, target: str, n: int) -> list[str]:
    chart, module = load_chart(target)
    await pg_store.save_chart(chart.version, chart.describe(), chart_source(target))
    ids = []
    for _ in range(n):
        run = await start(chart, store=pg_store, model=module.demo_model())
        await RunQueue(pg_store).enqueue(run.run_id)
        ids.append(run.run_id)
    return ids


async def _until(check: Callable[[], Awaitable[bool]], seconds: float) -> None:
    with anyio.fail_after(seconds):
        while not await check():
            await anyio.sleep(0.02)


async def _statuses(pg_store: PostgresStore) -> dict[str, tuple[str, str]]:
    return {s.run_id: (s.status, s.state) for s in await pg_store.summaries()}


async def test_a_worker_drives_submitted_runs_and_goes_on_after_approval(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    target = _agent(tmp_path / "agents", approval=True)
    ids = await _submit(pg_store, target, 5)
    settings = WorkerSettings(concurrency=3, lease_ttl=120, poll=60, agents=tmp_path / "agents")
    worker = Worker(PostgresStore(pg_store.dsn), settings)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, stop)

        async def all_waiting() -> bool:
            return set((await _statuses(pg_store)).values()) == {("waiting", "work.approve")}

        await _until(all_waiting, 10)
        chart, _ = load_chart(target)
        for run_id in ids:
            await approve(chart, run_id, store=pg_store, by="dana")  # NOTIFY wakes the worker

        async def all_done() -> bool:
            return set((await _statuses(pg_store)).values()) == {("ended", "done")}

        await _until(all_done, 10)  # far sooner than the 60 s poll: notifications woke it
        stop.set()
    await worker.store.close()
    queue = RunQueue(pg_store)
    for run_id in ids:
        leases = await queue.leases(run_id)
        assert len(leases) == 2 and all(h.clean for h in leases)  # one drive each side
        writers = {h for _, h in await queue.holders(run_id)}
        assert writers == {h.holder for h in leases} | {None}  # the approval: a person's


FLAKY_AGENT = '''
from statechart import Budget, Chart, Edge, FunctionModel, Retry, State, call, reply, tool
from statechart.models import register

SPEC = "demo:flaky-{tag}"
TRIED = []


@tool(retry="safe", retries=Retry(attempts=2, initial=1.5, jitter=0))
def fetch(order: str) -> str:
    """Fetch an order; the first attempt fails."""
    TRIED.append(order)
    if len(TRIED) == 1:
        raise ConnectionError("down")
    return "shipped"


def policy(request):
    if not any(m.role == "tool" for m in request.transcript):
        return reply(call("fetch", "f1", order="A-7"))
    return reply(call("next_state", target="done"))


chart = Chart(
    "flaky_{tag}",
    budget=Budget(max_steps=10),
    states=(State("work", tools=(fetch,), instructions="Fetch."), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
)


def demo_model(spec=SPEC):
    return FunctionModel(policy, spec=spec)


register(SPEC, demo_model)
'''


async def test_a_worker_wakes_a_sleeping_run_when_its_timer_is_due_not_at_the_next_poll(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """The run's first attempt fails; its 1.5 s backoff is longer than the worker's
    `max_sleep`, so the drive releases it `sleeping`. The worker claims it again at its due
    time (the poll is 60 s away), and the second attempt ends the run."""
    folder = tmp_path / "agents"
    folder.mkdir()
    tag = uuid.uuid4().hex[:8]
    (folder / f"flaky_{tag}.py").write_text(FLAKY_AGENT.format(tag=tag))
    (run_id,) = await _submit(pg_store, f"{folder / f'flaky_{tag}.py'}:chart", 1)
    settings = WorkerSettings(lease_ttl=30, poll=60, agents=folder, max_sleep=0.2)
    worker = Worker(PostgresStore(pg_store.dsn), settings)
    stop = anyio.Event()
    slept: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, stop)

        async def asleep() -> bool:
            rows = {s.run_id: s for s in await pg_store.summaries()}
            if rows[run_id].status == "sleeping" and rows[run_id].wake is not None:
                slept.append(rows[run_id].wake)
                return True
            return False

        await _until(asleep, 10)

        async def done() -> bool:
            return (await _statuses(pg_store))[run_id] == ("ended", "done")

        await _until(done, 10)
        stop.set()
    await worker.store.close()
    events = await pg_store.events(run_id)
    retry = next(e for e in events if e.trigger == "retry")
    wake = next(e for e in events if e.trigger == "wake")
    assert retry.wake == slept[0] == pytest.approx(retry.time + 1.5)
    assert retry.wake <= wake.time < retry.wake + 1.0  # woken at its time, not at a poll
    assert len(await RunQueue(pg_store).leases(run_id)) == 2  # released asleep, claimed again


async def test_a_row_naming_a_file_outside_the_agents_folder_is_never_imported(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    evil = tmp_path / "elsewhere" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    chart = Chart(
        "victim",
        budget=Budget(max_steps=5),
        states=(State("work"), State("done", kind="terminal")),
        edges=(Edge("work", "done"),),
    )
    await pg_store.save_chart(chart.version, chart.describe(), f"{evil}:chart")
    from statechart import ScriptedModel

    run = await start(chart, store=pg_store, model=ScriptedModel([]))
    await RunQueue(pg_store).enqueue(run.run_id)
    (tmp_path / "agents").mkdir()
    settings = WorkerSettings(
        lease_ttl=2, poll=0.05, agents=tmp_path / "agents", max_tries=3, backoff=0.02
    )
    worker = Worker(PostgresStore(pg_store.dsn), settings)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, stop)

        async def blocked() -> bool:
            return (await RunQueue(pg_store).blocked(run.run_id))[2]

        await _until(blocked, 10)
        stop.set()
    await worker.store.close()
    assert not marker.exists()  # the file was never imported
    tries, problem, _ = await RunQueue(pg_store).blocked(run.run_id)
    assert tries == 3
    assert problem is not None and "SourceRefusedError" in problem and "--agents" in problem
    (summary,) = await pg_store.summaries()
    assert summary.blocked == problem and summary.status == "running" and summary.seq == 0


async def test_a_dropped_listen_connection_is_reopened_and_the_queue_polled(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    import psycopg

    target = _agent(tmp_path / "agents", approval=False)
    settings = WorkerSettings(lease_ttl=300, poll=120, agents=tmp_path / "agents", name="w-drop")
    worker = Worker(PostgresStore(pg_store.dsn), settings)
    stop = anyio.Event()

    async def listeners() -> list[int]:
        async with await psycopg.AsyncConnection.connect(pg_store.dsn, autocommit=True) as c:
            rows = await (
                await c.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'w-drop-listen'"
                )
            ).fetchall()
            return [pid for (pid,) in rows]

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, stop)

        async def listening() -> bool:
            return len(await listeners()) == 1

        await _until(listening, 10)
        (run_id,) = await _submit(pg_store, target, 1)

        async def done() -> bool:
            return (await _statuses(pg_store))[run_id] == ("ended", "done")

        await _until(done, 10)  # the notification woke it, not the 120 s poll
        # a run of a chart version the worker has not loaded, made ready with no
        # notification: only a poll (which looks for new versions) can find it
        other = _agent(tmp_path / "agents", approval=False)
        chart, module = load_chart(other)
        await pg_store.save_chart(chart.version, chart.describe(), chart_source(other))
        silent = await start(chart, store=pg_store, model=module.demo_model())
        async with await psycopg.AsyncConnection.connect(pg_store.dsn, autocommit=True) as c:
            await c.execute("UPDATE runs SET ready = TRUE WHERE run_id = %s", (silent.run_id,))
            (pid,) = await listeners()
            await c.execute("SELECT pg_terminate_backend(%s)", (pid,))

        async def silent_done() -> bool:
            return (await _statuses(pg_store))[silent.run_id] == ("ended", "done")

        await _until(silent_done, 10)  # polled once on reconnect
        assert worker.reconnects == 1
        assert len(await listeners()) == 1 and (await listeners()) != [pid]
        stop.set()
    await worker.store.close()


SLOW_MODEL = """
import anyio
from statechart import Budget, Chart, Edge, FunctionModel, State, call, reply
from statechart.models import register


async def policy(request):
    await anyio.sleep(30)
    return reply(call("next_state", target="done"))


chart = Chart(
    "thinking_{tag}",
    budget=Budget(max_steps=10),
    states=(State("work", instructions="Think."), State("done", kind="terminal")),
    edges=(Edge("work", "done"),),
)


def demo_model(spec="demo:thinking-{tag}"):
    return FunctionModel(policy, spec=spec)


register("demo:thinking-{tag}", demo_model)
"""


async def test_a_worker_cancelled_mid_call_puts_its_runs_back(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """A second signal cancels the drives: each releases its lease and its run is ready for
    another worker in the same transaction, so none is left running with nobody to drive it."""
    import psycopg

    agents = tmp_path / "agents"
    agents.mkdir()
    tag = uuid.uuid4().hex[:8]
    (agents / f"thinking_{tag}.py").write_text(SLOW_MODEL.replace("{tag}", tag))
    ids = await _submit(pg_store, f"{agents}/thinking_{tag}.py:chart", 2)
    worker = Worker(PostgresStore(pg_store.dsn), WorkerSettings(lease_ttl=60, agents=agents))
    with anyio.move_on_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)

            async def both_calling() -> bool:
                return len(worker.active) == 2

            await _until(both_calling, 10)
            await anyio.sleep(0.2)  # the model calls are under way
            tg.cancel_scope.cancel()  # what the CLI does on a second signal
    await worker.store.close()
    async with await psycopg.AsyncConnection.connect(pg_store.dsn) as c:
        rows = await (
            await c.execute("SELECT run_id, lease_holder, ready, status FROM runs ORDER BY num")
        ).fetchall()
    assert rows == [(run_id, None, True, "running") for run_id in ids]
    claims = await RunQueue(pg_store).claim(
        "next", [load_chart(f"{agents}/thinking_{tag}.py:chart")[0].version], limit=5, ttl=30
    )
    assert sorted(c.lease.run_id for c in claims) == sorted(ids)


async def test_a_worker_drives_a_parallel_run_as_one_run(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """The three-region reference agent, submitted three times: each run is claimed once,
    driven with its regions concurrently under the one lease, and ends with every region's
    notes written."""
    import shutil

    agents = tmp_path / "agents"
    agents.mkdir()
    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "agents" / "research_topics.py", agents / "research_topics.py")
    target = f"{agents}/research_topics.py:chart"
    chart, module = load_chart(target)
    await pg_store.save_chart(chart.version, chart.describe(), chart_source(target))
    ids = []
    for _ in range(3):
        run = await start(
            chart, store=pg_store, model=module.demo_model(), context={"question": "tides"}
        )
        await RunQueue(pg_store).enqueue(run.run_id)
        ids.append(run.run_id)
    worker = Worker(PostgresStore(pg_store.dsn), WorkerSettings(concurrency=2, agents=agents))
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, stop)

        async def all_done() -> bool:
            return set((await _statuses(pg_store)).values()) == {("ended", "done")}

        await _until(all_done, 20)
        stop.set()
    await worker.store.close()
    queue = RunQueue(pg_store)
    for run_id in ids:
        leases = await queue.leases(run_id)
        assert len(leases) == 1 and leases[0].clean  # one drive of the whole run
        events = await pg_store.events(run_id)
        assert {e.source.split(".")[1] for e in events if e.source.startswith("research.")} == {
            "history",
            "economics",
            "ecology",
        }
        end = (await pg_store.load(run_id)).snapshot
        assert all(end.context[a] for a in ("history", "economics", "ecology"))
