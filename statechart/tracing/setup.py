"""`configure()` and `configure_from_environment()`: the only code of the package that
touches the OpenTelemetry SDK."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace

from statechart.errors import TracingConfigError
from statechart.tracing import facts

_OTLP_EXTRA = "pip install 'statechart-agents[otlp]'"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_GRPC_PACKAGE = "opentelemetry-exporter-otlp-proto-grpc"


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
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    if content is not None:
        facts.capture_content = content
    chosen = None
    if exporter == "otlp":
        chosen = _otlp("http/protobuf")
    elif exporter == "console":
        chosen = _exporter("console")
    elif exporter != "none":
        raise ValueError(f"exporter={exporter!r}; use 'otlp', 'console' or 'none'")
    provider = _provider(service_name or os.environ.get("OTEL_SERVICE_NAME") or "statechart")
    if chosen is not None:
        if batch:
            _batched(provider, [chosen])
        else:
            provider.add_span_processor(SimpleSpanProcessor(chosen))
    trace.set_tracer_provider(provider)
    return provider


def configure_from_environment(default_service: str = "statechart") -> Any | None:
    """Set up the SDK from the standard `OTEL_*` variables, as `opentelemetry-instrument`
    users expect, and return the provider (`shutdown()` it at exit to flush); None when
    there is nothing to do.

    Nothing is done when `OTEL_SDK_DISABLED=true`, when the application installed its own
    tracer provider, or when no exporter is asked for: an exporter is set up only when
    `OTEL_TRACES_EXPORTER` (`otlp`, `console`, `none`, comma-separated) or an endpoint
    variable is set, so a service name alone exports nothing. OTLP goes over
    `http/protobuf` unless `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` says `grpc`. The
    sampler (`OTEL_TRACES_SAMPLER`), service name and resource attributes come from their
    variables; the service name defaults to `default_service`.

    Raises:
        TracingConfigError: An exporter or protocol that cannot be set up here (its package
            missing, or a name the SDK does not know).
    """
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # the application's own provider (or opentelemetry-instrument's)
    asked = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    names = [n.strip() for n in asked.split(",") if n.strip()]
    if not names and any(env.get(name, "").strip() for name in _ENDPOINTS):
        names = ["otlp"]
    if "none" in names or not names:
        return None
    exporters = [_exporter(name) for name in names]
    provider = _provider(default_service)
    _batched(provider, exporters)
    trace.set_tracer_provider(provider)
    return provider


def _provider(service: str) -> Any:
    """A tracer provider whose resource comes from the `OTEL_*` variables (sampler too),
    named `service` unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names it."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    return TracerProvider(resource=resource)


def _batched(provider: Any, exporters: list[Any]) -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))


def _exporter(name: str) -> Any:
    """The span exporter `OTEL_TRACES_EXPORTER` names."""
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            protocol = os.environ.get(variable, "").strip().lower()
            if protocol:
                return _otlp(protocol, f"{variable}={protocol}")
        return _otlp("http/protobuf", "OTEL_TRACES_EXPORTER=otlp")
    if name in ("otlp_proto_http", "otlp_proto_grpc"):
        protocol = "grpc" if name.endswith("grpc") else "http/protobuf"
        return _otlp(protocol, f"OTEL_TRACES_EXPORTER={name}")
    raise TracingConfigError(
        f"OTEL_TRACES_EXPORTER names {name!r}, which statechart cannot set up; "
        "use otlp, console or none"
    )


def _otlp(protocol: str, asked: str = "exporter='otlp'") -> Any:
    """The OTLP span exporter for `protocol`, reading the `OTEL_EXPORTER_OTLP_*` variables;
    `asked` says which setting chose it, for the error when it cannot be set up."""
    if protocol == "http/protobuf":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingConfigError(
                f"{asked} needs OTLP/HTTP export, which needs the otlp extra: {_OTLP_EXTRA}"
            ) from None
        return OTLPSpanExporter()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError:
            raise TracingConfigError(
                f"{asked} needs {_GRPC_PACKAGE} (pip install {_GRPC_PACKAGE}), or use "
                "http/protobuf (Jaeger and collectors take it on port 4318)"
            ) from None
        return GrpcSpanExporter()
    raise TracingConfigError(f"{asked} is not a supported protocol; use http/protobuf or grpc")
