"""Chart, State and Edge: the immutable definition of an agent.

A chart is validated when it is built (see `validate.py`); a chart that
builds can be compiled and driven. Sub-charts are built from factories so no
two parents ever share one child by reference.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from statechart.chart.budget import Budget
from statechart.chart.names import ESCALATED, IMPLICIT
from statechart.chart.retry import Retry
from statechart.chart.tools import Tool, positive_seconds

if TYPE_CHECKING:
    from statechart.records.run import Run

StateKind = Literal["model", "code", "chart", "parallel", "map", "approval", "terminal"]
History = Literal["shallow", "deep"]
Join = Literal["all", "first"]
Outcome = Literal["success", "failure"]
DEFAULT_MAX_ITERATIONS = 10


class EmptyContext(BaseModel):
    """The context of a chart that declares none."""


@dataclass(frozen=True)
class Facts:
    """What a guard is given: the move's structured facts, never a model call.

    A guard returns None or True to allow the move, a reason string (or False) to refuse
    it: a model hears the reason as its `next_state` call's result; a code state escalates.

    Example:
        ```python
        from statechart import Edge, Facts


        def checked_twice(facts: Facts) -> str | None:
            if not facts.context.answer:  # the answer this move writes counts
                return "write an answer first"
            if facts.run.visits.get(facts.source, 0) < 2:
                return "check the answer once more"
            return None


        edge = Edge("research", "done", guard=checked_twice)
        ```
    """

    context: BaseModel
    """The typed context, with the proposed move's patch applied."""
    run: Run
    """The run before the move: counters, ledgers, state path."""
    source: str
    """Path of the state the move leaves."""
    target: str
    """Path of the state the move enters."""


Guard = Callable[[Facts], bool | str | None]
"""Returns None or True to allow; a reason string (or False) to refuse."""


@dataclass(frozen=True)
class Decision:
    """What a code state's handler returns: where to go and what to write.

    A handler may return a bare target name instead when it writes nothing.

    Example:
        ```python
        from pydantic import BaseModel

        from statechart import Decision, State


        class Ctx(BaseModel):
            amount: int = 0
            approved: bool = False


        async def triage(ctx: Ctx) -> Decision:
            if ctx.amount > 100:
                return Decision("review", reason="over the auto-approve limit")
            return Decision("pay", patch={"approved": True})


        state = State("triage", kind="code", handler=triage, writes=("approved",))
        ```
    """

    target: str
    """The state to go to: a name in the same chart, with an edge from the code state."""
    patch: Mapping[str, Any] = field(default_factory=dict)
    """Context fields to write; each must be in the state's `writes`."""
    reason: str = ""
    """Why, written into the transition's event."""


Handler = Callable[[Any], Awaitable[Decision | str]]
"""An async function of the typed context returning a `Decision` or a target name."""
ResumeHook = Callable[[Any], Awaitable[Mapping[str, Any]]]
Port = Mapping[str, str] | Callable[[Any], Any]
"""How a sub-chart's own context meets its parent's: a mapping of field names (`input`:
child field <- parent field; `output`: parent field <- child field) or a function
(`input`: typed parent context -> child context; `output`: typed child context -> a
patch of parent fields, as a mapping or a parent-type model whose set fields count)."""
"""An async refresh run on resume: takes the typed context, returns a patch."""


