"""OpenTelemetry traces of a request through retrieval, formation, embeddings and LLM calls (optional).

Off unless OpenTelemetry is installed (``pip install 'memsys[tracing]'``) and told where to send spans by its own
environment variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, or ``OTEL_TRACES_EXPORTER``; ``OTEL_SERVICE_NAME``
names the service, ``memsys`` by default): then ``configure`` installs a tracer provider that exports over OTLP/HTTP,
the HTTP app gets Litestar's OpenTelemetry middleware (a span per request, W3C ``traceparent`` honoured), and the
spans below nest under it. A host process that installed a tracer provider of its own (a test, an embedding
application) gets the same spans into it. Without OpenTelemetry every ``span`` is a no-op.

Spans: ``memsys.retrieval.search`` (mode, memory type, top_k, rows), ``memsys.embedding`` (texts, role),
``memsys.formation.stream`` (the stream, memories formed), ``memsys.llm.chat`` (model and token counts, with the
attribute names of OpenTelemetry's GenAI conventions). No message text, query or memory content is put in a span.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

EXPORT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        pass


@functools.cache
def _tracer():
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("memsys")


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span (a child of the current one), with the attributes that are not None."""
    tracer = _tracer()
    if tracer is None:
        yield _NoSpan()
        return
    with tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None}) as s:
        yield s


def exporting() -> bool:
    """Whether OpenTelemetry's environment asks for spans to be sent somewhere."""
    return any(os.environ.get(name) for name in EXPORT_VARIABLES) and os.environ.get("OTEL_TRACES_EXPORTER") != "none"


def configure() -> bool:
    """Install an OTLP/HTTP exporting tracer provider when the environment asks for one; whether traces are on
    (also when the host process installed a provider of its own). Asked for without the packages: a one-line
    start-up error (app.startup_errors) naming the extra to install."""
    if not exporting():
        return _host_provider()
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        from app.errors import ConfigurationError

        raise ConfigurationError(
            f"OpenTelemetry export is asked for ({', '.join(n for n in EXPORT_VARIABLES if os.environ.get(n))}) but "
            f"its packages are missing ({exc.name}): pip install 'memsys[tracing]'"
        ) from exc
    if not _host_provider():
        provider = TracerProvider(
            resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "memsys")})
        )
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        log.info("tracing: spans exported over OTLP/HTTP")
    return True


def _host_provider() -> bool:
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return False
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def litestar_plugins() -> list:
    """Litestar's OpenTelemetry plugin (a span per request) when traces are on and its middleware is installed."""
    if not configure():
        return []
    try:
        from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin
    except ImportError:  # opentelemetry-instrumentation-asgi missing: spans without a request span
        return []
    return [OpenTelemetryPlugin(OpenTelemetryConfig(exclude=["/health", "/metrics"]))]
