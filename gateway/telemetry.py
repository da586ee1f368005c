"""OpenTelemetry: a trace per request, a CLIENT span per upstream attempt, GenAI metrics.

Off unless an OTLP endpoint is configured (``[telemetry] otlp_endpoint`` or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); then ``GatewayState.telemetry``
is a ``Telemetry`` and the relay makes one ``RequestTrace`` per request. Off, it is ``None``: the hot
path checks that one value and makes no SDK call, so tracing off costs nothing.

Shape (OpenTelemetry semantic conventions v1.41.0, the last release carrying the GenAI conventions
in the main repository; see README "Telemetry"):

* a SERVER span ``POST /v1/messages`` per request, child of the caller's W3C ``traceparent`` when it
  sent one, with the gateway's own attributes under ``gateway.*``;
* one CLIENT span ``{gen_ai.operation.name} {gen_ai.request.model}`` per upstream attempt (each retry
  and each fallback its own span; failed ones carry ``error.type``), with the GenAI attributes. A
  failed attempt's span ends when it fails; the one that answered ends with the request, once usage
  and finish reasons are known.

Never in the way: spans leave through a ``BatchSpanProcessor`` (its own thread) behind a bounded
queue; what cannot be queued or exported is counted in ``gateway_telemetry_dropped_spans_total``
instead of waiting. Shutdown flushes for at most ``shutdown_seconds``. The caller's key, upstream
keys and provider error messages are never put on a span; prompts and completions only with
``capture_content = true`` (``gateway/telemetry_content.py``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gateway.events import MessageStart
from gateway.reply import Reply, ReplyBuilder

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from gateway.errors import GatewayError
    from gateway.events import Event
    from gateway.ir import ChatRequest
    from gateway.observe import AccessRecord
    from gateway.router import Resolved, Target
    from gateway.settings import Settings
    from gateway.upstream import Provider

log = logging.getLogger("gateway.telemetry")

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# gen_ai.operation.name and gen_ai.provider.name by upstream dialect: data, not branches.
OPERATION = {
    "anthropic": "chat",
    "openai-chat": "chat",
    "openai-responses": "chat",
    "gemini": "generate_content",
    "gemini-interactions": "chat",
    "demo": "chat",
}
DIALECT_PROVIDER = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "gcp.gemini",
    "gemini-interactions": "gcp.gemini",
    "demo": "gateway.demo",
}
# A provider reached through another's wire format is named by its host (the conventions' values).
HOST_PROVIDER = (
    ("openai.azure.com", "azure.ai.openai"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("amazonaws.com", "aws.bedrock"),
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("cohere.com", "cohere"),
)
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
SECONDS_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
# AccessRecord usage fields -> span attributes (cache_creation: v1.41's name for a cache write)
USAGE_ATTRIBUTES = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)


def provider_attributes(provider: Provider) -> dict[str, Any]:
    """``gen_ai.provider.name``, ``server.address``, ``server.port`` of a configured provider."""
    settings = provider.settings
    attrs: dict[str, Any] = {"gen_ai.provider.name": DIALECT_PROVIDER.get(settings.dialect, settings.dialect)}
    if settings.base_url:
        parts = urlsplit(settings.base_url)
        host = parts.hostname or ""
        attrs["server.address"] = host
        attrs["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        for suffix, name in HOST_PROVIDER:
            if host.endswith(suffix):
                attrs["gen_ai.provider.name"] = name
                break
    return attrs


class Telemetry:
    """The tracer and GenAI instruments of one process; ``start`` makes a request's trace."""

    def __init__(
        self, tracer_provider: Any, meter_provider: Any = None, *, capture_content: bool = False, shutdown_seconds: float = 5.0, guard: Any = None
    ) -> None:
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context

        self.tracer_provider, self.meter_provider = tracer_provider, meter_provider
        self.tracer = tracer_provider.get_tracer("llm-gateway", "0.1.0", schema_url=SCHEMA_URL)
        self.capture_content = capture_content
        self.shutdown_seconds = shutdown_seconds
        self.guard = guard  # BoundedBatchProcessor when exporting over OTLP (drop counts, pending)
        self._extract = propagate.extract
        self._in_context = set_span_in_context
        self.SERVER, self.CLIENT, self.ERROR = SpanKind.SERVER, SpanKind.CLIENT, StatusCode.ERROR
        self._providers: dict[str, dict[str, Any]] = {}
        self.duration = self.tokens = self.ttfc = None
        if meter_provider is not None:
            meter = meter_provider.get_meter("llm-gateway", "0.1.0", schema_url=SCHEMA_URL)
            self.duration = meter.create_histogram(
                "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration", explicit_bucket_boundaries_advisory=SECONDS_BUCKETS
            )
            self.tokens = meter.create_histogram(
                "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used", explicit_bucket_boundaries_advisory=TOKEN_BUCKETS
            )
            self.ttfc = meter.create_histogram(
                "gen_ai.client.operation.time_to_first_chunk", unit="s", description="Time to receive the first chunk of a streamed answer",
                explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
            )

    def provider(self, provider: Provider) -> dict[str, Any]:
        attrs = self._providers.get(provider.name)
        if attrs is None:
            attrs = self._providers[provider.name] = provider_attributes(provider)
        return attrs

    def start(self, scope: dict[str, Any], headers: dict[str, str], dialect: str, record: AccessRecord) -> RequestTrace:
        """The request's SERVER span, continuing the caller's ``traceparent`` / ``tracestate``."""
        route = getattr(scope.get("route"), "path", None) or scope["path"]
        method = scope.get("method", "POST")
        parent = self._extract(headers)
        span = self.tracer.start_span(
            f"{method} {route}",
            context=parent,
            kind=self.SERVER,
            attributes={
                "http.request.method": method,
                "http.route": route,
                "url.path": scope["path"],
                "url.scheme": scope.get("scheme", "http"),
                "gateway.caller.dialect": dialect,
                "gateway.request_id": record.request_id,
            },
        )
        record.trace_id = format(span.get_span_context().trace_id, "032x")
        return RequestTrace(self, span)

    def shutdown(self) -> None:
        """Flush what is queued, for at most ``shutdown_seconds``, then give up (counted as dropped)."""

        def run(shutdown: Any) -> None:
            try:
                shutdown()
            except Exception:  # an exporter bug must not turn a clean shutdown into a crash
                log.exception("telemetry shutdown failed")

        jobs = [self.tracer_provider.shutdown]
        if self.meter_provider is not None:
            jobs.append(lambda: self.meter_provider.shutdown(timeout_millis=self.shutdown_seconds * 1000))
        workers = [threading.Thread(target=run, args=(job,), name="gateway-telemetry-shutdown", daemon=True) for job in jobs]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + self.shutdown_seconds
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if workers[0].is_alive() and self.guard is not None:
            lost = self.guard.give_up()
            log.warning("telemetry: the collector did not take the last spans within %gs; %d dropped", self.shutdown_seconds, lost)


