"""Typed contexts and tools shared by the engine, record and validation tests: a context with
a nested model and a constrained field, a tool taking a pydantic argument, one that fails
once, and one that needs approval."""

from __future__ import annotations

from pydantic import BaseModel, Field

from statechart import Budget, Chart, Edge, State, tool

DONE = State("done", kind="terminal")


class Address(BaseModel):
    city: str


class TicketCtx(BaseModel):
    ticket_id: str
    addr: Address | None = None
    priority: int = Field(default=3, ge=1, le=5)
    ok: bool = False


class Order(BaseModel):
    sku: str
    qty: int


PLACED: list[Order] = []
FLAKY = {"left": 1}


@tool(retry="safe")
def place(order: Order) -> str:
    """Place an order."""
    PLACED.append(order)
    return f"placed {order.qty} x {order.sku}"


@tool(retry="safe")
def flaky(q: str) -> str:
    """Fails once."""
    if FLAKY["left"]:
        FLAKY["left"] -= 1
        raise TimeoutError("upstream slow")
    return "ok"


def tools_chart() -> Chart:
    return Chart(
        "t",
        budget=Budget(max_steps=20),
        states=(State("s", tools=(place, flaky)), DONE),
        edges=(Edge("s", "done"),),
    )


@tool(retry="never", needs_approval=True)
def wire(to: str, amount: int) -> str:
    """Wire money."""
    return f"wired {amount} to {to}"
