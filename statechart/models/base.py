"""The `Model` protocol: anything that answers a `Request` with a `Reply`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from statechart.records.messages import Reply, Request


@runtime_checkable
class Model(Protocol):
    """Anything that can answer a `Request`: a `spec` and an async `complete`.

    Report what each call cost in `Reply.usage`: budgets charge what it says. A model
    used under a strict cost cap also needs a `price` (`statechart.records.estimate.Price`).

    Example:
        ```python
        from statechart import MemoryStore, Model, Reply, Request, Usage, call, run_sync


        class Finisher:
            "Leaves every state by the first way out it is offered."

            spec = "finisher"

            async def complete(self, request: Request) -> Reply:
                (leave,) = [t for t in request.tools if t.name == "next_state"]
                target = leave.parameters["properties"]["target"]["enum"][0]
                return Reply(tool_calls=(call("next_state", target=target),), usage=Usage())


        assert isinstance(Finisher(), Model)
        chart = ...  # the `hello` chart of the `Chart` example
        assert run_sync(chart, store=MemoryStore(), model=Finisher()).state == "done"
        ```
    """

    @property
    def spec(self) -> str:
        """How to recreate this model (`scripted`, `openai:gpt-4o`, ...); stored in the run."""
        ...

    async def complete(self, request: Request) -> Reply:
        """Answer one request."""
        ...
