"""A cassette replays only what it recorded: a run started with another context, or one
more run than it holds, fails with what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

import statechart as sc
from statechart.errors import CassetteError
from statechart.testing import Cassette, assert_path

pytestmark = pytest.mark.anyio


class Ticket(BaseModel):
    ticket: str = ""


CHART = sc.Chart(
    "tickets",
    context=Ticket,
    budget=sc.Budget(max_steps=5),
    states=(
        sc.State("work", reads=("ticket",), instructions="Finish."),
        sc.State("done", kind="terminal"),
    ),
    edges=(sc.Edge("work", "done"),),
)


async def test_a_changed_context_or_an_extra_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recording = Cassette(path, record=True)
    model = sc.ScriptedModel([sc.reply(sc.call("next_state", target="done"))])
    await recording.run(CHART, model=model, context={"ticket": "T-1"})
    await recording.save()

    same = Cassette(path)
    ran = await same.run(CHART, context={"ticket": "T-1"})
    assert_path(ran, ["work", "done"])
    with pytest.raises(CassetteError, match="holds 1 run"):
        await same.run(CHART, context={"ticket": "T-1"})
    with pytest.raises(CassetteError, match=r"starts with the context .*'T-9'.* recorded with"):
        await Cassette(path).run(CHART, context={"ticket": "T-9"})
    path.write_text("{}")
    with pytest.raises(CassetteError, match="is not a statechart cassette"):
        Cassette(path)
