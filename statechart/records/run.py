"""The run record (all the memory of one execution) and the event record (one per transition).

Both are frozen `msgspec` structs that round-trip through JSON exactly. The run
holds only bounded fields; growing sets (transcript, fingerprints, intents)
live in the store's own append-only tables.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from msgspec.structs import replace

from statechart.records.messages import Message, ToolCall
from statechart.records.record import Record
from statechart.records.spent import ZERO, Spent

Status = Literal["running", "waiting", "sleeping", "ended"]
ROOT_LEVEL = "root"
"""The root chart's budget level (stores written before schema 3 named it `""`)."""


Actor = Literal["model", "code", "human", "system"]


class QueuedCall(Record, frozen=True):
    """A call from a model reply that has not run yet (calls run one per step, in order).

    `Run.pending` holds them; while the run waits for an approval, the head is the call
    a person decides on.

    Example:
        ```python
        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync, tool


        @tool(retry="keyed", needs_approval=True)
        def refund(order: str, amount: int, idempotency_key: str) -> str:
            "Refund an order."
            return f"refunded {amount} on {order}"


        chart = Chart(
            "refunds",
            states=(State("resolve", tools=(refund,), instructions="Refund the order."),
                    State("done", kind="terminal")),
            edges=(Edge("resolve", "done"),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("refund", order="A-7", amount=20))])
        run = run_sync(chart, store=MemoryStore(), model=model)
        assert run.state == "resolve.approve"  # its model asked for `refund`, a needs_approval tool
        head = run.pending[0]
        assert (head.call.name, head.call.arguments) == ("refund", {"order": "A-7", "amount": 20})
        assert head.approved_by is None  # `approve(..., by="dana")` sets it; then it runs
        ```
    """

    call: ToolCall
    """The call as the model sent it, or as a person edited it when approving."""
    approved_by: str | None = None
    """Set once a human approved this call; it then runs without asking again."""
    key: str | None = None
    """Idempotency key, fixed when the call's intent was recorded; never recomputed."""


class Intent(Record, frozen=True):
    """A tool call recorded as about to run, before it runs; completed once it left the queue.

    The event that records an intent is the one that leaves the call at the head of the
    queue in `act`; `key` is written with it and handed to keyed tools and reconcile hooks.
    `Store.intents(run_id)` lists them, in order.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync, tool


        @tool(retry="keyed", needs_approval=True)
        def refund(order: str, amount: int, idempotency_key: str) -> str:
            "Refund an order."
            return f"refunded {amount} on {order}"


        chart = Chart(
            "refunds",
            states=(State("resolve", tools=(refund,), instructions="Refund the order."),
                    State("done", kind="terminal")),
            edges=(Edge("resolve", "done"),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("refund", order="A-7", amount=20))])
        store = MemoryStore()
        run = run_sync(chart, store=store, model=model)  # waits for a person to approve
        # calls recorded to run and not completed (one waiting for approval, or one a killed
        # driver may have started); in async code: await store.intents(run_id)
        open_calls = [i for i in anyio.run(store.intents, run.run_id) if not i.completed]
        assert [(i.call.name, i.state) for i in open_calls] == [("refund", "resolve")]
        assert open_calls[0].key == run.pending[0].key  # the key a keyed tool is handed
        ```
    """

    call: ToolCall
    """The call, with the arguments it runs with."""
    state: str
    """Path of the model state the call belongs to."""
    seq: int
    """Seq of the event that recorded the intent."""
    key: str | None = None
    """The call's idempotency key (see docs/persistence.md, "Side effects")."""
    completed: bool = False
    """True once the call left the queue: it ran, or was refused, rejected or dropped."""
    completed_seq: int | None = None
    """Seq of the event that completed it, once `completed`."""


