"""A recorded run as a cassette: its model replies and tool results, served back to a drive
of another chart so that no model and no tool is called.

A reply is served for the same place only: the same model state (after renames), its
n-th visit there, and a transcript of the same length; a tool result only for a call with
the same fingerprint (in the order they were recorded). Whatever the cassette cannot
answer it notes as a `Miss`: the replay's divergence point.
"""

from __future__ import annotations

import builtins
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import Struct

from statechart import errors
from statechart.chart.chart import Decision
from statechart.chart.names import NEXT_STATE, SUBSTATES
from statechart.chart.tools import fingerprint
from statechart.engine.effects import RunHandler, RunTool
from statechart.records.messages import Reply, Request, ToolCall, Usage
from statechart.records.run import Event, Run, Status
from statechart.runtime.stand_in import RUN


class Recording(Struct, frozen=True):
    """One recorded run: where it started and every event it stored."""

    base: Run
    """The run as it started (its snapshot at seq 0)."""
    events: tuple[Event, ...]
    status: Status
    """Where the record stops: `ended`, `waiting`, or unfinished (`running`, `sleeping`)."""


class Miss(Struct, frozen=True):
    """What the cassette could not answer: a model request or a tool call it never saw."""

    kind: str
    """`needs_model` or `needs_tool`."""
    state: str
    detail: str


class Renames:
    """State paths of the recorded chart mapped onto the new one (`{"research": "study"}`):
    a path equal to a key, or under it, is renamed; every other path stays."""

    def __init__(self, renames: Mapping[str, str] | None = None) -> None:
        self.pairs = tuple(sorted((renames or {}).items(), key=lambda kv: -len(kv[0])))

    def __call__(self, path: str) -> str:
        for old, new in self.pairs:
            if path == old or path.startswith(old + "."):
                return new + path[len(old) :]
        return path

    def trigger(self, trigger: str) -> str:
        """A trigger with the state it names renamed (`go:research` -> `go:study`)."""
        if trigger.startswith("go:"):
            return "go:" + self(trigger[3:])
        return trigger

    def target(self, target: str, owner: str) -> str:
        """A `next_state` target named in state `owner` of the recorded chart (a sibling's
        name, relative to the chart `owner` is in), as the new chart names it."""
        parent = owner.rpartition(".")[0]
        full = f"{parent}.{target}" if parent else target
        renamed = self(full)
        if renamed == full:
            return target
        new_parent = self(owner).rpartition(".")[0]
        if new_parent and renamed.startswith(new_parent + "."):
            return renamed[len(new_parent) + 1 :]
        return renamed

    def call(self, call: ToolCall, owner: str = "") -> ToolCall:
        """A `next_state` call made in state `owner` with its target renamed; any other
        call as it is."""
        if call.name != NEXT_STATE or not self.pairs or not isinstance(call.arguments, dict):
            return call
        target = call.arguments.get("target")
        if not isinstance(target, str) or self.target(target, owner) == target:
            return call
        arguments = {**call.arguments, "target": self.target(target, owner)}
        return ToolCall(id=call.id, name=call.name, arguments=arguments)


class _Failed(Exception):
    """A recorded failure served back (its class name is the recorded one)."""


_FAILURES: dict[str, type[Exception]] = {}


def _known(name: str) -> type[Exception] | None:
    """The built-in or statechart exception class called `name`, if there is one."""
    found = getattr(builtins, name, None) or getattr(errors, name, None)
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def failure(text: str, timeout: float | None = None) -> Exception:
    """The exception a recorded `Name: message` error text was made from, as near as it
    can be rebuilt: the built-in or statechart class of that name (so a `Retry(on=...)`
    still matches it; `timeout`: where a time limit cut the call off), else a class of
    the same name; carrying the same message."""
    name, _, message = text.partition(": ")
    if not name.isidentifier():
        name, message = "Exception", text
    known = _known(name)
    if known is not None:
        exc = known.__new__(known)
        exc.args = (message,)
        if isinstance(exc, errors.CallTimeoutError):
            exc.what, exc.seconds, exc.by = "the call", timeout or 0.0, "its limit"
        return exc
    kind = _FAILURES.get(name)
    if kind is None:
        kind = _FAILURES[name] = type(name, (_Failed,), {})
    return kind(message)


class RecordedResult(str):
    """A tool result served back: its text, with the outcome class the tool reported."""

    outcome: str | None = None


def _fingerprint(call: ToolCall) -> str:
    """A call's fingerprint as recorded (its arguments as the model sent them)."""
    args = call.arguments
    return fingerprint(call.name, args if isinstance(args, dict) else {"": args})


def owner_of(leaf: str) -> str:
    """The model state a step of its loop belongs to (`research` for `research.act`)."""
    head, _, last = leaf.rpartition(".")
    return head if last in SUBSTATES else leaf


