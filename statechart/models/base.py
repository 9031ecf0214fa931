"""The `Model` protocol: anything that answers a `Request` with a `Reply`; and
`StreamingModel`, one that can also send the reply in pieces as it is written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from statechart.records.messages import Chunk, Reply, Request


@runtime_checkable
class Model(Protocol):
    """Anything that can answer a `Request`: a `spec` and an async `complete`.

    Report what each call cost in `Reply.usage`: budgets charge what it says. A model
    used under a strict cost cap also needs a `price` (`statechart.records.estimate.Price`).

    Example:
        ```python
        from statechart import Budget, Chart, Edge, MemoryStore, Model, Reply, Request, State, Usage
        from statechart import call, run_sync


        class Finisher:
            "Leaves every state by the first way out it is offered."

            spec = "finisher"

            async def complete(self, request: Request) -> Reply:
                (leave,) = [t for t in request.tools if t.name == "next_state"]
                target = leave.parameters["properties"]["target"]["enum"][0]
                return Reply(tool_calls=(call("next_state", target=target),), usage=Usage())


        assert isinstance(Finisher(), Model)
        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
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


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A `Model` that can also stream: `stream(request)` yields `Chunk`s as the reply is
    written, then the whole `Reply` last.

    The driver streams only when someone watches the run (`statechart.watch`, `on=`);
    otherwise it calls `complete`. The chunks are shown, never stored: the final reply
    is what the step records, so it must hold all the chunks said (and the usage).

    Example:
        ```python
        from collections.abc import AsyncIterator

        from statechart import Chunk, Reply, Request, StreamingModel, Usage, call


        class Echo:
            "Says where it is, word by word, then leaves."

            spec = "echo"

            async def complete(self, request: Request) -> Reply:
                return Reply(content=f"in {request.state}",
                             tool_calls=(call("next_state", target="done"),), usage=Usage())

            async def stream(self, request: Request) -> AsyncIterator[Chunk | Reply]:
                whole = await self.complete(request)
                for word in ("in ", request.state):
                    yield Chunk(text=word)
                yield whole


        assert isinstance(Echo(), StreamingModel)
        ```
    """

    def stream(self, request: Request) -> AsyncIterator[Chunk | Reply]:
        """Answer one request in pieces: its `Chunk`s as they come, then the `Reply`."""
        ...