class Visit(Record, frozen=True):
    """The current visit of a model state (`Run.visit`); reset on every entry.

    Per-visit caps (`max_iterations`, `max_calls`) count against it.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, drive, reply, start, tool


        @tool(retry="safe")
        def search_kb(query: str) -> str:
            "Search the knowledge base."
            return "KB-12"


        chart = Chart(
            "qa",
            states=(State("research", tools=(search_kb,), instructions="Look it up."),
                    State("done", kind="terminal")),
            edges=(Edge("research", "done"),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("search_kb", query="refund")),
                               reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            runs = [record.run async for record in drive(chart, run, store=store, model=model)]
            # the second step: back in `research.think` after the model's first reply ran one search
            assert runs[1].state == "research.think"
            visit = runs[1].visit
            assert visit is not None
            assert (visit.state, visit.iterations, visit.calls) == ("research", 1, {"search_kb": 1})


        anyio.run(main)
        ```
    """

    state: str
    """Path of the model state (e.g. `research`, `explore.search`)."""
    seq: int
    """Seq of the event that entered it: the key of this visit's transcript."""
    iterations: int = 0
    """Model calls made in this visit."""
    calls: dict[str, int] = {}
    """Executed calls per tool in this visit (failed ones included: caps count attempts)."""
    succeeded: dict[str, int] = {}
    """Calls per tool that returned in this visit: a repeatable keyed tool's next key
    counts these, so a retry after a failure presents the same key."""


class Region(Record, frozen=True):
    """Where one region of an active parallel state is (`Run.regions`): the fields a run
    keeps per thread of control, for that region alone."""

    state: str
    """Full path of the region's current leaf (`research.web.search.think`)."""
    status: Status = "running"
    """`running`, `waiting` (an approval in it), `sleeping` (a failed call's next attempt
    is due at `wake`) or `ended` (in one of its sub-chart's terminals)."""
    visit: Visit | None = None
    """The current visit of a model state in the region."""
    pending: tuple[QueuedCall, ...] = ()
    """Calls of the region's last reply still to run."""
    reason: str = ""
    """Why the region waits or ended."""
    routed: int = 0
    """Free exhaustion routes in the region since its last charged step."""
    doubt: str | None = None
    """A queued call of the region that may have run under a driver that died."""
    wake: float | None = None
    """When the region's next timer is due (epoch seconds)."""
    timers: dict[str, float] = {}
    """The region's armed `after=` edges -> when each fires."""
    attempt: int = 0
    """Failed attempts of the region's call being tried again."""


class Run(Record, frozen=True):
    """One execution, as data. The snapshot the store keeps is this record.

    Frozen: every step makes a new one (`Step.run`); `Store.load` returns the latest.

    Example:
        ```python
        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])
        run = run_sync(chart, store=MemoryStore(), model=model)
        assert (run.state, run.status) == ("done", "ended")
        spent = run.ledger["root"]  # the whole run; a budgeted state's share is under its path
        assert (spent.steps, spent.model_calls) == (2, 1)
        ```
    """

    run_id: str
    """Unique in its store: `start(run_id=...)`, or a random hex id."""
    chart: str
    """Name of the root chart."""
    chart_version: str
    """`Chart.version` when the run started, so a changed chart can be told apart."""
    model: str
    """Spec of the model driving the run, so a resume uses the same one."""
    state: str
    """Full path of the current leaf state (`research.think`, `explore.search.act`)."""
    status: Status = "running"
    """`running` (steps remain), `waiting` (for a person to `approve` or `reject`),
    `sleeping` (until `wake`: a failed call's next attempt) or `ended` (in a terminal,
    `cancelled` included)."""
    context: dict[str, Any] = {}
    """The context as JSON-ready values (validated by the chart's context type)."""
    contexts: dict[str, dict[str, Any]] = {}
    """The own context of every active ported sub-chart (one with `input=`/`output=`),
    by the path of the chart state hosting it; `context` is the root's."""
    seq: int = 0
    """Seq of the last event; the next event is `seq + 1`."""
    visits: dict[str, int] = {}
    """Entries per state path."""
    traversals: dict[str, int] = {}
    """Traversals per capped edge (`source->target`, full paths)."""
    ledger: dict[str, Spent] = {}
    """Spending per budget level: `root` is the root chart, otherwise the owning state's
    path (`research`, `explore.sources`)."""
    breached: dict[str, str] = {}
    """Strict levels a reply overran (level -> the cap kind): spent from then on."""
    visit: Visit | None = None
    """The current visit of a model state; None elsewhere."""
    pending: tuple[QueuedCall, ...] = ()
    """Calls of the last reply still to run; the head is the open intent while in `act`."""
    reason: str = ""
    """Why the run waits or ended, when it did."""
    routed: int = 0
    """Free exhaustion routes since the last charged step (bounds routing loops)."""
    doubt: str | None = None
    """Id of a queued call that may have run under a driver that stopped without releasing
    its lease: the next step settles it by its tool's retry policy."""
    lineage_root: str = ""
    """Id of the first run of this lineage (forks keep it; idempotency keys use it)."""
    parent_run: str | None = None
    """For a fork: the run it was forked from."""
    parent_seq: int | None = None
    """For a fork: the parent's seq it starts after (its events up to there are shared)."""
    trace: dict[str, str] = {}
    """Propagated trace context (filled by tracing)."""
    created_at: float = 0.0
    """When `start` (or `fork`) created it, in seconds since the epoch."""
    wake: float | None = None
    """When the run's next timer is due (epoch seconds): while `sleeping`, the failed
    call's next attempt; otherwise the first of `timers`."""
    timers: dict[str, float] = {}
    """Armed `after=` edges (`source->target`, full paths) -> when each fires; armed when
    its source state is entered, disarmed when it is left."""
    attempt: int = 0
    """Failed attempts of the call being tried again (0 when none failed)."""
    history: dict[str, str] = {}
    """Where to come back to in each `history=` chart state that was interrupted (left
    while its sub-chart was still running): its path -> the state to re-enter."""
    regions: dict[str, Region] = {}
    """While in a parallel state (`state` is its path): each region (by path, in the
    chart's order) and where it is. Empty elsewhere."""


