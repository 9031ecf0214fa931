"""`configure()`: the only code of the package that touches the OpenTelemetry SDK."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace

from statechart.tracing import facts


def configure(
    service_name: str | None = None,
    *,
    exporter: str = "otlp",
    batch: bool = True,
    content: bool | None = None,
) -> Any:
    """Install an SDK tracer provider exporting spans, and return it (call `shutdown()` on
    it at exit to flush). `exporter="otlp"` sends OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`
    (or `..._TRACES_ENDPOINT`; default http://localhost:4318), with the other standard
    `OTEL_EXPORTER_OTLP_*` variables; `"console"` prints spans; `"none"` records without
    exporting. The service name defaults to `OTEL_SERVICE_NAME`, else "statechart". An
    application with its own provider needs none of this."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
        SpanExporter,
    )

    if content is not None:
        facts.capture_content = content
    name = service_name or os.environ.get("OTEL_SERVICE_NAME") or "statechart"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    chosen: SpanExporter | None = None
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ImportError(
                "OTLP export needs the otlp extra: pip install 'statechart[otlp]'"
            ) from None
        chosen = OTLPSpanExporter()
    elif exporter == "console":
        chosen = ConsoleSpanExporter()
    elif exporter != "none":
        raise ValueError(f"exporter={exporter!r}; use 'otlp', 'console' or 'none'")
    if chosen is not None:
        provider.add_span_processor(
            BatchSpanProcessor(chosen) if batch else SimpleSpanProcessor(chosen)
        )
    trace.set_tracer_provider(provider)
    return provider
