"""Several workers' ``/metrics`` as one exposition (gateway/telemetry/workers.py): what a scraper
parses back is every worker's series with a ``worker`` label, values and label values intact."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.telemetry.workers import merge_metrics


def _worker_text(requests: int, model: str) -> bytes:
    registry = CollectorRegistry()
    counter = Counter("gateway_requests", "Requests by provider\nand status", ["provider"], registry=registry)
    counter.labels(model).inc(requests)
    Histogram("gateway_lag_seconds", "Lag", registry=registry, buckets=(0.1, 1.0)).observe(0.5)
    return generate_latest(registry)


def test_every_worker_series_comes_back_labelled_and_intact() -> None:
    merged = merge_metrics({1: _worker_text(3, 'a "quoted" \\ name'), 0: _worker_text(5, "text")})
    families = {f.name: f for f in text_string_to_metric_families(merged.decode())}
    totals = {
        (s.labels["worker"], s.labels["provider"]): s.value
        for s in families["gateway_requests"].samples
        if s.name == "gateway_requests_total"
    }
    assert totals == {("0", "text"): 5.0, ("1", 'a "quoted" \\ name'): 3.0}
    assert families["gateway_requests"].documentation == "Requests by provider\nand status"
    buckets = [s for s in families["gateway_lag_seconds"].samples if s.name == "gateway_lag_seconds_bucket"]
    assert {(s.labels["worker"], s.labels["le"]): s.value for s in buckets} == {
        (w, le): v for w in ("0", "1") for le, v in (("0.1", 0.0), ("1.0", 1.0), ("+Inf", 1.0))
    }
    assert merged.decode().count("# TYPE gateway_requests_total counter") == 1