@dataclass(frozen=True)
class Edge:
    """A legal move `source -> target` within one chart, optionally guarded and capped.

    `escalated` needs no edge: every non-terminal state may go there.

    Example:
        ```python
        from statechart import Edge, Facts


        def has_answer(facts: Facts) -> str | None:
            return None if facts.context.answer else "write an answer first"


        edges = (
            Edge("research", "review", guard=has_answer),
            Edge("review", "research", max_traversals=2),  # two rounds of revision at most
            Edge("review", "done"),
        )
        ```
    """

    source: str
    """Name of the state the move leaves, in this chart."""
    target: str
    """Name of the state the move enters, in this chart."""
    guard: Guard | None = None
    """Allows or refuses the move from structured facts."""
    max_traversals: int | None = None
    """How many times a run may take this edge; caps cycles through it."""
    after: float | timedelta | None = None
    """Take this edge when `source` has been active this long (seconds or a `timedelta`):
    a durable timer, taken only when it fires (never chosen by a model or a handler)."""

    def __post_init__(self) -> None:
        if self.after is not None:
            seconds = (
                self.after.total_seconds() if isinstance(self.after, timedelta) else self.after
            )
            where = f"edge {self.source}->{self.target}"
            object.__setattr__(self, "after", positive_seconds(where, seconds, what="after"))

    @property
    def label(self) -> str:
        """`source->target`, used in counters and error messages."""
        return f"{self.source}->{self.target}"


