"""Hypothesis strategies that draw what a misbehaving model says to a chart: targets the
state has no edge to, tools it does not offer or that do not exist, arguments that do
not fit or do not parse, text instead of a call, several calls at once; mixed with
well-formed calls, so runs get somewhere. Property-test a chart with them: whatever the
model says, the run only takes legal moves, stays within its budgets and ends or waits.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

from statechart.chart.chart import Chart
from statechart.chart.names import NEXT_STATE
from statechart.engine import compiled
from statechart.models.scripted import ScriptedModel
from statechart.records.messages import Reply, ToolCall, Usage

_BAD_ARGUMENTS: tuple[dict[str, Any] | str, ...] = (
    {},
    {"unexpected": [1, 2]},
    {"query": None},
    "{not json",
    "[1, 2]",
)


def _names(chart: Chart) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The chart's state paths, its tool names, and each tool's parameter names."""
    tables = compiled(chart)
    states, tools, params = [], [], {}
    for path, node in tables.nodes.items():
        if node.state is None:
            continue
        states.append(path)
        for tool in node.state.tools:
            if tool.name not in params:
                tools.append(tool.name)
                params[tool.name] = list(tool.args_model.model_fields)
    return states, tools, params


def adversarial_replies(chart: Chart) -> st.SearchStrategy[Reply]:
    """One reply of a model that may misbehave toward `chart`: each call a legal-looking
    `next_state` to any of its states, one to a state that does not exist, a call of any
    of its tools (offered in the current state or not), of a tool that does not exist,
    with arguments that fit, do not fit or do not parse; or text with no call at all."""
    states, tools, params = _names(chart)
    ids = itertools.count(1)
    values = st.one_of(st.integers(-3, 3), st.text(max_size=8), st.none(), st.booleans())

    def fitting(name: str) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({p: values for p in params.get(name, [])})

    targets = st.sampled_from([*states, "nowhere", "done", "escalated"])
    leave = st.builds(
        lambda t, w: {"target": t, **w},
        targets,
        st.dictionaries(st.sampled_from(["summary", "answer", "note", "x"]), values, max_size=2),
    )
    named = st.sampled_from([*tools, "rm_rf", "next_state"]) if tools else st.just("rm_rf")
    call = st.one_of(
        st.builds(lambda a: (NEXT_STATE, a), leave),
        st.builds(lambda a: (NEXT_STATE, a), st.sampled_from(_BAD_ARGUMENTS)),
        named.flatmap(lambda n: st.tuples(st.just(n), fitting(n))),
        named.flatmap(lambda n: st.tuples(st.just(n), st.sampled_from(_BAD_ARGUMENTS))),
    )
    calls = st.lists(call, min_size=0, max_size=3)
    usage = st.builds(
        Usage,
        input_tokens=st.integers(0, 2_000),
        output_tokens=st.integers(0, 500),
        cost_micros=st.integers(0, 3_000),
    )

    def reply(made: list[tuple[str, Any]], u: Usage, text: str) -> Reply:
        return Reply(
            content=text if not made else "",
            tool_calls=tuple(ToolCall(id=f"adv_{next(ids)}", name=n, arguments=a) for n, a in made),
            usage=u,
        )

    return st.builds(reply, calls, usage, st.sampled_from(["I think so.", "", "Done!"]))


def adversarial_models(
    chart: Chart, *, max_replies: int = 30, spec: str = "adversarial"
) -> st.SearchStrategy[ScriptedModel]:
    """A scripted model answering with up to `max_replies` adversarial replies in turn
    (past the last it raises `ModelError`, so the run escalates)."""
    return st.lists(adversarial_replies(chart), min_size=1, max_size=max_replies).map(
        lambda replies: ScriptedModel(replies, spec=spec)
    )
