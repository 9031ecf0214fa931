"""`Retry`: how a failed model or tool call is tried again, and how long to wait between
attempts. Each failed attempt is an event; the wait is a durable timer (docs/concepts.md,
"Time")."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from statechart.errors import ChartError


@dataclass(frozen=True)
class Retry:
    """Try a failed call again: up to `attempts` in all, waiting `initial` seconds after
    the first failure, `factor` times longer after each next one, at most `max_interval`,
    give or take `jitter` (a fraction of the wait). Only failures that are instances of
    `on` are tried again; a timed-out call raises `CallTimeoutError`, a `TimeoutError`.

    Example:
        ```python
        from statechart import Retry, State, tool

        backoff = Retry(attempts=4, initial=0.5, factor=2, max_interval=3, jitter=0)
        assert [backoff.interval(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


        @tool(retry="safe", retries=Retry(attempts=3, on=(ConnectionError, TimeoutError)))
        def fetch(url: str) -> str:
            "Fetch a page."
            return "..."


        state = State("research", tools=(fetch,), retries=Retry(attempts=2))  # its model calls
        ```
    """

    attempts: int = 3
    """Attempts in all, the first included (1 never retries)."""
    initial: float = 1.0
    """Seconds to wait after the first failure."""
    factor: float = 2.0
    """How much longer each next wait is."""
    max_interval: float | None = None
    """The longest wait, in seconds; None: 60, or `initial` if that is longer."""
    jitter: float = 0.1
    """The wait varies by up to this fraction either way (0 for none), the same for the
    same run and event, so replaying a run draws the same waits."""
    on: tuple[type[BaseException], ...] = (Exception,)
    """The failures worth another attempt (a single class is accepted too)."""

    def __post_init__(self) -> None:
        on = self.on if isinstance(self.on, tuple) else (self.on,)
        object.__setattr__(self, "on", on)
        if self.max_interval is None and _number(self.initial):
            object.__setattr__(self, "max_interval", max(60.0, float(self.initial)))
        problems = []
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            problems.append(f"attempts={self.attempts!r} is not a whole number")
        elif self.attempts < 1:
            problems.append(f"attempts={self.attempts} is below 1")
        if not _number(self.initial) or self.initial < 0:
            problems.append(f"initial={self.initial!r} is not a number of seconds")
        if not _number(self.factor) or self.factor < 1:
            problems.append(f"factor={self.factor!r} is below 1")
        if not _number(self.max_interval) or self.max_interval < self.initial:  # type: ignore[operator]
            problems.append(f"max_interval={self.max_interval!r} is below initial")
        if not _number(self.jitter) or not 0 <= self.jitter <= 1:
            problems.append(f"jitter={self.jitter!r} is not between 0 and 1")
        if not on or not all(isinstance(c, type) and issubclass(c, BaseException) for c in on):
            problems.append(f"on={self.on!r} is not a tuple of exception classes")
        if problems:
            raise ChartError(f"Retry(...): {'; '.join(problems)}")

    def again(self, failure: BaseException, failed: int) -> bool:
        """Whether a call that has now failed `failed` times (this `failure` the last) gets
        another attempt."""
        return failed < self.attempts and isinstance(failure, self.on)

    def interval(self, failed: int, seed: str = "") -> float:
        """Seconds to wait after the `failed`-th failure; `seed` draws the jitter."""
        assert self.max_interval is not None  # filled in when built
        base: float = min(self.initial * self.factor ** (failed - 1), self.max_interval)
        if not self.jitter or not seed:
            return base
        draw = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big") / 2**64
        return max(0.0, base * (1 + self.jitter * (2 * draw - 1)))

    def __repr__(self) -> str:
        names = ",".join(c.__qualname__ for c in self.on)
        return (
            f"Retry(attempts={self.attempts}, initial={self.initial}, factor={self.factor}, "
            f"max_interval={self.max_interval}, jitter={self.jitter}, on=({names}))"
        )


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
