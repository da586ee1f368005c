"""Getting spans out without ever holding a request up: the gateway's own bounded batcher and export thread.

The SDK's ``BatchSpanProcessor`` exports from its own thread too, but it does not say how much it
lost (on a full queue it drops the oldest span and logs a warning *per span*: log spam on the
request path exactly when the collector is down; a failed export is only logged), and it takes only
the SDK's ``ReadableSpan``s: two of them, their ``SpanContext``s and ``Status`` per request, made on the
event loop, were a large part of what tracing cost a request there (bench/README.md, "third pass"). So the
batcher is the gateway's: a request's plain spans (``gateway/telemetry/spans.py`` ``PlainSpan``) are
appended to a deque as they are (``submit``), and the export thread writes their OTLP bytes
(``otlp_wire.encode_plain``) a batch at a time, a caller's ``tracestate`` validated there too. It batches as the SDK's does (``OTEL_BSP_SCHEDULE_DELAY``,
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, ``OTEL_BSP_MAX_QUEUE_SIZE``; a full batch wakes the thread early) and
still takes the SDK's spans (``on_end``: a ``TracerProvider`` may hold it). The workers are spawned,
never forked (gateway/server/workers.py), so there is no thread to restart after a fork.

The counts: ``submitted`` (written by the event loop only) minus ``taken`` (written by the export
thread only) is what waits in the queue; a trace that would overflow it is dropped here, whole, and
counted; a batch the exporter could not deliver (collector unreachable, refused) is counted too.
Both land in the Prometheus counter ``gateway_telemetry_dropped_spans_total{reason}`` beside the other
gateway metrics.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry, Counter

from gateway.telemetry.otlp_wire import encode_plain, encode_spans
from gateway.telemetry.spans import PlainSpan

log = logging.getLogger("gateway.telemetry")
# set while exporting, as the SDK's batcher does: an instrumented HTTP client then makes no span of the export
_SUPPRESS = getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def readable(spans: Sequence[Any]) -> list[ReadableSpan]:
    """A batch as the SDK's ``ReadableSpan``s (a plain span is made one by its ``Telemetry``)."""
    return [s.origin.readable(s) if type(s) is PlainSpan else s for s in spans]


class WireSpanExporter(OTLPSpanExporter):
    """The OTLP/HTTP exporter with the batch's protobuf bytes written by ``gateway/telemetry/otlp_wire.py``
    (~5x less of the export thread's CPU than the SDK's message-object encoder), from the gateway's
    plain spans or the SDK's; its HTTP client, retries and self-metrics are the SDK's. An exporter
    release without those internals, or a batch the wire encoder does not take (events, links, over
    ``max_request_size``), goes through the SDK's own ``export``."""

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        client, metrics = getattr(self, "_client", None), getattr(self, "_metrics", None)
        if client is None or metrics is None or getattr(self, "_shutdown", True):
            return super().export(readable(spans))
        plain = all(type(s) is PlainSpan for s in spans)
        try:
            data = encode_plain(spans) if plain else encode_spans(readable(spans))
        except Exception:
            data = None
        if data is None or len(data) > (getattr(self, "_max_request_size", None) or len(data)):
            return super().export(readable(spans))
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
        self.wire = isinstance(inner, WireSpanExporter)  # takes plain spans; any other is handed ReadableSpans

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        self.taken += len(spans)
        try:
            result = self.inner.export(spans if self.wire else readable(spans))
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
    """A counted bound (``OTEL_BSP_MAX_QUEUE_SIZE``, default 2048) in front of one export thread."""

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
        self.batch_size = max(1, min(_env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512), self.max_queue))
        self.delay = _env_int("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self.submitted = 0  # written by the event loop only
        self.shutdown_seconds = shutdown_seconds
        self._queue: deque[Any] = deque()  # appended by the loop, popped by the export thread
        self._wake = threading.Event()
        self._export_lock = threading.Lock()  # one export at a time: the thread's, force_flush's
        self._closed = False
        self._gave_up = False
        self._thread = threading.Thread(target=self._run, name="gateway-span-export", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        return self.submitted - self.exporter.taken

    def submit(self, spans: list[PlainSpan]) -> None:
        """A request's plain spans, ended and addressed (``RequestTrace._finish``); dropped whole, and
        counted, when they would overflow the queue."""
        if self._gave_up or self._closed:
            return
        n = len(spans)
        if self.submitted - self.exporter.taken + n > self.max_queue:
            self.dropped.labels("queue_full").inc(n)
            return
        self.submitted += n
        queue = self._queue
        queue.extend(spans)
        if len(queue) >= self.batch_size and not self._wake.is_set():
            self._wake.set()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context.trace_flags.sampled or self._gave_up or self._closed:
            return
        if self.submitted - self.exporter.taken >= self.max_queue:
            self.dropped.labels("queue_full").inc()
            return
        self.submitted += 1
        self._queue.append(span)
        if len(self._queue) >= self.batch_size and not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            woken = self._wake.wait(self.delay)
            if self._closed:
                break
            self._export(always=not woken)  # on time: at least one batch; woken: only full ones
            self._wake.clear()
        self._export(drain=True)

    def _export(self, always: bool = False, drain: bool = False) -> None:
        """Batches while the queue holds a full one (``always``: the first one anyway; ``drain``: all)."""
        queue, size = self._queue, self.batch_size
        with self._export_lock:
            while queue and not self._gave_up and (drain or always or len(queue) >= size):
                always = False
                batch = [queue.popleft() for _ in range(min(size, len(queue)))]
                token = otel_context.attach(otel_context.set_value(_SUPPRESS, True)) if _SUPPRESS else None
                try:
                    self.exporter.export(batch)
                except Exception:  # CountingExporter counts it; nothing may kill the thread
                    log.exception("telemetry: span export failed")
                finally:
                    if token is not None:
                        otel_context.detach(token)

    def give_up(self) -> int:
        """Shutdown ran out of time: what is still queued is lost; count it."""
        self._gave_up = True
        lost = max(0, self.pending)
        if lost:
            self.dropped.labels("shutdown").inc(lost)
        return lost

    def shutdown(self) -> None:
        """Export what is queued, then shut the exporter. ``Telemetry.shutdown`` runs this in a thread
        it waits on for ``shutdown_seconds`` only, then counts what is left (``give_up``); the join's
        own bound (the SDK batcher's 30 s) only ends a forgotten thread."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(30.0)
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._closed:
            return False
        self._export(drain=True)
        return True
