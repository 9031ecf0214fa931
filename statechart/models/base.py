"""The `Model` protocol: anything that answers a `Request` with a `Reply`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from statechart.records.messages import Reply, Request


@runtime_checkable
class Model(Protocol):
    """Anything that can answer a `Request`."""

    @property
    def spec(self) -> str:
        """How to recreate this model (`scripted`, `openai:gpt-4o`, ...); stored in the run."""
        ...

    async def complete(self, request: Request) -> Reply:
        """Answer one request."""
        ...
