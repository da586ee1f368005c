"""OpenTelemetry: a trace per request, a CLIENT span per upstream attempt, GenAI metrics.

Off unless an OTLP endpoint is configured (``[telemetry] otlp_endpoint`` or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); then ``GatewayState.telemetry``
is a ``Telemetry`` and the relay makes one ``RequestTrace`` per request. Off, it is ``None``: the hot
path checks that one value and makes no SDK call, so tracing off costs nothing.

Shape (OpenTelemetry semantic conventions v1.41.0, the last release carrying the GenAI conventions
in the main repository; see docs/telemetry.md):

* a SERVER span ``POST /v1/messages`` per request, child of the caller's W3C ``traceparent`` when it
  sent one, with the gateway's own attributes under ``gateway.*``;
* one CLIENT span ``{gen_ai.operation.name} {gen_ai.request.model}`` per upstream attempt (each retry
  and each fallback its own span; failed ones carry ``error.type``), with the GenAI attributes. A
  failed attempt's span ends when it fails; the one that answered ends with the request, once usage
  and finish reasons are known. All of a request's spans are handed to the exporter when it ends
  (why: ``Telemetry``).

Module map: this one (a request's trace), ``spans.py`` (its spans as plain data, their shared bases), ``setup.py``
(turning it on), ``export.py`` (the bounded batcher), ``otlp_wire.py`` (the OTLP bytes), ``metrics.py``
(GenAI histograms), ``content.py`` (opt-in content).

Never in the way: spans leave through the gateway's batcher (``gateway/telemetry/export.py``: its own
thread, which writes the OTLP bytes) behind a bounded queue; what cannot be queued or exported is
counted in ``gateway_telemetry_dropped_spans_total`` instead of waiting. Shutdown flushes for at most ``shutdown_seconds``. The caller's key, upstream
keys and provider error messages are never put on a span; prompts and completions only with
``capture_content = true`` (``gateway/telemetry/content.py``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from random import getrandbits
from time import time_ns
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gateway.events import MessageStart
from gateway.reply import Reply, ReplyBuilder
from gateway.telemetry.spans import BASES_MAX, CLIENT, SERVER, Base, PlainSpan

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.errors import GatewayError
    from gateway.events import Event
    from gateway.ir import ChatRequest
    from gateway.routing.router import Resolved, Target
    from gateway.telemetry.metrics import GenAIMetrics
    from gateway.telemetry.observe import AccessRecord
    from gateway.upstream.providers import Provider

log = logging.getLogger("gateway.telemetry")

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

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
DURATION = "gen_ai.client.operation.duration"  # the instruments of gateway/telemetry/metrics.py
TOKENS = "gen_ai.client.token.usage"
TTFC = "gen_ai.client.operation.time_to_first_chunk"
# AccessRecord input, output, cache read, cache write, reasoning tokens -> span attributes
# (cache_creation is v1.41's name for a cache write; the standalone GenAI v0.1.0 says cache_write)
USAGE_ATTRIBUTES = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
)


def provider_attributes(provider: Provider) -> dict[str, Any]:
    """``gen_ai.provider.name``, ``server.address``, ``server.port`` of a configured provider."""
    settings = provider.settings
    attrs: dict[str, Any] = {
        "gen_ai.provider.name": provider.identity.otel_provider
    }  # the codec's (gateway/dialects/base.py)
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


W3C_PROPAGATORS = {"tracecontext,baggage", "baggage,tracecontext", "tracecontext"}
_HEX = frozenset("0123456789abcdef")


def parse_traceparent(value: str) -> tuple[int, int, int] | None:
    """(trace id, parent span id, flags) of a W3C ``traceparent``, or None when it is not valid
    (then the trace starts here, as the W3C recommendation says)."""
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff" or (parts[0] == "00" and len(parts) != 4):
        return None
    version, trace_id, span_id, flags = parts[0], parts[1], parts[2], parts[3]
    if (
        len(trace_id) != 32
        or len(span_id) != 16
        or len(flags) != 2
        or not _HEX.issuperset(version + trace_id + span_id + flags)
    ):
        return None
    trace, span = int(trace_id, 16), int(span_id, 16)
    if not trace or not span:
        return None
    return trace, span, int(flags, 16)


class Telemetry:
    """The span processor, sampler and GenAI metrics of one process; ``start`` makes a request's trace.

    Spans are not made with ``Tracer.start_span``: measured in ``bench/telemetry.py``, an SDK span costs
    ~45 µs on the bench VM before its first attribute (locks, attribute cleaning per call, a context
    per span), so a request's two spans alone would be twice the per-request budget. A request's spans
    are instead described as plain data while it runs (ids, nanosecond timestamps, attribute dicts the
    gateway builds from values it already has). When the request ends the SDK's sampler
    (``OTEL_TRACES_SAMPLER``) decides for the whole trace, and the spans are addressed and handed, as
    they are, to the gateway's batcher (``submit``), whose export thread writes their OTLP bytes: making
    the SDK's ``ReadableSpan``s (with their ``SpanContext``s and ``Status``) on the loop was a large part
    of what was left of tracing's cost per request (bench/README.md, "third pass"). Any other span processor
    (the SDK's, in tests) is handed the ``ReadableSpan``s a ``Tracer`` would have produced (``emit``).
    """

    def __init__(
        self,
        processor: Any,
        metrics: GenAIMetrics | None = None,
        *,
        resource: Any = None,
        sampler: Any = None,
        capture_content: bool = False,
        shutdown_seconds: float = 5.0,
        guard: Any = None,
    ) -> None:
        from opentelemetry import propagate
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
            TraceState,
            get_current_span,
            set_span_in_context,
        )

        self.processor, self.metrics = processor, metrics
        self.resource = resource if resource is not None else Resource.create({})
        self.sampler = (
            sampler if sampler is not None else TracerProvider(shutdown_on_exit=False).sampler
        )  # OTEL_TRACES_SAMPLER
        # the SDK's default (parentbased_always_on) samples every trace without a parent: skip the call
        self.always_root = sampler is None and not os.environ.get("OTEL_TRACES_SAMPLER")
        self.scope = InstrumentationScope("llm-gateway", "0.1.0", SCHEMA_URL)
        self.capture_content = capture_content
        self.shutdown_seconds = shutdown_seconds
        self.guard = guard  # BoundedBatchProcessor when exporting over OTLP (drop counts, pending)
        self._extract = propagate.extract
        self._current_span = get_current_span
        self._in_context, self.NonRecordingSpan, self.TraceState, self.TraceFlags = (
            set_span_in_context,
            NonRecordingSpan,
            TraceState,
            TraceFlags,
        )
        # the default propagators (W3C trace context + baggage): traceparent is read here, in ~1 µs
        # (the SDK's regex-based extractor takes ~17 µs on the bench VM); others go through the SDK
        self.w3c_only = os.environ.get("OTEL_PROPAGATORS", "tracecontext,baggage").replace(" ", "") in W3C_PROPAGATORS
        self.ReadableSpan, self.SpanContext, self.Status = ReadableSpan, SpanContext, Status
        self.SERVER, self.CLIENT, self.ERROR = SpanKind.SERVER, SpanKind.CLIENT, StatusCode.ERROR
        self.SAMPLED = TraceFlags(TraceFlags.SAMPLED)
        self.OK_STATUS = Status(StatusCode.UNSET)
        # the gateway's batcher takes a request's plain spans as they are (BoundedBatchProcessor.submit);
        # any other span processor (an SDK one, in tests) is handed ReadableSpans (emit)
        self.submit: Callable[[list[PlainSpan]], None] | None = getattr(processor, "submit", None)
        self._providers: dict[str, dict[str, Any]] = {}
        self._bases: dict[tuple[str, ...], Base] = {}
        # (an attempt's base, its response model, error.type) -> the GenAI metrics' series handles
        self._series: dict[tuple[Base, str | None, str | None], tuple[list[Any], ...]] = {}

    def provider(self, provider: Provider) -> dict[str, Any]:
        attrs = self._providers.get(provider.name)
        if attrs is None:
            attrs = self._providers[provider.name] = provider_attributes(provider)
        return attrs

    def attempt_base(self, provider: Provider, model: str, operation: str | None = None) -> Base:
        """The attributes an attempt's span shares with every attempt at ``model`` on ``provider``
        (``operation``: the provider's own, ``chat`` / ``generate_content``, unless given)."""
        key = (provider.name, model, operation or "")
        base = self._bases.get(key)
        if base is None:
            operation = operation or provider.identity.otel_operation
            labels = {"gen_ai.operation.name": operation, **self.provider(provider), "gen_ai.request.model": model}
            attributes = {**labels, "gateway.provider": provider.name}
            base = Base(attributes, tuple(labels.items()), f"{operation} {model}")
            if len(self._bases) < BASES_MAX:
                self._bases[key] = base
        return base

    def _server_base(self, method: str, route: str, path: str, scheme: str, dialect: str) -> Base:
        key = (method, route, path, scheme, dialect)
        base = self._bases.get(key)
        if base is None:
            attributes = {
                "http.request.method": method,
                "http.route": route,
                "url.path": path,
                "url.scheme": scheme,
                "gateway.caller.dialect": dialect,
            }
            base = Base(attributes, name=f"{method} {route}")
            if len(self._bases) < BASES_MAX:  # a route with an id in its path: one per request, not kept
                self._bases[key] = base
        return base

    def start(self, scope: dict[str, Any], headers: dict[str, str], dialect: str, record: AccessRecord) -> RequestTrace:
        """The request's SERVER span, continuing the caller's ``traceparent`` / ``tracestate``."""
        route = getattr(scope.get("route"), "path", None) or scope["path"]
        method = scope.get("method", "POST")
        parent = None
        trace_state = None
        if "traceparent" in headers:
            if self.w3c_only:
                ids = parse_traceparent(headers["traceparent"])
                if ids is not None:
                    parent = self.SpanContext(ids[0], ids[1], True, self.TraceFlags(ids[2]))
                    trace_state = headers.get("tracestate")  # parsed when the trace is exported
            else:
                parent = self._current_span(self._extract(headers)).get_span_context()
                if not parent.is_valid:
                    parent = None
        base = self._server_base(method, route, scope["path"], scope.get("scheme", "http"), dialect)
        span = PlainSpan(base.name, {"gateway.request_id": record.request_id}, base)
        trace = RequestTrace(self, span, parent, trace_state)
        record.trace_id = format(trace.trace_id, "032x")
        return trace

    def emit(self, trace_id: int, span: PlainSpan, kind: Any, parent: Any, trace_state: Any) -> None:
        status = self.Status(self.ERROR, span.error) if span.error is not None else self.OK_STATUS
        context = self.SpanContext(trace_id, span.span_id, False, self.SAMPLED, trace_state)
        self.processor.on_end(
            self.ReadableSpan(
                span.name,
                context,
                parent,
                self.resource,
                span.all_attributes(),
                kind=kind,
                status=status,
                start_time=span.start_ns,
                end_time=span.end_ns,
                instrumentation_scope=self.scope,
            )
        )

    def readable(self, span: PlainSpan) -> Any:
        """An addressed plain span as the SDK's ``ReadableSpan``, for an exporter other than the
        gateway's OTLP one (made on the export thread)."""
        state = span.trace_state
        if type(state) is str:
            state = self.TraceState.from_header([state])
        context = self.SpanContext(span.trace_id, span.span_id, False, self.SAMPLED, state)
        parent = (
            self.SpanContext(span.trace_id, span.parent_id, span.remote, self.SAMPLED, state)
            if span.parent_id
            else None
        )
        status = self.Status(self.ERROR, span.error) if span.error is not None else self.OK_STATUS
        return self.ReadableSpan(
            span.name,
            context,
            parent,
            self.resource,
            span.all_attributes(),
            kind=self.SERVER if span.kind == SERVER else self.CLIENT,
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self.scope,
        )

    def shutdown(self) -> None:
        """Flush what is queued, for at most ``shutdown_seconds``, then give up (counted as dropped)."""

        def run(shutdown: Any) -> None:
            try:
                shutdown()
            except Exception:  # an exporter bug must not turn a clean shutdown into a crash
                log.exception("telemetry shutdown failed")

        jobs = [self.processor.shutdown]
        if self.metrics is not None:
            jobs.append(lambda: self.metrics.shutdown(self.shutdown_seconds * 1000))
        workers = [
            threading.Thread(target=run, args=(job,), name="gateway-telemetry-shutdown", daemon=True) for job in jobs
        ]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + self.shutdown_seconds
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if workers[0].is_alive() and self.guard is not None:
            lost = self.guard.give_up()
            log.warning(
                "telemetry: the collector did not take the last spans within %gs; %d dropped",
                self.shutdown_seconds,
                lost,
            )


class RequestTrace:
    """One request's spans. The relay calls ``request`` once parsed, ``attempt_*`` around each
    upstream attempt (from attempts.py) and ``finish`` once, with the finished access record."""

    __slots__ = (
        "tel",
        "span",
        "trace_id",
        "parent",
        "raw_trace_state",
        "attempts",
        "attempt",
        "attempt_started",
        "attempt_base",
        "response_model",
        "streamed",
        "content",
        "output",
        "reply",
        "detached",
        "ttfc",
    )

    def __init__(self, tel: Telemetry, span: PlainSpan, parent: Any, raw_trace_state: str | None) -> None:
        self.tel, self.span = tel, span
        self.parent, self.raw_trace_state = parent, raw_trace_state  # the caller's span, if it sent one
        self.trace_id: int = parent.trace_id if parent is not None else (getrandbits(128) or 1)
        self.attempts: list[PlainSpan] = []
        self.attempt: PlainSpan | None = None  # the attempt that answered: ends with the request
        self.attempt_started = 0.0
        self.attempt_base: Base | None = None  # the latest attempt's: its metric attributes (low cardinality)
        self.response_model: str | None = None
        self.streamed = False
        self.content: dict[str, str] | None = None  # request content attributes (capture_content)
        self.output: ReplyBuilder | None = None  # folds a streamed answer (capture_content)
        self.reply: Reply | None = None  # a whole answer (capture_content)
        self.detached = False
        self.ttfc: float | None = None  # seconds to the answering attempt's first chunk (streamed)

    def request(self, req: ChatRequest, resolved: Resolved) -> None:
        span = self.span
        assert span.base is not None
        span.base = span.base.extended(
            (("gateway.request.model", req.model), ("gateway.route", resolved.route), ("gateway.stream", req.stream))
        )
        if self.tel.capture_content:
            from gateway.telemetry.content import request_content

            self.content = request_content(req)
            self.output = ReplyBuilder() if req.stream else None

    def attempt_started_for(
        self, provider: Provider, target: Target, req: ChatRequest, fallback: int, streamed: bool
    ) -> PlainSpan:
        """A CLIENT span for one upstream attempt, child of the request's span."""
        base = self.attempt_base = self.tel.attempt_base(provider, target.upstream_model)
        self.response_model = None
        shared: tuple[tuple[str, Any], ...] = (
            ("gateway.attempt", len(self.attempts) + 1),
            ("gateway.fallback", fallback),
        )
        if req.max_tokens is not None:
            shared += (("gen_ai.request.max_tokens", req.max_tokens),)
        attrs: dict[str, Any] = {}  # floats stay the span's own (0.0 == -0.0: one shared base would write either)
        if req.temperature is not None:
            attrs["gen_ai.request.temperature"] = req.temperature
        if req.top_p is not None:
            attrs["gen_ai.request.top_p"] = req.top_p
        if req.top_k is not None:
            attrs["gen_ai.request.top_k"] = float(req.top_k)
        if req.stop:
            attrs["gen_ai.request.stop_sequences"] = tuple(req.stop)
        if self.content is not None:
            attrs.update(self.content)
        self.streamed = streamed
        self.attempt_started = time.perf_counter()
        span = PlainSpan(base.name, attrs, base.extended(shared))
        self.attempts.append(span)
        return span

    def child(self, name: str, attributes: dict[str, Any]) -> PlainSpan:
        """A CLIENT span under the request's, started now and ended by the caller (``end_ns``):
        an MCP ``execute_tool`` call (gateway/mcp/access.py). Emitted with the request's span."""
        span = PlainSpan(name, attributes)
        self.attempts.append(span)
        return span

    def embeddings_attempt(
        self, provider: Provider, target: Target, fallback: int, dimensions: int | None
    ) -> PlainSpan:
        """A CLIENT span ``embeddings {model}`` for one embeddings attempt (gateway/relay/embeddings.py);
        it ends as a chat attempt's does (``attempt_failed`` / ``attempt_opened`` then ``finish``)."""
        base = self.attempt_base = self.tel.attempt_base(provider, target.upstream_model, "embeddings")
        self.response_model = None
        attrs: dict[str, Any] = {"gateway.attempt": len(self.attempts) + 1, "gateway.fallback": fallback}
        if dimensions is not None:
            attrs["gen_ai.embeddings.dimension.count"] = dimensions
        self.streamed = False
        self.attempt_started = time.perf_counter()
        span = PlainSpan(base.name, attrs, base)
        self.attempts.append(span)
        return span

    def attempt_failed(self, span: PlainSpan, err: GatewayError | None, kind: str = "") -> None:
        """End a failed attempt's span: ``error.type`` is the gateway's error kind (low cardinality),
        never the provider's message (it may quote a key)."""
        span.end_ns = time_ns()
        kind = err.kind if err is not None else kind or "_OTHER"
        span.attributes["error.type"] = kind
        if err is not None and err.status:
            span.attributes["http.response.status_code"] = err.status
        span.error = f"{kind} (HTTP {err.status})" if err is not None else kind
        metrics = self.tel.metrics
        if metrics is not None:
            metrics.observe(((self._series(kind)[0], time.perf_counter() - self.attempt_started),))

    def attempt_opened(self, span: PlainSpan, first: list[Event]) -> None:
        """The attempt answered: its span stays open until the request ends; note the first chunk."""
        self.attempt = span
        attrs = span.attributes
        for event in first:
            if type(event) is MessageStart:
                if event.id:
                    attrs["gen_ai.response.id"] = event.id
                if event.model:
                    attrs["gen_ai.response.model"] = self.response_model = event.model
                break
        if self.streamed:
            self.ttfc = attrs["gen_ai.response.time_to_first_chunk"] = time.perf_counter() - self.attempt_started

    def finish(self, record: AccessRecord) -> None:
        try:
            self._finish(record)
        except Exception:  # telemetry must never break a request
            log.exception("telemetry: could not finish the trace of %s", record.request_id)

    def _finish(self, record: AccessRecord) -> None:
        tel = self.tel
        error = record.error_kind
        now = time_ns()
        attempt = self.attempt
        if attempt is not None:
            attempt.end_ns = now
            self._describe_attempt(attempt, record, error)
        span = self.span
        span.end_ns = now
        attrs = span.attributes
        shared: tuple[tuple[str, Any], ...] = (
            ("http.response.status_code", record.status),
            ("gateway.attempts", len(record.attempts)),
        )
        if record.provider:
            shared += (("gateway.provider", record.provider),)
        if record.stop_reason:
            shared += (("gateway.stop_reason", record.stop_reason),)
        if record.key is not None:
            shared += (("gateway.key", record.key),)  # the named key's name, never the secret
        if span.base is not None:
            span.base = span.base.extended(shared)
        else:
            attrs.update(shared)
        if record.cost_usd is not None:
            attrs["gateway.cost_usd"] = record.cost_usd  # set when the ledger priced it (Observer.finish)
        if error:
            attrs["error.type"] = error
            if record.status >= 500 or record.status == 200:  # a server failure, or a stream that failed after its 200
                span.error = error
        parent = self.parent
        if tel.always_root and tel.submit is not None:  # the default sampler, the gateway's batcher
            if parent is not None and not parent.trace_flags.sampled:
                return
            self._submit(parent, (self.raw_trace_state or None) if parent is not None else None)
            return
        if parent is not None and self.raw_trace_state:
            parent = tel.SpanContext(
                parent.trace_id,
                parent.span_id,
                True,
                parent.trace_flags,
                tel.TraceState.from_header([self.raw_trace_state]),
            )
        if tel.always_root:  # the default ParentBased(ALWAYS_ON): a root is sampled, a child follows its parent
            if parent is not None and not parent.trace_flags.sampled:
                return
            trace_state = parent.trace_state if parent is not None else None
        else:
            context = tel._in_context(tel.NonRecordingSpan(parent)) if parent is not None else None
            result = tel.sampler.should_sample(context, self.trace_id, span.name, tel.SERVER, span.all_attributes())
            if not result.decision.is_sampled():
                return
            trace_state = result.trace_state
        if tel.submit is not None:
            self._submit(parent, trace_state)
            return
        # the attempts first, as spans end in OpenTelemetry (children before their parent): an
        # exporter that has the request's span then has all of its trace
        own = tel.SpanContext(self.trace_id, span.span_id, False, tel.SAMPLED, trace_state)
        for child in self.attempts:
            tel.emit(self.trace_id, child, tel.CLIENT, own, trace_state)
        tel.emit(self.trace_id, span, tel.SERVER, parent, trace_state)

    def _submit(self, parent: Any, trace_state: Any) -> None:
        """Address the trace's plain spans and queue them, attempts first (children end before their
        parent, as in OpenTelemetry: an exporter that has the request's span has all of its trace).
        ``trace_state``: the caller's raw ``tracestate`` (parsed on the export thread) or a sampler's."""
        tel, span, trace_id = self.tel, self.span, self.trace_id
        own = span.span_id
        spans = self.attempts
        for child in spans:
            child.trace_id, child.parent_id, child.remote, child.kind = trace_id, own, False, CLIENT
            child.trace_state, child.origin = trace_state, tel
        span.trace_id, span.kind, span.trace_state, span.origin = trace_id, SERVER, trace_state, tel
        span.parent_id, span.remote = (parent.span_id, True) if parent is not None else (0, False)
        spans.append(span)
        if tel.submit is not None:  # (always: the caller checked)
            tel.submit(spans)

    def _describe_attempt(self, attempt: PlainSpan, record: AccessRecord, error: str | None) -> None:
        """The answering attempt's usage and finish reasons; the GenAI metrics."""
        attrs = attempt.attributes
        usage = (
            record.input_tokens,
            record.output_tokens,
            record.cache_read_tokens,
            record.cache_write_tokens,
            record.reasoning_tokens,
        )
        for key, value in zip(USAGE_ATTRIBUTES, usage):
            if value is not None:
                attrs[key] = value
        reason = record.raw_stop_reason or record.stop_reason
        if reason:
            attrs["gen_ai.response.finish_reasons"] = (reason,)
        if self.detached:
            attrs["gateway.detached"] = True  # the generation goes on in a task; usage is not on this span
        if self.content is not None and not self.detached:  # a detached answer is folded by its task
            from gateway.telemetry.content import output_content

            reply = self.reply if self.reply is not None else (self.output.reply if self.output is not None else None)
            if reply is not None:
                attrs.update(output_content(reply))
        if error:
            attrs["error.type"] = attempt.error = error
        metrics = self.tel.metrics
        if metrics is not None:
            duration, input_tokens, output_tokens, ttfc = self._series(error)
            measured: list[tuple[list[Any], float]] = [(duration, time.perf_counter() - self.attempt_started)]
            if record.input_tokens is not None:
                measured.append((input_tokens, record.input_tokens))
            if record.output_tokens is not None:
                measured.append((output_tokens, record.output_tokens))
            if self.ttfc is not None:
                measured.append((ttfc, self.ttfc))
            metrics.observe(measured)

    def _series(self, error: str | None) -> tuple[list[Any], ...]:
        """The GenAI metrics' series of the latest attempt (duration, input and output tokens, time to
        first chunk), found once per (base, response model, error) and kept: the attributes are not
        hashed per measurement."""
        tel, base, model = self.tel, self.attempt_base, self.response_model
        assert base is not None and tel.metrics is not None
        key = (base, model, error or None)
        handles = tel._series.get(key)
        if handles is None:
            labels = base.labels
            if model:
                labels += (("gen_ai.response.model", model),)
            if error:
                labels += (("error.type", error),)
            series = tel.metrics.series
            handles = (
                series(DURATION, labels),
                series(TOKENS, labels + (("gen_ai.token.type", "input"),)),
                series(TOKENS, labels + (("gen_ai.token.type", "output"),)),
                series(TTFC, labels),
            )
            if len(tel._series) < BASES_MAX * 4:
                tel._series[key] = handles
        return handles
