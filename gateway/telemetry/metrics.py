"""The GenAI client metrics, aggregated here and exported through the SDK's OTLP metric exporter.

Why not the SDK's ``Histogram.record``: measured in ``bench/telemetry.py`` it costs ~20 µs per call
on the bench VM (attribute cleaning, view matching and hashing, a lock per aggregation), and a
request records three or four measurements — more than the whole per-request budget. A request's
metric attributes are few and built by the gateway itself (no cleaning needed), so a histogram here
is a dict lookup, a ``bisect`` and a few additions under an uncontended lock (~1-2 µs). What leaves
the process is the SDK's own data model (``MetricsData`` of cumulative ``HistogramDataPoint``s) handed
to the SDK's ``OTLPMetricExporter`` from a background thread every ``OTEL_METRIC_EXPORT_INTERVAL`` ms
(default 60 000), so collectors see exactly what an SDK ``MeterProvider`` would send.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_left
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExportResult,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

log = logging.getLogger("gateway.telemetry")

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
SECONDS_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)

DURATION = "gen_ai.client.operation.duration"
TOKENS = "gen_ai.client.token.usage"
TTFC = "gen_ai.client.operation.time_to_first_chunk"
# name -> (unit, description, bucket boundaries) — the conventions' advice for each
INSTRUMENTS: dict[str, tuple[str, str, tuple[float, ...]]] = {
    DURATION: ("s", "GenAI operation duration", SECONDS_BUCKETS),
    TOKENS: ("{token}", "Number of input and output tokens used", TOKEN_BUCKETS),
    TTFC: ("s", "Time to receive the first chunk of a streamed answer", SECONDS_BUCKETS),
}


def _new_series(name: str, attrs: tuple[tuple[str, Any], ...], first: float) -> list[Any]:
    """[bucket counts, sum, count, min, max, bounds, key]: one instrument's series for one attribute set."""
    bounds = INSTRUMENTS[name][2]
    return [[0] * (len(bounds) + 1), 0, 0, first, first, bounds, (name, attrs)]


def _add(series: list[Any], value: float) -> None:
    series[0][bisect_left(series[5], value)] += 1
    series[1] += value
    series[2] += 1
    if value < series[3]:
        series[3] = value
    elif value > series[4]:
        series[4] = value


class GenAIMetrics:
    """Cumulative explicit-bucket histograms keyed by (instrument, attributes)."""

    def __init__(
        self, exporter: Any = None, resource: Resource | None = None, scope: InstrumentationScope | None = None
    ) -> None:
        self.exporter = exporter
        self.resource = resource or Resource.create({})
        self.scope = scope or InstrumentationScope("llm-gateway")
        self.start_ns = time.time_ns()
        self._series: dict[tuple[str, tuple[tuple[str, Any], ...]], list[Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if exporter is not None:
            try:
                interval = float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "") or 60000) / 1000
            except ValueError:
                interval = 60.0
            self._thread = threading.Thread(
                target=self._run, args=(interval,), name="gateway-genai-metrics", daemon=True
            )
            self._thread.start()

    def record(self, name: str, value: float, attributes: dict[str, Any]) -> None:
        self.record_all(((name, value, tuple(attributes.items())),))

    def record_all(self, measurements: Any) -> None:
        """Several ``(instrument, value, attribute items)`` at once, under one lock."""
        series_of = self._series
        with self._lock:
            for name, value, attrs in measurements:
                series = series_of.get((name, attrs))
                if series is None:
                    series = series_of[(name, attrs)] = _new_series(name, attrs, value)
                _add(series, value)

    def series(self, name: str, attrs: tuple[tuple[str, Any], ...]) -> list[Any]:
        """A handle on the series of ``name`` with ``attrs``, to record into with ``observe``: a caller that
        keeps it (``RequestTrace``, per attempt's labels) skips hashing the attributes per measurement.
        A series not yet recorded into is not exported (nor registered until then)."""
        with self._lock:
            series = self._series.get((name, attrs))
        return series if series is not None else _new_series(name, attrs, 0)

    def observe(self, measurements: Any) -> None:
        """Several ``(series, value)`` (handles from ``series``) at once, under one lock."""
        with self._lock:
            for series, value in measurements:
                if not series[2]:  # its first value: register it (or record into the one registered since)
                    series = self._series.setdefault(series[6], series)
                    if not series[2]:
                        series[3] = series[4] = value
                _add(series, value)

    def collect(self) -> MetricsData:
        """Everything so far, as the SDK's data model (cumulative since start)."""
        now = time.time_ns()
        with self._lock:
            snapshot = [(name, attrs, list(s[0]), s[1], s[2], s[3], s[4]) for (name, attrs), s in self._series.items()]
        points: dict[str, list[HistogramDataPoint]] = {}
        for name, attrs, counts, total, count, low, high in snapshot:
            point = HistogramDataPoint(
                dict(attrs), self.start_ns, now, count, total, counts, INSTRUMENTS[name][2], low, high
            )
            points.setdefault(name, []).append(point)
        metrics = [
            Metric(
                name,
                INSTRUMENTS[name][1],
                INSTRUMENTS[name][0],
                Histogram(data_points, AggregationTemporality.CUMULATIVE),
            )
            for name, data_points in points.items()
        ]
        scope_metrics = ScopeMetrics(self.scope, metrics, self.scope.schema_url or "")
        return MetricsData([ResourceMetrics(self.resource, [scope_metrics], self.scope.schema_url or "")])

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        if self.exporter is None:
            return True
        data = self.collect()
        if not data.resource_metrics[0].scope_metrics[0].metrics:
            return True
        try:
            return self.exporter.export(data, timeout_millis=timeout_millis) is MetricExportResult.SUCCESS
        except Exception:
            log.warning("telemetry: metrics export failed", exc_info=True)
            return False

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.force_flush()

    def shutdown(self, timeout_millis: float = 5_000) -> None:
        """Stop the export loop and send the last values (the caller bounds how long it waits)."""
        self._stop.set()
        if self.exporter is not None:
            self.force_flush(timeout_millis)
            self.exporter.shutdown(timeout_millis=timeout_millis)
