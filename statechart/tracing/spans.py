"""OpenTelemetry spans for runs: one trace per run; a span per drive and per state visit,
and exactly one per transition (its model call's `chat` span, its tool call's
`execute_tool` span, or a `transition` span), with the GenAI attribute names.

Only the OpenTelemetry API is used here; without a configured SDK every span is a
no-op and nothing is exported (`tracing.setup` is the one place that touches the SDK).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import Token
from typing import Any

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, TraceFlags

from statechart.chart.names import ROOT
from statechart.chart.tools import canonical_json
from statechart.engine import CallModel, CompiledChart, Effect, Reconciled, RunTool
from statechart.errors import ConflictError
from statechart.records.messages import Reply, Request
from statechart.records.run import Run, Step
from statechart.tracing import content, facts
from statechart.tracing.attributes import (
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    INPUT,
    MODEL,
    RUN_ID,
    SCHEMA_URL,
    STATE,
    STEP,
)

_TRACER = "statechart"


def tracer() -> trace.Tracer:
    """The package's tracer, stamped with the semantic conventions version it follows."""
    return trace.get_tracer(_TRACER, schema_url=SCHEMA_URL)


def run_trace_context(chart_name: str, run_id: str) -> tuple[dict[str, str], Span | None]:
    """The trace a new run belongs to: the caller's current span, or a fresh
    `create_agent` span (returned open: end it once the run is stored); kept in the run
    so every process continues the same trace."""
    current = trace.get_current_span().get_span_context()
    span = None
    if not current.is_valid:
        span = tracer().start_span(
            f"create_agent {chart_name}",
            attributes={
                GEN_AI_OPERATION_NAME: "create_agent",
                GEN_AI_AGENT_NAME: chart_name,
                RUN_ID: run_id,
            },
        )
        current = span.get_span_context()
    if not current.is_valid:
        return {}, span
    flags = int(current.trace_flags)
    return ({"traceparent": f"00-{current.trace_id:032x}-{current.span_id:016x}-{flags:02x}"}, span)


def provider_and_model(spec: str) -> tuple[str, str]:
    """`gen_ai.provider.name` and `gen_ai.request.model` of a model spec: `openai:gpt-4o`
    is (`openai`, `gpt-4o`); a spec with no provider names both."""
    provider, colon, name = spec.partition(":")
    if not colon:
        return spec, spec
    return provider or spec, name or spec


def _parent(run: Run) -> Context | None:
    found = run.trace.get("traceparent", "").split("-")
    if len(found) != 4:
        return None
    try:
        ctx = SpanContext(
            int(found[1], 16),
            int(found[2], 16),
            is_remote=True,
            trace_flags=TraceFlags(int(found[3], 16)),
        )
    except ValueError:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(ctx))


