"""A small agent whose demo model streams slowly, for the live CLI and inspector tests:
a model state that calls a tool reporting progress, then leaves with a long reply."""

from __future__ import annotations

import os
import time

from statechart import Budget, Chart, Edge, ScriptedModel, State, ToolContext, call, reply, tool

WORDS = " ".join(f"word{n}" for n in range(1, 41))
"""The reply the model streams, word by word: `word1 word2 ... word40`."""
DELAY = float(os.environ.get("LIVE_AGENT_DELAY", "0.05"))
"""Seconds between streamed chunks (and between the tool's progress reports)."""
GATE = os.environ.get("LIVE_AGENT_GATE", "")
"""A file the tool waits for (up to 30 s) before it returns, when set: a test lets the
run reach its long reply only once it watches."""


@tool(retry="safe")
def gather(topic: str, ctx: ToolContext) -> str:
    """Gather notes on a topic."""
    for page in range(1, 4):
        ctx.progress(f"page {page} of 3", page=page)
        time.sleep(DELAY)
    deadline = time.monotonic() + 30
    while GATE and not os.path.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"3 pages on {topic}"


chart = Chart(
    "live_agent",
    states=(
        State("work", tools=(gather,), instructions="Gather, then answer."),
        State("done", kind="terminal"),
    ),
    edges=(Edge("work", "done"),),
    budget=Budget(max_steps=12, max_tokens=5000),
)


def demo_model() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(call("gather", topic="tides"), content="Gathering notes first."),
            reply(call("next_state", target="done"), content=WORDS),
        ],
        spec="scripted",
        chunk_delay=DELAY,
    )
