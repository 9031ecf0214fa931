"""Idempotency keys: written with the intent, stable across a failed attempt's retry."""

from __future__ import annotations

import pytest

from statechart import Budget, Chart, Edge, State, call, reply, tool
from tests.support.helpers import run_script

pytestmark = pytest.mark.anyio
KEYS: list[str | None] = []


@tool(retry="keyed", repeatable=True)
def charge(amount: int, idempotency_key: str | None = None) -> str:
    """Charge a card (the payment API dedupes by key); the first attempt times out."""
    KEYS.append(idempotency_key)
    if len(KEYS) == 1:
        raise TimeoutError("payment API timed out (it may have charged)")
    return f"charged {amount}"


async def test_a_retry_after_a_failure_presents_the_same_key_a_new_charge_a_new_one() -> None:
    KEYS.clear()
    c = Chart(
        "pay",
        budget=Budget(max_steps=20),
        states=(State("bill", tools=(charge,)), State("done", kind="terminal")),
        edges=(Edge("bill", "done"),),
    )
    end, steps, _, store = await run_script(
        c,
        [
            reply(call("charge", "a", amount=5)),  # times out
            reply(call("charge", "b", amount=5)),  # the retry: the same charge
            reply(call("charge", "c", amount=5)),  # a second, deliberate charge
            reply(call("next_state", target="done")),
        ],
    )
    assert end.state == "done"
    first, retry, second = KEYS
    assert first == retry and second != first
    assert [i.key for i in await store.intents(end.run_id)] == [first, retry, second]
