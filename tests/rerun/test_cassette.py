"""Renames map a recorded run's states onto the new chart: full paths, and the sibling
names a model gives `next_state` inside a sub-chart."""

from __future__ import annotations

from statechart import call
from statechart.rerun.cassette import Renames, owner_of


def test_paths_and_triggers_are_renamed_at_a_boundary() -> None:
    r = Renames({"research": "study", "research.look": "research.scan"})
    assert r("research") == "study" and r("research.read.think") == "study.read.think"
    assert r("research.look.act") == "research.scan.act"  # the longer key first
    assert r("researcher") == "researcher" and r("done") == "done"
    assert r.trigger("go:research.read") == "go:study.read" and r.trigger("propose") == "propose"


def test_a_next_state_target_is_renamed_where_it_was_named() -> None:
    inner = Renames({"research.look": "research.scan"})
    # in research.read, the sibling `look` is research.look: now `scan`
    assert inner.target("look", "research.read") == "scan"
    renamed = inner.call(call("next_state", target="look"), "research.read")
    assert renamed.arguments == {"target": "scan"}
    # a sub-chart's own `done` is not the top-level `done` renamed
    top = Renames({"done": "closed"})
    assert top.target("done", "research.read") == "done"
    assert top.target("done", "answer") == "closed"
    assert top.call(call("search", q="done"), "answer").arguments == {"q": "done"}


def test_the_owner_of_a_loop_step_is_its_model_state() -> None:
    assert owner_of("research.read.think") == "research.read"
    assert owner_of("send.approve") == "send" and owner_of("review") == "review"
