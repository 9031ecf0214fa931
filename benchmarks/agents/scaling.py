"""The scaling benchmark's chart, loaded by `statechart worker --agents benchmarks/agents`:
benchmarks/durable.py's workload (a model calls a ~500-character `fetch` tool, then
finishes), with a model that reads its place from the transcript, so one model object
serves every run in a worker. `SCALING_STEPS` sets transitions per run, `SCALING_LATENCY`
the seconds each model reply takes (like a model behind a network)."""

from __future__ import annotations

import os

import anyio
import pydantic

import statechart as sc
from statechart.models import register
from statechart.models.scripted import Policy

STEPS = int(os.environ.get("SCALING_STEPS", "20"))
CALLS = STEPS // 2 - 1
FILLER = " ".join(f"field{i}=value{i * 7 % 1000:03d};" for i in range(80))


class Ctx(pydantic.BaseModel):
    note: str | None = None


@sc.tool(retry="safe", inline=True)  # pure and quick: on the loop
def fetch(n: int) -> str:
    """A `safe` tool whose ~500-character result differs with its argument."""
    head = f"record {n}: "
    return head + FILLER[: 500 - len(head)]


chart = sc.Chart(
    "scaling",
    states=(
        sc.State(
            "work",
            tools=(fetch,),
            writes=("note",),
            instructions="Fetch, then finish.",
            max_iterations=CALLS + 2,
            max_calls={"fetch": CALLS + 1},
        ),
        sc.State("done", kind="terminal"),
    ),
    edges=(sc.Edge("work", "done"),),
    context=Ctx,
    budget=sc.Budget(max_steps=STEPS * 2),
)


def decide(request: sc.Request) -> sc.Reply:
    n = sum(1 for m in request.transcript if m.role == "tool") + 1
    if n <= CALLS:
        return sc.reply(sc.call("fetch", f"c{n}", n=n))
    return sc.reply(sc.call("next_state", f"c{n}", target="done", note="ok"))


def slow(latency: float) -> Policy:
    async def answer(request: sc.Request) -> sc.Reply:
        await anyio.sleep(latency)
        return decide(request)

    return answer


class Lean(sc.FunctionModel):
    """Keeps no requests (that list is not framework cost)."""

    async def complete(self, request: sc.Request) -> sc.Reply:
        out = await super().complete(request)
        self.requests.clear()
        return out


def demo_model(spec: str = "demo:scaling") -> Lean:
    latency = float(os.environ.get("SCALING_LATENCY", "0"))
    return Lean(slow(latency) if latency else decide, spec=spec)


register("demo:scaling", demo_model)
