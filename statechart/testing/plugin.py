"""The pytest plugin (registered under `pytest11`, so installing statechart enables it):
fixtures for an in-memory store, a scripted model and a cassette per test, and the
`--statechart-record` option that records cassettes again."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from statechart.models.scripted import ScriptedModel
from statechart.records.messages import Reply
from statechart.store.memory import MemoryStore
from statechart.testing.cassettes import Cassette


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("statechart")
    group.addoption(
        "--statechart-record",
        action="store_true",
        default=False,
        help="Record every statechart cassette again (calls the real models and tools).",
    )


FAILED = pytest.StashKey[bool]()
"""Set on a test whose call failed."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Note on the test whether its call failed: a failed test's recording is not kept."""
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def memory_store() -> MemoryStore:
    """A fresh in-memory store."""
    return MemoryStore()


@pytest.fixture
def scripted_model() -> Callable[..., ScriptedModel]:
    """Makes a model that answers with the given replies, in order:
    `scripted_model(reply(call("next_state", target="done")))`."""

    def make(*replies: Reply, spec: str = "scripted", **options: Any) -> ScriptedModel:
        return ScriptedModel(replies, spec=spec, **options)

    return make


def cassette_path(test_file: Path, test_name: str) -> Path:
    """Where a test's cassette lives: `cassettes/<module>.<test>.json` beside the test."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name).strip("_")
    return test_file.parent / "cassettes" / f"{test_file.stem}.{name}.json"


@pytest.fixture
def statechart_cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """The test's cassette: replayed when its file exists, else (or with
    `--statechart-record`) recorded and written when the test passes."""
    path = cassette_path(Path(str(request.node.path)), request.node.name)
    again = bool(request.config.getoption("--statechart-record"))
    cassette = Cassette(path, record=True if again else None)
    yield cassette
    if not request.node.stash.get(FAILED, False):
        anyio.run(cassette.save)