class RequestTrace:
    """One request's spans. The relay calls ``request`` once parsed, ``attempt_*`` around each
    upstream attempt (from attempts.py) and ``finish`` once, with the finished access record."""

    __slots__ = ("tel", "span", "context", "attempt", "attempt_started", "attempt_attrs", "streamed", "content", "output", "reply", "detached", "number")

    def __init__(self, tel: Telemetry, span: Any) -> None:
        self.tel, self.span = tel, span
        self.context = tel._in_context(span)
        self.attempt: Any = None  # the open CLIENT span of the attempt that answered
        self.attempt_started = 0.0
        self.attempt_attrs: dict[str, Any] = {}
        self.streamed = False
        self.content: dict[str, str] | None = None  # request content attributes (capture_content)
        self.output: ReplyBuilder | None = None  # folds a streamed answer (capture_content)
        self.reply: Reply | None = None  # a whole answer (capture_content)
        self.detached = False
        self.number = 0

    def request(self, req: ChatRequest, resolved: Resolved) -> None:
        self.span.set_attributes({"gateway.request.model": req.model, "gateway.route": resolved.route, "gateway.stream": req.stream})
        if self.tel.capture_content and self.span.is_recording():
            from gateway.telemetry_content import request_content

            self.content = request_content(req)
            self.output = ReplyBuilder() if req.stream else None

    def attempt_started_for(self, provider: Provider, target: Target, req: ChatRequest, fallback: int, streamed: bool) -> Any:
        """A CLIENT span for one upstream attempt, child of the request's span."""
        tel = self.tel
        self.number += 1
        operation = OPERATION.get(provider.dialect, "chat")
        attrs: dict[str, Any] = {"gen_ai.operation.name": operation, **tel.provider(provider), "gen_ai.request.model": target.upstream_model}
        self.attempt_attrs = dict(attrs)  # the metric attributes (low cardinality)
        attrs["gateway.provider"] = provider.name
        attrs["gateway.attempt"] = self.number
        attrs["gateway.fallback"] = fallback
        if req.max_tokens is not None:
            attrs["gen_ai.request.max_tokens"] = req.max_tokens
        if req.temperature is not None:
            attrs["gen_ai.request.temperature"] = req.temperature
        if req.top_p is not None:
            attrs["gen_ai.request.top_p"] = req.top_p
        if req.top_k is not None:
            attrs["gen_ai.request.top_k"] = float(req.top_k)
        if req.stop:
            attrs["gen_ai.request.stop_sequences"] = list(req.stop)
        if self.content is not None:
            attrs.update(self.content)
        self.streamed = streamed
        self.attempt_started = time.perf_counter()
        return tel.tracer.start_span(f"{operation} {target.upstream_model}", context=self.context, kind=tel.CLIENT, attributes=attrs)

    def attempt_failed(self, span: Any, err: GatewayError | None, kind: str = "") -> None:
        """End a failed attempt's span: ``error.type`` is the gateway's error kind (low cardinality),
        never the provider's message (it may quote a key)."""
        kind = err.kind if err is not None else kind or "_OTHER"
        attrs: dict[str, Any] = {"error.type": kind}
        if err is not None and err.status:
            attrs["http.response.status_code"] = err.status
        span.set_attributes(attrs)
        span.set_status(self.tel.ERROR, f"{kind} (HTTP {err.status})" if err is not None else kind)
        span.end()
        tel = self.tel
        if tel.duration is not None:
            tel.duration.record(time.perf_counter() - self.attempt_started, {**self.attempt_attrs, "error.type": kind})

    def attempt_opened(self, span: Any, first: list[Event]) -> None:
        """The attempt answered: keep its span open until the request ends; note the first chunk."""
        self.attempt = span
        attrs: dict[str, Any] = {}
        for event in first:
            if type(event) is MessageStart:
                if event.id:
                    attrs["gen_ai.response.id"] = event.id
                if event.model:
                    attrs["gen_ai.response.model"] = event.model
                break
        if self.streamed:
            ttfc = time.perf_counter() - self.attempt_started
            attrs["gen_ai.response.time_to_first_chunk"] = ttfc
            if self.tel.ttfc is not None:
                self.tel.ttfc.record(ttfc, self.attempt_attrs)
        if "gen_ai.response.model" in attrs:
            self.attempt_attrs["gen_ai.response.model"] = attrs["gen_ai.response.model"]
        span.set_attributes(attrs)

    def finish(self, record: AccessRecord) -> None:
        try:
            self._finish(record)
        except Exception:  # telemetry must never break a request
            log.exception("telemetry: could not finish the trace of %s", record.request_id)

    def _finish(self, record: AccessRecord) -> None:
        tel = self.tel
        error = record.error_kind
        attempt = self.attempt
        if attempt is not None:
            attrs: dict[str, Any] = {}
            for field_name, key in USAGE_ATTRIBUTES:
                value = getattr(record, field_name)
                if value is not None:
                    attrs[key] = value
            reason = record.raw_stop_reason or record.stop_reason
            if reason:
                attrs["gen_ai.response.finish_reasons"] = [reason]
            if self.detached:
                attrs["gateway.detached"] = True  # the generation goes on in a task; usage is not on this span
            if self.content is not None:
                from gateway.telemetry_content import output_content

                reply = self.reply if self.reply is not None else (self.output.reply if self.output is not None else None)
                if reply is not None:
                    attrs.update(output_content(reply))
            if error:
                attrs["error.type"] = error
                attempt.set_status(tel.ERROR, error)
            attempt.set_attributes(attrs)
            attempt.end()
            metric_attrs = self.attempt_attrs if not error else {**self.attempt_attrs, "error.type": error}
            if tel.duration is not None:
                tel.duration.record(time.perf_counter() - self.attempt_started, metric_attrs)
                for kind, value in (("input", record.input_tokens), ("output", record.output_tokens)):
                    if value is not None:
                        tel.tokens.record(value, {**metric_attrs, "gen_ai.token.type": kind})  # type: ignore[union-attr]
        span = self.span
        attrs = {"http.response.status_code": record.status, "gateway.attempts": len(record.attempts)}
        if record.provider:
            attrs["gateway.provider"] = record.provider
        if record.stop_reason:
            attrs["gateway.stop_reason"] = record.stop_reason
        # h16 (keys/ledger) adds AccessRecord.key (the key's name, never the secret) and .cost_usd:
        # they go here as "gateway.key" and "gateway.cost_usd" once they exist.
        if error:
            attrs["error.type"] = error
            if record.status >= 500 or record.status == 200:  # a server failure, or a stream that failed after its 200
                span.set_status(tel.ERROR, error)
        span.set_attributes(attrs)
        span.end()