class RunTrace:
    """The open spans of one drive: the agent span and a span per active state visit."""

    def __init__(
        self, compiled_chart: CompiledChart, run: Run, model: str, last_span: str | None = None
    ) -> None:
        self.compiled_chart = compiled_chart
        self.model = model
        self.tracer = tracer()
        provider, name = provider_and_model(model)
        self.chat_name = f"chat {name}"
        self.chat_attributes = {
            GEN_AI_OPERATION_NAME: "chat",
            GEN_AI_REQUEST_MODEL: name,
            GEN_AI_PROVIDER_NAME: provider,
            GEN_AI_CONVERSATION_ID: run.run_id,
        }
        links = []
        parent = _parent(run)
        if last_span and parent is not None:
            ctx = trace.get_current_span(parent).get_span_context()
            links.append(
                Link(
                    SpanContext(
                        ctx.trace_id,
                        int(last_span, 16),
                        is_remote=True,
                        trace_flags=ctx.trace_flags,
                    ),
                    {"statechart.link": "last transition before this drive"},
                )
            )
        caller = trace.get_current_span().get_span_context()
        if caller.is_valid and (
            parent is None
            or caller.trace_id != trace.get_current_span(parent).get_span_context().trace_id
        ):
            links.append(Link(caller, {"statechart.link": "the caller's span"}))
        self.root = self.tracer.start_span(
            f"invoke_agent {compiled_chart.chart.name}",
            context=parent,
            links=links,
            attributes={
                GEN_AI_OPERATION_NAME: "invoke_agent",
                GEN_AI_AGENT_NAME: compiled_chart.chart.name,
                GEN_AI_AGENT_ID: run.run_id,
                GEN_AI_CONVERSATION_ID: run.run_id,
                GEN_AI_PROVIDER_NAME: provider,
                GEN_AI_REQUEST_MODEL: name,
                MODEL: model,
                RUN_ID: run.run_id,
                STATE: run.state,
            },
        )
        self.on = self.root.is_recording()
        self.states: dict[str, Span] = {}
        self._token: Token[Context] | None = None
        self._span: Span | None = None
        """The open span of the transition under way (one per transition)."""
        self._began = 0
        """When the transition under way started (ns since the epoch), 0 between them."""
        self._span_id = ""
        """The hex id of `_span`, as its transition's event records it."""
        self._unnamed = False
        """`_span` is a `transition` span still waiting for its target to be named."""
        self._pending: dict[str, Any] | None = None
        """What the effect returned, to set on the span with the transition's facts."""
        self._contexts: dict[str, Context] = {}
        """Per leaf state: the context of the innermost open state span around it."""

    def lane(self) -> RunTrace:
        """This trace as one region of a parallel state uses it: the same agent and state
        spans, its own transition under way (the regions make theirs at once)."""
        other = copy.copy(self)  # shares `states` and `_contexts`: one tree of spans
        other._token, other._span, other._pending = None, None, None
        other._began, other._span_id, other._unnamed = 0, "", False
        return other

    # -- the driver's hooks (runtime.hooks.StepHooks) -------------------------------------

    def before_step(self, *, run: Run) -> None:
        """Open a span for every user state active at `run.state` that has none; the
        transition's span will start now."""
        if run.state not in self._contexts:
            self.enter(run)
        self._began = time.time_ns()

    def effect_started(self, *, run: Run, effect: Effect) -> str | None:
        """Open the transition's span, and return its id for the event: its effect's
        (`chat {model}` or `execute_tool {tool}`, made current), or for a handler or a
        decision a `transition` span named once its target is known (the state's span is
        made current for a handler)."""
        kind = type(effect)
        if kind is CallModel:
            assert isinstance(effect, CallModel)
            span = self.effect_start(run, request=effect.request)
        elif kind is RunTool:
            assert isinstance(effect, RunTool)
            span = self.effect_start(run, effect.tool.name, effect.call.id, effect.arguments)
        else:
            span = self.effect_start(run, handler=True)
        self._span = span
        if span is None:
            return None
        self._span_id = format(span.get_span_context().span_id, "016x")
        return self._span_id

    def first_chunk(self, seconds: float) -> None:
        """Time to the first chunk of a streamed reply, on the `chat` span."""
        if self._span is not None:
            self._span.set_attribute(GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, seconds)

    def effect_ended(self, *, outcome: Any) -> None:
        """Keep what came back for the span; a step cut off (cancelled) ends it here."""
        self.effect_end(self._span, outcome)
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            self._span, self._unnamed = None, False

    def after_step(self, *, before: Run, record: Step, started_ns: int) -> Step:
        """Describe the transition on its span (opened now for a record made outside a
        step); the record to store carries the span's id."""
        opened = self._span is None
        span = self._span = self.transition(before, record, self._began or started_ns, self._span)
        self._began = 0
        if span is None:
            return record
        if opened:
            self._span_id = format(span.get_span_context().span_id, "016x")
        if record.event.span != self._span_id:
            return record.with_span(self._span_id)
        return record

    def step_stored(self, *, record: Step, error: BaseException | None = None) -> None:
        """End the transition's span: with its `statechart.step` once its event is stored,
        as an error without one when the store refused it."""
        span, self._span = self._span, None
        self.transition_end(span, record, stored=error is None, error=error)

    # -- state visits -------------------------------------------------------------------

    def enter(self, run: Run) -> None:
        """Open a span for every user state active at `run.state` that has none, and keep
        the innermost one's context: spans of this state's transitions are its children."""
        if not self.on or run.state not in self.compiled_chart.nodes:  # a run about to be migrated
            return
        parent = self.root
        for path in reversed(self.compiled_chart.ancestors(run.state)):
            if self.compiled_chart.nodes[path].state is None:
                continue
            span = self.states.get(path)
            if span is None:
                attributes: dict[str, Any] = {
                    STATE: path,
                    RUN_ID: run.run_id,
                    "statechart.visit": run.visits.get(path, 0),
                }
                if facts.capture_content and path in run.contexts:  # a ported sub-chart
                    attributes[INPUT] = content.clipped(canonical_json(run.contexts[path]))
                span = self.states[path] = self.tracer.start_span(
                    f"state {path}",
                    context=trace.set_span_in_context(parent),
                    attributes=attributes,
                )
            parent = span
        self._contexts[run.state] = trace.set_span_in_context(parent)

    def _context_of(self, leaf: str) -> Context:
        """The context whose span is the innermost open state span around `leaf`."""
        found = self._contexts.get(leaf)
        if found is not None:
            return found
        span = self.root
        if leaf in self.compiled_chart.nodes:
            for path in self.compiled_chart.ancestors(leaf):
                if path in self.states:
                    span = self.states[path]
                    break
        return trace.set_span_in_context(span)

    # -- effects --------------------------------------------------------------------------

    def effect_start(
        self,
        run: Run,
        tool: str | None = None,
        call_id: str = "",
        arguments: Any = None,
        *,
        request: Request | None = None,
        handler: bool = False,
    ) -> Span | None:
        """The transition's span as a `chat {model}` span (no `tool`) or an
        `execute_tool {tool}` span, made current so spans of instrumented clients inside
        the call nest under it; for a code state's `handler` or a decision, a `transition`
        span, with the state's span made current (a handler's own spans are the state's)."""
        if not self.on:
            return None
        parent = self._context_of(run.state)
        began = self._began or None
        if handler:  # named once its target is known (`transition`)
            self._token = context_api.attach(parent)
            self._unnamed = True
            return self.tracer.start_span(
                f"transition {run.state}", context=parent, start_time=began
            )
        if tool is None:
            attributes = self.chat_attributes
            if facts.capture_content and request is not None:
                attributes = {**attributes, **content.request_attributes(request)}
            span = self.tracer.start_span(
                self.chat_name,
                context=parent,
                kind=trace.SpanKind.CLIENT,
                attributes=attributes,
                start_time=began,
            )
        else:
            attributes = {
                GEN_AI_OPERATION_NAME: "execute_tool",
                GEN_AI_TOOL_NAME: tool,
                GEN_AI_TOOL_CALL_ID: call_id,
                GEN_AI_TOOL_TYPE: "function",
            }
            if facts.capture_content:
                attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = content.clipped(canonical_json(arguments))
            span = self.tracer.start_span(
                f"execute_tool {tool}", context=parent, attributes=attributes, start_time=began
            )
        self._token = context_api.attach(trace.set_span_in_context(span))
        return span

    def effect_end(self, span: Span | None, outcome: Any) -> None:
        """Keep what came back for the transition's span (usage, the result), set with the
        transition's facts in one call; an error goes on at once, and a cancellation ends
        the span (its transition will not be made)."""
        if self._token is not None:
            context_api.detach(self._token)
            self._token = None
        if span is None:
            return
        if type(outcome) is Reply:
            usage = outcome.usage
            found = {
                GEN_AI_RESPONSE_MODEL: outcome.model or self.chat_attributes[GEN_AI_REQUEST_MODEL],
                GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
                GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
                GEN_AI_RESPONSE_FINISH_REASONS: (content.finish_reason(outcome),),
            }
            if facts.capture_content:
                found.update(content.reply_attributes(outcome))
            self._pending = found
            return
        if isinstance(outcome, Reconciled):
            outcome = outcome.failed if outcome.failed is not None else outcome.value
        if isinstance(outcome, BaseException):
            facts.failed(span, outcome)
            if not isinstance(outcome, Exception):  # cut off: no transition follows
                span.end()
        elif facts.capture_content and outcome is not None and not self._unnamed:
            result = outcome if isinstance(outcome, str) else canonical_json(outcome)
            self._pending = {GEN_AI_TOOL_CALL_RESULT: content.clipped(result)}

    # -- transitions ----------------------------------------------------------------------

    def transition(
        self, before: Run, record: Step, start_ns: int, span: Span | None = None
    ) -> Span | None:
        """Describe a transition that started at `start_ns` on `span` (its effect's), or on
        a `transition {source} -> {target}` span opened now when it had no effect; the span
        stays open until the event is stored (`transition_end`)."""
        if not self.on:
            return None
        attributes = facts.transition_attributes(self.compiled_chart, record)
        if self._pending is not None:
            attributes.update(self._pending)
            self._pending = None
        if span is None:
            e = record.event
            span = self.tracer.start_span(
                f"transition {e.source} -> {e.target}",
                start_time=start_ns,
                context=self._context_of(before.state),
                attributes=attributes,
            )
        else:
            span.set_attributes(attributes)
            if self._unnamed:
                span.update_name(f"transition {record.event.source} -> {record.event.target}")
                self._unnamed = False
        facts.annotate(span, record)
        return span

    def transition_end(
        self,
        span: Span | None,
        record: Step,
        *,
        stored: bool = True,
        error: BaseException | None = None,
    ) -> None:
        """End the transition span; close the spans of the states it exited, each with its
        own budget level's figures. A transition that was not stored ends as an error."""
        if span is None:
            return
        if stored:
            span.set_attribute(STEP, record.event.seq)
        else:
            facts.failed(span, error or ConflictError("another writer appended first"))
        span.end()
        if not stored:
            return
        e = record.event
        exited = e.exited
        if e.trigger == "migrate":  # states the migrated run is no longer in
            exited = tuple(p for p in self.states if p not in self._around(record.run.state))
        for path in exited:
            state_span = self.states.pop(path, None)
            if state_span is not None:
                self._contexts.clear()  # the open state spans changed
                self._end_state(state_span, path, record.run)

    def _around(self, leaf: str) -> tuple[str, ...]:
        nodes = self.compiled_chart.nodes
        return self.compiled_chart.ancestors(leaf) if leaf in nodes else ()

    def _end_state(self, span: Span, path: str, run: Run | None) -> None:
        level = self.compiled_chart.levels.get(path)
        if level is not None and run is not None:
            span.set_attributes(facts.level_attributes(level, run))
        span.end()

    def close(self, run: Run | None, error: BaseException | None = None) -> None:
        """End every open span (innermost first) and the agent span."""
        if not self.on:
            self.root.end()
            return
        if self._span is not None:  # a transition made but never stored or refused
            if error is not None:
                facts.failed(self._span, error)
            self._span.end()
            self._span = None
        for path in sorted(self.states, key=len, reverse=True):
            self._end_state(self.states.pop(path), path, run)
        if run is not None:
            self.root.set_attributes({STATE: run.state, "statechart.status": run.status})
            self.root.set_attributes(facts.level_attributes(self.compiled_chart.levels[ROOT], run))
        if error is not None:
            facts.failed(self.root, error)
        self.root.end()


def human_transition(compiled_chart: CompiledChart, record: Step, start_ns: int) -> Span | None:
    """The span of a human decision, in the run's trace (under the run's first span)."""
    e = record.event
    attributes = facts.transition_attributes(compiled_chart, record)
    span = tracer().start_span(
        f"transition {e.source} -> {e.target}",
        start_time=start_ns,
        context=_parent(record.run),
        attributes=attributes,
    )
    if not span.is_recording():
        span.end()
        return None
    facts.annotate(span, record)
    return span


def stored(span: Span | None, record: Step) -> None:
    """Mark `span` as its transition's, now that the event is stored (`statechart.step`)."""
    if span is not None:
        span.set_attribute(STEP, record.event.seq)


@contextmanager
def ending(span: Span | None) -> Iterator[None]:
    """End `span` (if tracing is on) after the block, marked failed if the block raised."""
    try:
        yield
    except BaseException as exc:
        if span is not None:
            facts.failed(span, exc)
        raise
    finally:
        if span is not None:
            span.end()