class Cassette:
    """The model and the tool stand-in of one replay (`spec` is the recorded run's model)."""

    def __init__(
        self, recording: Recording, renames: Renames, *, run_handlers: bool = False
    ) -> None:
        self.spec = recording.base.model
        self.replies: dict[str, deque[tuple[int, int, Reply | Exception]]] = defaultdict(deque)
        """Per model state: (visit ordinal, transcript length, reply) in recorded order."""
        self.results: dict[tuple[str, str], deque[tuple[str | None, Any]]] = defaultdict(deque)
        """Per call (its id, which the served reply keeps, and its fingerprint as the model
        sent it): (the fingerprint of the arguments the tool ran with, when it returned;
        its outcome) in recorded order. The id keeps two regions' equal calls apart."""
        self.visits: dict[str, int] = defaultdict(int)
        self.decisions: dict[str, deque[Any]] = defaultdict(deque)
        """Per code state: what its handler decided (or raised) each time, in order; `RUN`
        where the record cannot say (the decision was refused): the handler runs."""
        self.run_handlers = run_handlers
        self.misses: dict[str, Miss] = {}
        """What could not be answered, by the model state asked (`needs_model`) or the id
        of the tool call made (`needs_tool`), until the lockstep takes it."""
        self._load(recording.events, renames)

    def _load(self, events: Iterable[Event], renames: Renames) -> None:
        lengths: dict[tuple[str, int], int] = defaultdict(int)
        answered: dict[tuple[str, int], int] = defaultdict(int)
        ordinals: dict[str, int] = defaultdict(int)
        current: dict[str, int] = {}
        for e in events:
            old_owner = owner_of(e.source)
            owner = renames(old_owner)
            if e.visit is not None:
                current[owner] = e.visit
            if e.usage.model_calls:
                # a failed call that ended the visit carries no visit: it is the current one
                visit = e.visit if e.visit is not None else current.get(owner, -e.seq)
                if not answered[owner, visit]:
                    ordinals[owner] += 1  # as the new run counts: a call with no reply before
                reply = self._reply(e, renames, old_owner)
                if not isinstance(reply, Exception):
                    answered[owner, visit] += 1
                length = lengths[owner, visit]
                self.replies[owner].append((ordinals[owner] - 1, length, reply))
            elif e.usage.tool_calls and e.call is not None:
                key = (e.call.id, _fingerprint(e.call))
                self.results[key].append((e.fingerprint, self._result(e)))
            elif e.actor == "code" and e.call is None and owner_of(e.source) == e.source:
                self.decisions[renames(e.source)].append(self._decision(e, renames))
            if e.visit is not None:
                lengths[owner, e.visit] += e.delta
            entering = renames(owner_of(e.target))
            if entering in e.entered:
                current[entering] = e.seq  # a new visit, keyed by the seq that entered it

    @staticmethod
    def _reply(e: Event, renames: Renames, owner: str) -> Reply | Exception:
        if e.error is not None and not e.calls:
            return failure(e.error, e.timeout)
        u = e.usage
        return Reply(
            tool_calls=tuple(renames.call(c, owner) for c in e.calls),
            usage=Usage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cost_micros=u.cost_micros,
                missing=e.usage_missing,
            ),
            model=e.model or "",
        )

    @staticmethod
    def _decision(e: Event, renames: Renames) -> Any:
        """A code state's recorded outcome: its `Decision` rebuilt, the exception it
        raised, or `RUN` (a refused decision, whose target the record does not keep)."""
        if e.error is not None and not e.error.startswith("InvalidDecision"):
            return failure(e.error, e.timeout)
        if not e.trigger.startswith("go:") or e.refused is not None:
            return RUN
        prefix = e.source.rpartition(".")[0]
        target = renames(e.trigger[3:])
        if prefix and target.startswith(prefix + "."):
            target = target[len(prefix) + 1 :]
        return Decision(target, dict(e.patch), reason=e.reason)

    @staticmethod
    def _result(e: Event) -> Any:
        if e.error is not None:
            return failure(e.error, e.timeout)
        text = RecordedResult(e.result or "")
        text.outcome = e.outcome
        return text

    async def complete(self, request: Request) -> Reply:
        """The recorded reply for this request's place, or a `Miss` noted and raised."""
        state = request.state
        iteration = sum(1 for m in request.transcript if m.role == "assistant")
        if iteration == 0:
            self.visits[state] += 1
        ordinal = self.visits[state] - 1
        queue = self.replies.get(state)
        if queue and queue[0][0] == ordinal and queue[0][1] == len(request.transcript):
            found = queue.popleft()[2]
            if isinstance(found, Exception):
                raise found
            return found
        miss = self.misses[state] = Miss(
            "needs_model",
            state,
            f"the model is asked in '{state}' (visit {ordinal + 1}, after "
            f"{len(request.transcript)} message(s)), a request the recorded run never made",
        )
        raise _Unseen(miss.detail)

    def answer(self, effect: RunTool | RunHandler) -> Any:
        """The stand-in of a drive: a tool call's recorded outcome; a handler's recorded
        decision (or `RUN`: no record of it, or `run_handlers`)."""
        if isinstance(effect, RunTool):
            return self.tool(effect)
        if self.run_handlers:
            return RUN
        queue = self.decisions.get(effect.path)
        return queue.popleft() if queue else RUN

    def tool(self, effect: RunTool) -> Any:
        """The recorded outcome of a call with this fingerprint, or a `Miss` noted."""
        queue = self.results.get((effect.call.id, _fingerprint(effect.call)))
        if queue and queue[0][0] in (None, effect.fingerprint):
            return queue.popleft()[1]
        miss = self.misses[effect.call.id] = Miss(
            "needs_tool",
            effect.call.name,
            f"tool '{effect.call.name}' is called with arguments the recorded run never "
            f"used ({effect.arguments}): its result is unknown",
        )
        return _Unseen(miss.detail)

    def miss_of(self, event: Event) -> Miss | None:
        """The miss behind the new run's `event`, if any (taken: told once)."""
        found = self.misses.pop(owner_of(event.source), None)
        if event.call is not None:
            found = self.misses.pop(event.call.id, None) or found
        return found


class _Unseen(Exception):
    """Raised to the drive for what the cassette cannot answer (the replay stops there)."""


UNSEEN = _Unseen.__name__
"""How an event's error names what the cassette could not answer."""
