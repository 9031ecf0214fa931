"""Span attribute names: the OpenTelemetry GenAI ones (defined here, since the PyPI
semconv package marks them deprecated) and the `statechart.*` transition facts."""

# OpenTelemetry GenAI semantic conventions (defined here: the semconv package marks
# the GenAI names experimental and deprecates them between releases).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

# Framework facts.
RUN_ID = "statechart.run.id"
STATE = "statechart.state"
SOURCE = "statechart.source"
TARGET = "statechart.target"
TRIGGER = "statechart.trigger"
ACTOR = "statechart.actor"
STEP = "statechart.step"
GUARD_REFUSED = "statechart.guard.refused"
EXHAUSTED = "statechart.budget.exhausted"
INPUT = "statechart.input"
"""A ported sub-chart's first context (JSON), on its `state` span, with content capture on."""
BUDGET = "statechart.budget"
"""Prefix: `statechart.budget.<level>.<kind>.spent` and `.left` (`root` is the chart)."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
