"""OpenTelemetry for runs: one trace per run; a span per drive and per state visit, and
exactly one per transition, with the GenAI attribute names.

Only the OpenTelemetry API is used by the framework; without a configured SDK every
span is a no-op and nothing is exported. `configure()` and `configure_from_environment()`
(the one module that touches the SDK) set up export, the latter from the standard
`OTEL_*` variables as every `statechart` command that records a transition does.
"""

from typing import Any

from statechart.tracing import content, facts
from statechart.tracing.attributes import (
    ACTOR,
    BUDGET,
    CAPTURE_CONTENT_ENV,
    ERROR_TYPE,
    EXHAUSTED,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GUARD_REFUSED,
    INPUT,
    MODEL,
    RUN_ID,
    SCHEMA_URL,
    SEMCONV_VERSION,
    SOURCE,
    STATE,
    STEP,
    TARGET,
    TRIGGER,
)
from statechart.tracing.facts import annotate, failed, transition_attributes
from statechart.tracing.setup import configure, configure_from_environment
from statechart.tracing.spans import (
    RunTrace,
    ending,
    human_transition,
    run_trace_context,
    stored,
    tracer,
)


def __getattr__(name: str) -> Any:
    if name == "capture_content":  # set by `configure(content=...)`: read it live
        return facts.capture_content
    raise AttributeError(f"module 'statechart.tracing' has no attribute '{name}'")


__all__ = [
    "ACTOR",
    "BUDGET",
    "CAPTURE_CONTENT_ENV",
    "ERROR_TYPE",
    "EXHAUSTED",
    "GEN_AI_AGENT_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GUARD_REFUSED",
    "INPUT",
    "MODEL",
    "RUN_ID",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "SOURCE",
    "STATE",
    "STEP",
    "TARGET",
    "TRIGGER",
    "RunTrace",
    "annotate",
    "configure",
    "configure_from_environment",
    "content",
    "ending",
    "failed",
    "human_transition",
    "run_trace_context",
    "stored",
    "tracer",
    "transition_attributes",
]
