"""``gateway_event_loop_lag_seconds``: the event loop's lateness, sampled by the gateway itself and
scraped from ``/metrics`` (a histogram: a sample every 0.25 s)."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
from prometheus_client import CollectorRegistry, Histogram

from gateway.telemetry.loop_lag import BUCKETS, sample_loop_lag
from tests.support.fake_upstream import ServerThread


def _count(text: str) -> float:
    match = re.search(r"^gateway_event_loop_lag_seconds_count (\S+)$", text, re.M)
    assert match is not None, "the lag histogram is in /metrics"
    return float(match.group(1))


def test_the_lag_metric_is_in_metrics_and_keeps_sampling(gateway: ServerThread) -> None:
    first = _count(httpx.get(gateway.url + "/metrics").text)
    assert "# TYPE gateway_event_loop_lag_seconds histogram" in httpx.get(gateway.url + "/metrics").text
    deadline = time.time() + 5
    while _count(httpx.get(gateway.url + "/metrics").text) <= first:
        assert time.time() < deadline, "a new sample within a few intervals"
        time.sleep(0.1)


def test_a_blocked_loop_is_seen_as_lag() -> None:
    histogram = Histogram("lag", "lag", registry=CollectorRegistry(), buckets=BUCKETS)

    async def scenario() -> None:
        sampler = asyncio.create_task(sample_loop_lag(histogram, interval=0.02))
        await asyncio.sleep(0.03)
        time.sleep(0.3)  # a handler holding the loop: every open stream waits this long
        await asyncio.sleep(0.05)
        sampler.cancel()

    asyncio.run(scenario())
    samples = {s.labels.get("le"): s.value for s in histogram.collect()[0].samples if s.name == "lag_bucket"}
    assert samples["0.1"] < samples["0.5"], "one sample between 0.1 s and 0.5 s late"
