"""Turning telemetry on: the endpoint (config or the standard ``OTEL_*`` variables), the resource, the
OTLP/HTTP exporters. Off (``None``) unless an endpoint is set; the SDK is imported only then, so a
gateway installed without the ``otel`` extra runs as before.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from gateway.telemetry.traces import SCHEMA_URL, Telemetry

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from gateway.settings import Settings

log = logging.getLogger("gateway.telemetry")


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
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: F401 (installed?)
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    except ImportError:
        log.error(
            "telemetry: an OTLP endpoint is set but the OpenTelemetry SDK is not installed; "
            "install the extra (pip install 'llm-gateway[otel]'). Running without telemetry."
        )
        return None
    from gateway.telemetry.export import BoundedBatchProcessor, WireSpanExporter
    from gateway.telemetry.metrics import GenAIMetrics
    from gateway.telemetry.workers import current as current_worker

    cfg = settings.telemetry
    env = os.environ
    attrs: dict[str, Any] = {"service.version": "0.1.0"}
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attrs["service.name"] = cfg.service_name
    worker = current_worker()
    if worker is not None and "service.instance.id=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        # each worker exports its own cumulative metrics: one series source per worker, never two in one
        attrs["service.instance.id"] = f"{socket.gethostname()}-worker-{worker.index}"
    resource = Resource.create(attrs)  # merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    guard = BoundedBatchProcessor(WireSpanExporter(endpoint=traces_url), registry, cfg.shutdown_seconds)
    metrics = None
    if metrics_on:  # interval: OTEL_METRIC_EXPORT_INTERVAL
        metrics = GenAIMetrics(
            OTLPMetricExporter(endpoint=metrics_url), resource, InstrumentationScope("llm-gateway", "0.1.0", SCHEMA_URL)
        )
    log.info(
        "telemetry: exporting OTLP/HTTP traces%s (capture_content=%s)",
        " and metrics" if metrics else "",
        cfg.capture_content,
    )
    return Telemetry(
        guard,
        metrics,
        resource=resource,
        capture_content=cfg.capture_content,
        shutdown_seconds=cfg.shutdown_seconds,
        guard=guard,
    )
