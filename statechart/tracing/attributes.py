"""Span attribute names: the OpenTelemetry GenAI ones (defined here, since the PyPI
semconv package marks them deprecated) and the `statechart.*` transition facts."""

SEMCONV_VERSION = "1.41.1"
"""The OpenTelemetry semantic conventions followed: the last release holding the GenAI
conventions (later ones moved them to their own repository, unreleased when written)."""
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# OpenTelemetry GenAI semantic conventions (defined here: the semconv package marks
# the GenAI names experimental and deprecates them between releases).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
"""Seconds from the request to the first chunk of a streamed reply (GenAI conventions,
development status)."""
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

# Framework facts.
RUN_ID = "statechart.run.id"
MODEL = "statechart.model"
"""The full model spec a drive uses (`provider:model`); `gen_ai.request.model` is its model."""
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
"""Prefix. On a transition span, per budget kind: `statechart.budget.<kind>.left` (the
least left over the levels around its source) and `.level` (that level's path, `root`
for the chart); on the span of a state that is a budget level (the drive's span for
`root`), when it ends: that level's `.cap`, `.spent` and `.left` per kind."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