def endpoints(settings: Settings) -> tuple[str | None, str | None, bool, bool]:
    """(traces URL, metrics URL, traces on, metrics on). A ``None`` URL on means the exporter reads
    the standard ``OTEL_EXPORTER_OTLP_*`` variables itself (they append ``/v1/traces`` to a base)."""
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None, None, False, False
    base = settings.telemetry.otlp_endpoint
    if base:
        base = base.rstrip("/")
        traces_on = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
        metrics_on = env.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none"
        return base + "/v1/traces", base + "/v1/metrics", traces_on, metrics_on
    traces_on = bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    traces_on = traces_on and env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
    metrics_on = bool(env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    metrics_on = traces_on and metrics_on and env.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none"
    return None, None, traces_on, metrics_on


def telemetry_from_settings(settings: Settings, registry: CollectorRegistry) -> Telemetry | None:
    """The process's telemetry, or ``None`` (off) when no endpoint is set or the SDK is missing."""
    traces_url, metrics_url, traces_on, metrics_on = endpoints(settings)
    if not traces_on:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        log.error("telemetry: an OTLP endpoint is set but the OpenTelemetry SDK is not installed; "
                  "install the extra (pip install 'llm-gateway[otel]'). Running without telemetry.")
        return None
    from gateway.telemetry_export import BoundedBatchProcessor

    cfg = settings.telemetry
    env = os.environ
    attrs: dict[str, Any] = {"service.version": "0.1.0"}
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attrs["service.name"] = cfg.service_name
    resource = Resource.create(attrs)  # merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    guard = BoundedBatchProcessor(OTLPSpanExporter(endpoint=traces_url), registry, cfg.shutdown_seconds)
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # sampler: OTEL_TRACES_SAMPLER
    tracer_provider.add_span_processor(guard)
    meter_provider = None
    if metrics_on:
        reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=metrics_url))  # interval: OTEL_METRIC_EXPORT_INTERVAL
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    log.info("telemetry: exporting OTLP/HTTP traces%s (capture_content=%s)", " and metrics" if meter_provider else "", cfg.capture_content)
    return Telemetry(tracer_provider, meter_provider, capture_content=cfg.capture_content, shutdown_seconds=cfg.shutdown_seconds, guard=guard)
