"""Budgets: a budget that caps nothing is refused when it is built."""

from __future__ import annotations

import pytest

from statechart import Budget, MissingBudgetError


def test_a_budget_with_no_cap_is_refused_when_built() -> None:
    """`Budget()` bounds nothing: refused at once, not when a run starts."""
    with pytest.raises(MissingBudgetError, match=r"Budget\(\) sets no cap.*max_steps"):
        Budget()
    with pytest.raises(MissingBudgetError):
        Budget(strict=True)
    assert Budget(max_tool_calls=1).max_steps is None  # a sub-chart's may leave steps out