@dataclass(frozen=True)
class State:
    """A named phase of a chart. Its `kind` says who decides the way out.

    - ``model``: a capped ReAct loop; the model picks among `tools` and `next_state`.
    - ``code``: the async `handler` returns a `Decision`.
    - ``chart``: hosts the sub-chart built by `chart`; `exits` maps its terminals here.
    - ``parallel``: runs its `regions` (chart states) at once; once they have joined
      (`join`), it leaves by `exits["done"]`; a region that fails routes it to
      `on_region_failure`.
    - ``map``: runs the sub-chart `chart` once per item of the context list `over`, each
      on a context of its own (the item in its field `item`), `max_concurrency` at once;
      `output` gathers each instance's field into a list, in item order.
    - ``approval``: waits for a human; `approve` goes to `on_approve`, `reject` to `on_reject`.
    - ``terminal``: the run (or the sub-chart) ends here; `outcome="failure"` marks a failure.

    A model state with no `max_iterations` gets 10.

    Example:
        ```python
        from pydantic import BaseModel

        from statechart import Decision, State


        class Ctx(BaseModel):
            amount: int = 0


        async def triage(ctx: Ctx) -> Decision:
            return Decision("review" if ctx.amount > 100 else "pay")


        states = (
            State("triage", kind="code", handler=triage),
            State("review", kind="approval", on_approve="pay", on_reject="failed"),
            State("pay", instructions="Pay the refund.", reads=("amount",)),
            State("done", kind="terminal"),
            State("failed", kind="terminal", outcome="failure"),
        )
        assert states[2].max_iterations == 10
        ```
    """

    name: str
    """Unique in its chart: letters, digits, `_` or `-`, starting with a letter."""
    kind: StateKind = "model"
    """Who decides the way out: `model`, `code`, `chart`, `approval` or `terminal`."""
    instructions: str = ""
    """What the model is told in this state."""
    tools: tuple[Tool, ...] = ()
    """What the model may call here besides `next_state` (built with `tool`)."""
    reads: tuple[str, ...] = ()
    """Context fields the state sees."""
    writes: tuple[str, ...] = ()
    """Context fields the state may change (typed arguments of `next_state`)."""
    handler: Handler | None = None
    """For `kind="code"`: async, takes the typed context, returns a `Decision` or a target."""
    chart: Callable[[], Chart] | None = None
    """Factory of the sub-chart, for `kind="chart"`."""
    exits: Mapping[str, str] = field(default_factory=dict)
    """Sub-chart terminal -> target in this chart (`escalated` and `exhausted` have defaults)."""
    max_iterations: int | None = None
    """Model calls per visit (the last one offers only `next_state`); default 10."""
    max_visits: int | None = None
    """Entries into this state per run; caps the cycles through it."""
    max_calls: Mapping[str, int] = field(default_factory=dict)
    """Per-tool call caps per visit, e.g. `{"search_kb": 3}`."""
    budget: Budget | None = None
    """Caps for this state, summed over all its visits; spent, it goes to `on_exhausted`."""
    on_exhausted: str = ESCALATED
    """Where the state goes when its budget or iteration cap runs out."""
    on_approve: str | None = None
    """For `kind="approval"`: the state `approve()` moves the run to."""
    on_reject: str | None = None
    """For `kind="approval"`: the state `reject()` moves the run to."""
    on_resume: ResumeHook | None = None
    """Refreshes the context from the world when a stored run resumes here."""
    max_tokens: int | None = None
    """Output-token cap asked of the model per call (lowered further by budgets)."""
    outcome: Outcome = "success"
    """For a terminal: whether ending here is a failure (the CLI exits 4, as for an
    escalated or exhausted run). The implicit `escalated` and `exhausted` are failures."""
    input: Port | None = None
    """For `kind="chart"`: the sub-chart runs on a context of its own type, filled from
    the parent's on entry (see `Port`). Without `input`/`output` it shares the parent's."""
    output: Port | None = None
    """For `kind="chart"`: what the sub-chart writes back to the parent when it leaves
    through a terminal, as one validated write (see `Port`)."""
    call_timeout: float | None = None
    """Seconds one model call (a model state) or one handler call (a code state) may run;
    past them it fails with `CallTimeoutError`. None takes the chart's `call_timeout`."""
    retries: Retry | None = None
    """For `kind="model"`: how a failed model call is tried again (`Retry`); without it a
    failed model call escalates at once."""
    history: History | None = None
    """For `kind="chart"`: re-entered after an interruption (an `after=` edge leaving it,
    an outer budget's route), the sub-chart resumes where it was, not at its initial
    state: `"shallow"` at its state that was active, `"deep"` at the innermost one
    (through nested sub-charts). A sub-chart that ended starts over."""
    regions: tuple[State, ...] = ()
    """For `kind="parallel"`: the regions run at once, each a `kind="chart"` state (its
    sub-chart, and `input=`/`output=` ports when it runs on a context of its own)."""
    join: Join = "all"
    """For `kind="parallel"`: `all` leaves once every region ended in a terminal of
    success; `first` once one did, the others cancelled (recorded on the join's event)."""
    on_region_failure: str = ESCALATED
    """For `kind="parallel"` (or `map`): where the state goes once a region ends in a failure
    terminal (`escalated`, `exhausted`, or one with `outcome="failure"`), the others
    cancelled; every region's output (what it holds so far) is written back either way."""
    over: str | None = None
    """For `kind="map"`: the context field (a list) whose items the sub-chart runs over."""
    item: str | None = None
    """For `kind="map"`: the field of the sub-chart's own context that each item fills
    (`input=` may fill others from the parent's context)."""
    max_concurrency: int | None = None
    """For `kind="map"`: instances running at once (None: every item at once)."""
    max_items: int = 50
    """For `kind="map"`: the most items `over` may hold (an instance per item is compiled
    ahead; a longer list refuses the move into the state)."""

    @property
    def ported(self) -> bool:
        """A chart state whose sub-chart runs on a context of its own."""
        return self.kind == "chart" and (self.input is not None or self.output is not None)

    def __post_init__(self) -> None:
        for name in ("tools", "reads", "writes", "regions"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        if self.kind == "model" and self.max_iterations is None:
            object.__setattr__(self, "max_iterations", DEFAULT_MAX_ITERATIONS)
        if self.call_timeout is not None:
            seconds = positive_seconds(f"state '{self.name}'", self.call_timeout)
            object.__setattr__(self, "call_timeout", seconds)
        if self.kind == "map" and not self.regions and isinstance(self.max_items, int):
            object.__setattr__(self, "regions", self.instances())

    def instances(self) -> tuple[State, ...]:
        """For `kind="map"`: the regions that run the sub-chart, one per possible item."""
        port = self.input if self.input is not None else {}
        return tuple(
            State(str(i), kind="chart", chart=self.chart, input=port)
            for i in range(max(self.max_items, 0))
        )

    @cached_property
    def tool_map(self) -> dict[str, Tool]:
        """Tools by name (read-only: computed once)."""
        return {t.name: t for t in self.tools}


@dataclass(frozen=True)
class Chart:
    """An agent's definition: states and the edges between them, validated when built.

    The `escalated` and `exhausted` terminals are implicit; a chart run as the root
    needs `budget=Budget(max_steps=...)`.

    Example:
        ```python
        from statechart import Budget, Chart, Edge, State

        chart = Chart(
            "hello",
            states=(State("greet", instructions="Greet, then finish."),
                    State("done", kind="terminal")),
            edges=(Edge("greet", "done"),),
            budget=Budget(max_steps=5),
        )
        assert chart.initial == "greet"
        assert [s.name for s in chart.states] == ["greet", "done", "escalated", "exhausted"]
        ```
    """

    name: str
    """Names the chart in runs, traces and error messages."""
    states: tuple[State, ...]
    """Its states; the implicit `escalated` and `exhausted` terminals are added."""
    edges: tuple[Edge, ...] = ()
    """The legal moves between its states."""
    initial: str | None = None
    """The first state; defaults to the first one listed."""
    context: type[BaseModel] = EmptyContext
    """The pydantic model of the run's context; a sub-chart's names the fields it uses."""
    budget: Budget | None = None
    """Caps for the whole chart; the root's must set `max_steps` (checked when it runs)."""
    on_exhausted: str = ESCALATED
    """Where the root chart goes when its budget runs out (must be terminal)."""
    call_timeout: float | None = None
    """Seconds any model, tool or handler call in this chart (its sub-charts included) may
    run, unless the state or tool sets its own; past them the call fails."""
    _compiled: Any = field(default=None, init=False, repr=False, compare=False)
    """The engine's compiled form, filled by `statechart.engine.compiled(chart)`."""

    def __post_init__(self) -> None:
        states = tuple(self.states)
        object.__setattr__(self, "edges", tuple(self.edges))
        object.__setattr__(self, "states", complete_states(states))
        if self.initial is None and states:
            object.__setattr__(self, "initial", states[0].name)
        if self.call_timeout is not None:
            seconds = positive_seconds(f"chart '{self.name}'", self.call_timeout)
            object.__setattr__(self, "call_timeout", seconds)
        validate(self)

    @cached_property
    def state_map(self) -> dict[str, State]:
        """States by name."""
        return {s.name: s for s in self.states}

    @cached_property
    def children(self) -> dict[str, Chart]:
        """The sub-chart of every chart state, built once from its factory."""
        out: dict[str, Chart] = {}
        for s in self.states:
            if s.kind == "chart" and s.chart is not None:
                out[s.name] = s.chart()
            if s.kind == "map" and callable(s.chart):
                one = s.chart()  # every instance runs the same (immutable) sub-chart
                out.update({f"{s.name}.{r.name}": one for r in s.regions})
                continue
            for r in s.regions if s.kind == "parallel" else ():
                if r.kind == "chart" and r.chart is not None and callable(r.chart):
                    out[f"{s.name}.{r.name}"] = r.chart()
        return out

    def replace_state(
        self, name: str, state: State, *, exits: Mapping[str, str] | None = None
    ) -> Chart:
        """A new chart with `state` (named `name`) in place of state `name`; edges into it
        stay. Made `kind="chart"`, it leaves only by `exits` (`{"done": "draft"}`), which
        must cover the targets of its old edges (its self-edge is dropped)."""
        from statechart.chart import derive

        return derive.replace_state(self, name, state, exits=exits, edge=Edge)

    def with_states(self, *states: State, edges: tuple[Edge, ...] = ()) -> Chart:
        """A new chart with `states` added, and the `edges` that reach them."""
        from statechart.chart import derive

        return derive.with_states(self, states, edges)

    def with_edges(self, *edges: Edge) -> Chart:
        """A new chart with `edges` added; one with an existing `source->target` replaces it."""
        from statechart.chart import derive

        return derive.with_edges(self, edges)

    def without_edges(self, *labels: str) -> Chart:
        """A new chart without the edges named `"source->target"`."""
        from statechart.chart import derive

        return derive.without_edges(self, labels)

    def with_tools(self, name: str, *tools: Tool) -> Chart:
        """A new chart whose state `name` offers exactly `tools` (caps of dropped tools go)."""
        from statechart.chart import derive

        return derive.with_tools(self, name, tools)

    def with_budget(self, budget: Budget | None) -> Chart:
        """A new chart with `budget` as the whole chart's budget."""
        from statechart.chart import derive

        return derive.with_budget(self, budget)

    def with_name(self, name: str) -> Chart:
        """A new chart with another name (runs and traces show it)."""
        from statechart.chart import derive

        return derive.with_name(self, name)

    @cached_property
    def version(self) -> str:
        """A stable hash of the structure: states, kinds, tools, edges, caps, nested charts."""
        return hashlib.sha256(self.describe().encode()).hexdigest()[:16]

    def describe(self) -> str:
        """A canonical text of the structure (what `version` hashes)."""
        return self._description

    @cached_property
    def _description(self) -> str:
        # Built once: the chart is immutable, and `start` stores it with every new run.
        context = _schema_text(self.context)
        lines = [
            f"chart {self.name} initial={self.initial} budget={self.budget} "
            f"exhausted={self.on_exhausted} context={context}"
        ]
        for s in self.states:
            tools = ",".join(
                f"{t.name}:{t.retry}:{t.needs_approval}:{t.repeatable}:"
                f"{json.dumps(t.schema, sort_keys=True)}"
                for t in s.tools
            )
            lines.append(
                f"state {s.name} {s.kind} tools=[{tools}] reads={s.reads} writes={s.writes} "
                f"iter={s.max_iterations} visits={s.max_visits} "
                f"calls={sorted(s.max_calls.items())} "
                f"budget={s.budget} exhausted={s.on_exhausted} exits={sorted(s.exits.items())} "
                f"approve={s.on_approve} reject={s.on_reject} resume={s.on_resume is not None}"
                + (f" input={_port(s.input)} output={_port(s.output)}" if s.ported else "")
                + (f" history={s.history}" if s.history is not None else "")
                + (f" join={s.join} failure={s.on_region_failure}" if s.regions else "")
                + (
                    f" over={s.over} item={s.item} concurrency={s.max_concurrency} "
                    f"items={s.max_items} input={_port(s.input)} output={_port(s.output)}"
                    if s.kind == "map"
                    else ""
                )
            )
            if s.name in self.children:
                lines.append("{" + self.children[s.name].describe() + "}")
            if s.kind == "map" and f"{s.name}.0" in self.children:
                lines.append("{" + self.children[f"{s.name}.0"].describe() + "}")
                continue
            for r in s.regions:
                key = f"{s.name}.{r.name}"
                ports = f" input={_port(r.input)} output={_port(r.output)}" if r.ported else ""
                lines.append(f"region {key} budget={r.budget}{ports}")
                if key in self.children:
                    lines.append("{" + self.children[key].describe() + "}")
        for e in self.edges:
            timer = f" after={e.after:g}" if e.after is not None else ""
            lines.append(
                f"edge {e.label} guard={e.guard is not None} max={e.max_traversals}{timer}"
            )
        return "\n".join(lines)


@lru_cache(maxsize=1024)
def _schema_text(context: type[BaseModel]) -> str:
    """A context type's JSON schema as canonical text, once per type (every chart built on
    the same type describes it alike; generating the schema is most of a chart's version)."""
    return json.dumps(context.model_json_schema(), sort_keys=True)


def _port(port: Port | None) -> str:
    if port is None or isinstance(port, Mapping):
        return str(sorted((port or {}).items()))
    return f"{getattr(port, '__module__', '?')}.{getattr(port, '__qualname__', repr(port))}"


def complete_states(states: tuple[State, ...]) -> tuple[State, ...]:
    """Add the implicit `escalated` and `exhausted` terminals the user did not write."""
    names = {s.name for s in states}
    extra = tuple(
        State(name, kind="terminal", outcome="failure") for name in IMPLICIT if name not in names
    )
    return states + extra


from statechart.chart.validate import validate  # noqa: E402  (validate reads the types above)