class Event(Record, frozen=True):
    """One immutable row per transition. The run is a fold of its events.

    `Store.events(run_id)` returns them in order: the run's audit trail.

    Example:
        ```python
        import anyio
        from pydantic import BaseModel

        from statechart import Budget, Chart, Edge, Facts, MemoryStore, ScriptedModel, State
        from statechart import call, reply, run_sync


        class Ctx(BaseModel):
            answer: str | None = None


        def has_answer(facts: Facts) -> str | None:
            return None if facts.context.answer else "write an answer first"


        chart = Chart(
            "qa",
            context=Ctx,
            states=(State("ask", writes=("answer",), instructions="Answer."),
                    State("done", kind="terminal")),
            edges=(Edge("ask", "done", guard=has_answer),),
            budget=Budget(max_steps=10),
        )
        model = ScriptedModel([reply(call("next_state", target="done")),
                               reply(call("next_state", target="done", answer="42"))])
        store = MemoryStore()
        run = run_sync(chart, store=store, model=model)
        events = anyio.run(store.events, run.run_id)  # in async code: await store.events(...)
        assert [e.trigger for e in events] == ["propose", "refuse", "propose", "go:done"]
        refused = [e.refused for e in events if e.refused]  # moves code refused, and why
        assert refused == ["edge ask->done refused: write an answer first"]
        decided = [(e.seq, e.by, e.trigger) for e in events if e.actor == "human"]  # none here
        ```
    """

    run_id: str
    """The run this event belongs to."""
    seq: int
    """Its place in the run: 1, 2, 3, ... (unique per run: what fences concurrent writers)."""
    time: float
    """When it happened, in seconds since the epoch."""
    source: str
    """Full path of the leaf state the step started in (`research.think`)."""
    target: str
    """Full path of the leaf state after; the same as `source` when the state did not move."""
    trigger: str
    """What fired: `propose`, `results`, `next_call`, `refuse`, `ask`, `go:PATH`,
    `exhaust:LEVEL`, `approved`, `rejected`, `cancel`, `resume`, `takeover`, `retry` (a
    failed call to be tried again at `wake`), `wake` (its time came), ..."""
    actor: Actor
    """Who caused it: `model` (a reply, a move it chose), `code` (a tool or handler ran),
    `human` (approve, reject, cancel) or `system` (budgets, escalation, recovery)."""
    reason: str = ""
    """Why, in words: a route, an escalation, a wait, a person's note."""
    usage: Spent = ZERO
    """What this step cost (charged to every level containing `source`)."""
    call: ToolCall | None = None
    """The call this step ran, refused or decided on."""
    calls: tuple[ToolCall, ...] = ()
    """For a `propose` step: the calls the reply queued."""
    result: str | None = None
    """The (truncated) tool result or refusal text returned to the model."""
    refused: str | None = None
    """Why a proposed move was refused; the state did not change."""
    error: str | None = None
    """What failed, as `Type: message`: a tool, a handler, the model call, a context."""
    patch: dict[str, Any] = {}
    """Context fields this step wrote."""
    visit: int | None = None
    """Transcript key this step appended to (seq of the visit's entering event)."""
    delta: int = 0
    """Number of transcript messages this step appended."""
    fingerprint: str | None = None
    """Fingerprint of the executed call, if one ran."""
    entered: tuple[str, ...] = ()
    """States entered, outermost first."""
    exited: tuple[str, ...] = ()
    """States exited, innermost first."""
    exhausted: str | None = None
    """`level:kind` of the budget or cap that forced this move: `root:steps`,
    `research:iterations`, `explore:tokens` (kinds are `Spent` fields, `iterations` or
    `visits`)."""
    edge: str | None = None
    """`source->target` (full paths) of the user edge this move took, if it took one."""
    intent: str | None = None
    """Id of the call whose intent this event records (the row *is* the intent)."""
    key: str | None = None
    """The idempotency key recorded with that intent."""
    by: str | None = None
    """Who decided, for human events."""
    span: str | None = None
    """Span id (hex) of this transition's OpenTelemetry span, when traced."""
    model: str | None = None
    """The model spec the run uses from this event on (a switch of model)."""
    outcome: str | None = None
    """The outcome class of the executed call's result (its `outcome` field), for mining."""
    scope: str = ""
    """Whose context `patch` wrote: `""` the root's, else the path of a ported sub-chart."""
    outputs: dict[str, dict[str, Any]] = {}
    """Ported sub-charts this move left (innermost first) -> the patch each wrote to the
    context around it, as computed: replay applies it without calling a mapping again."""
    inputs: dict[str, dict[str, Any]] = {}
    """Ported sub-charts this move entered (outermost first) -> their first context."""
    usage_missing: bool = False
    """The provider's reply carried no usage: `usage` holds a conservative estimate."""
    breach: str | None = None
    """`level:kind` of a strict cap this reply overran (its estimate was wrong); the level
    is spent from this event on."""
    timeout: float | None = None
    """Seconds of the limit that cut this step's call off (`error` names the call and what
    set the limit: a timeout, or what was left of a wall budget)."""
    wake: float | None = None
    """For a `retry` event: when the next attempt is due (epoch seconds); the run sleeps
    until then."""
    remembered: dict[str, str] = {}
    """`history=` chart states this move left: an interrupted one -> the state it will
    come back to; one whose sub-chart ended -> "" (it forgets)."""


