"""What a live run tells its observers as it goes: calls starting, tokens, a tool's
progress, each stored step, and the run waiting or ending.

Only `Step` is stored; the rest is shown once and forgotten, so a stream that misses
a token loses nothing the log does not have. `CallStarted`, `Token` and `Progress` name
their run, the `seq` their step will be stored as, and the state path they happened in
(which tells nested levels apart); `Step`, `RunWaiting` and `RunEnded` carry the run
itself (`.run`; a step also its stored `.event`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from statechart.records.record import Record
from statechart.records.run import Run, Step


class CallStarted(Record, frozen=True):
    """A model call, tool call or handler began; its step will be stored as `seq`.

    Example:
        ```python
        from statechart import CallStarted

        began = CallStarted(run_id="r1", seq=3, path="research.think", call="model",
                            name="scripted", call_id="r1:3")
        assert began.kind == "call_started"
        ```
    """

    kind: ClassVar[str] = "call_started"
    run_id: str
    """The run."""
    seq: int
    """The seq the call's step will be stored as."""
    path: str
    """The state path the call is made in (`triage.research.think`)."""
    call: Literal["model", "tool", "handler"]
    """What is called."""
    name: str
    """The model's spec, the tool's name, or the state whose handler runs."""
    call_id: str
    """Ties the call's tokens and progress to it: the tool call's id, or
    `RUN_ID:SEQ` for a model call or handler."""
    again: bool = False
    """A drive that died had started this same call: any text shown for `call_id`
    before is void, and the call is made anew."""


class Token(Record, frozen=True):
    """New text of a streaming model call: words of its reply, or part of a tool call's
    JSON arguments (`tool` set).

    Example:
        ```python
        from statechart import Token

        said = Token(run_id="r1", seq=3, path="research.think", call_id="r1:3",
                     text="Looking it up")
        assert said.kind == "token" and not said.tool
        ```
    """

    kind: ClassVar[str] = "token"
    run_id: str
    """The run."""
    seq: int
    """The seq the call's step will be stored as."""
    path: str
    """The state path of the call."""
    call_id: str
    """The model call (its `CallStarted.call_id`)."""
    text: str
    """The new text (consecutive tokens may arrive joined when the consumer is slow)."""
    tool: str = ""
    """The tool whose arguments this is part of; "" for the reply's text."""
    tool_call_id: str = ""
    """The id of the tool call whose arguments this is part of."""


class Progress(Record, frozen=True):
    """What a running tool reported through its `ToolContext`.

    Example:
        ```python
        from statechart import Progress

        seen = Progress(run_id="r1", seq=4, path="research.act", call_id="c1",
                        tool="crawl", message="3 of 10 pages", data={"done": 3})
        assert seen.kind == "progress"
        ```
    """

    kind: ClassVar[str] = "progress"
    run_id: str
    """The run."""
    seq: int
    """The seq the call's step will be stored as."""
    path: str
    """The state path of the call."""
    call_id: str
    """The tool call."""
    tool: str
    """The tool reporting."""
    message: str = ""
    """What it says."""
    data: dict[str, Any] = {}
    """Structured figures (JSON values); when a slow consumer makes reports of one
    call pile up, only the latest is kept."""


class RunWaiting(Record, frozen=True):
    """The drive stopped with the run waiting for a human (`waiting`) or for a timer
    (`sleeping`): it is stored, and `resume` continues it.

    Example:
        ```python
        from statechart import Run, RunWaiting

        run = Run(run_id="r1", chart="c", chart_version="v", model="m", state="pay",
                  status="waiting", reason="approve refund")
        assert RunWaiting(run=run).kind == "waiting"
        ```
    """

    kind: ClassVar[str] = "waiting"
    run: Run
    """The run as stored; `run.reason` says what it waits for, `run.wake` until when."""


class RunEnded(Record, frozen=True):
    """The run reached a terminal state (done, failed, escalated, cancelled, ...).

    Example:
        ```python
        from statechart import Run, RunEnded

        run = Run(run_id="r1", chart="c", chart_version="v", model="m", state="done",
                  status="ended")
        assert RunEnded(run=run).kind == "ended"
        ```
    """

    kind: ClassVar[str] = "ended"
    run: Run
    """The run as stored."""


LiveEvent = CallStarted | Token | Progress | Step | RunWaiting | RunEnded
"""One event of a live run; each has a `kind` (`call_started`, `token`, `progress`,
`step`, `waiting`, `ended`)."""
