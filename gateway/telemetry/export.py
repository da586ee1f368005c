"""Getting spans out without ever holding a request up: a bounded queue in front of the SDK's batcher.

The SDK's ``BatchSpanProcessor`` already exports from its own thread. What it does not do is say
how much it lost: on a full queue it drops the oldest span and logs a warning *per span* (log spam
on the request path exactly when the collector is down), and a failed export is only logged. So
the gateway counts spans itself: ``submitted`` (written by the event loop only) minus ``taken``
(written by the export thread only) is what waits in the queue; a span that would overflow it is
dropped here, counted, and never reaches the SDK's queue, and a batch the exporter could not
deliver (collector unreachable, refused) is counted too. Both land in the Prometheus counter
``gateway_telemetry_dropped_spans_total{reason}`` beside the other gateway metrics.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry, Counter

from gateway.telemetry.otlp_wire import encode_spans


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


class WireSpanExporter(OTLPSpanExporter):
    """The OTLP/HTTP exporter with the batch's protobuf bytes written by ``gateway/telemetry/otlp_wire.py``
    (~5x less of the export thread's CPU than the SDK's message-object encoder); its HTTP client,
    retries and self-metrics are the SDK's. An exporter release without those internals, or a batch
    the wire encoder does not take (events, links, over ``max_request_size``), goes through the
    SDK's own ``export``."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        client, metrics = getattr(self, "_client", None), getattr(self, "_metrics", None)
        if client is None or metrics is None or getattr(self, "_shutdown", True):
            return super().export(spans)
        try:
            data = encode_spans(spans)
        except Exception:
            data = None
        if data is None or len(data) > (getattr(self, "_max_request_size", None) or len(data)):
            return super().export(spans)
        with metrics.export_operation(len(spans)) as result:
            sent = client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


class CountingExporter(SpanExporter):
    """Wraps the OTLP exporter: counts what it was handed and what it failed to deliver."""

    def __init__(self, inner: SpanExporter, dropped: Any) -> None:
        self.inner = inner
        self.dropped = dropped
        self.taken = 0  # written by the export thread only

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.taken += len(spans)
        try:
            result = self.inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.dropped.labels("export_failed").inc(len(spans))
        return result

    def shutdown(self, timeout_millis: float = 30000) -> None:
        try:
            shutdown: Callable[..., None] = self.inner.shutdown  # newer exporters take a deadline
            shutdown(timeout_millis=timeout_millis)
        except TypeError:
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class BoundedBatchProcessor(SpanProcessor):
    """``BatchSpanProcessor`` behind a counted bound (``OTEL_BSP_MAX_QUEUE_SIZE``, default 2048)."""

    def __init__(
        self, exporter: SpanExporter, registry: CollectorRegistry | None, shutdown_seconds: float = 5.0
    ) -> None:
        self.dropped = Counter(
            "gateway_telemetry_dropped_spans",
            "Spans not exported: queue full, export failed, or still queued at shutdown",
            ["reason"],
            registry=registry,
        )
        self.max_queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self.exporter = CountingExporter(exporter, self.dropped)
        batch_size = min(_env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512), self.max_queue)
        self.batch = BatchSpanProcessor(self.exporter, max_queue_size=self.max_queue, max_export_batch_size=batch_size)
        self.submitted = 0  # written by the event loop only
        self.shutdown_seconds = shutdown_seconds
        self._gave_up = False

    @property
    def pending(self) -> int:
        return self.submitted - self.exporter.taken

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context.trace_flags.sampled or self._gave_up:
            return
        if self.submitted - self.exporter.taken >= self.max_queue:
            self.dropped.labels("queue_full").inc()
            return
        self.submitted += 1
        self.batch.on_end(span)

    def give_up(self) -> int:
        """Shutdown ran out of time: what is still queued is lost; count it."""
        self._gave_up = True
        lost = max(0, self.pending)
        if lost:
            self.dropped.labels("shutdown").inc(lost)
        return lost

    def shutdown(self) -> None:
        self.batch.shutdown()  # Telemetry.shutdown bounds the wait (its thread is joined with a timeout)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batch.force_flush(timeout_millis)