class CheckedCall(Record, frozen=True):
    """A call's arguments as its tool validated them (JSON values) and their fingerprint:
    computed once, when the call's intent is recorded, and handed to the step that runs it."""

    call: ToolCall
    arguments: dict[str, Any]
    fingerprint: str


class Step(Record, frozen=True):
    """What one `step()` did: the event, the run after it, and the transcript delta.

    `drive()` yields one per transition, once it is stored.

    Example:
        ```python
        import anyio

        from statechart import Budget, Chart, Edge, MemoryStore, ScriptedModel, State
        from statechart import call, drive, reply, start

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Say hi."), State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        model = ScriptedModel([reply(call("next_state", target="done"))])


        async def main() -> None:
            store = MemoryStore()
            run = await start(chart, store=store, model=model)
            async for record in drive(chart, run, store=store, model=model):
                event = record.event  # stored before drive() yields it
                print(event.seq, event.trigger, record.refused or "", record.spent.tokens)
            assert [e.trigger for e in await store.events(run.run_id)] == ["propose", "go:done"]


        anyio.run(main)
        ```
    """

    kind: ClassVar[str] = "step"
    """What a live stream calls it (`statechart.watch`): a stored transition."""

    run: Run
    """The run after this step."""
    event: Event
    """The event recording it."""
    messages: tuple[Message, ...] = ()
    """The transcript messages this step added (the event's `delta` counts them)."""
    opened: Intent | None = None
    """The intent this step recorded (or re-recorded with edited arguments)."""
    closed: tuple[str, ...] = ()
    """Ids of calls whose intents this step completed."""
    base: bool = False
    """The run after this step is stored whole: replay starts here (a migration)."""
    checked: CheckedCall | None = None
    """The validated arguments of the call whose intent this step recorded."""

    def with_span(self, span: str) -> Step:
        """The same step with the id (hex) of its transition's span written into its event."""
        return replace(self, event=replace(self.event, span=span))

    @property
    def refused(self) -> str | None:
        """Why the move was refused, if it was."""
        return self.event.refused

    @property
    def entered(self) -> tuple[str, ...]:
        """States entered, outermost first."""
        return self.event.entered

    @property
    def exited(self) -> tuple[str, ...]:
        """States exited, innermost first."""
        return self.event.exited

    @property
    def spent(self) -> Spent:
        """What the step cost."""
        return self.event.usage
