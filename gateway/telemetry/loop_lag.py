"""``gateway_event_loop_lag_seconds``: how late the event loop runs what is due, under load.

Everything one process does — accepting connections, parsing requests, relaying every open stream —
runs on one event loop; when a burst of new connections or a costly request holds it, every open
stream waits that long for its next chunk. The sampler is one task that asks to wake every
``INTERVAL`` seconds and records how much later than asked it woke: a histogram (so the tail over
any window is ``histogram_quantile`` in PromQL) whose cost is one timer and one observation per
``INTERVAL``, nothing per request.
"""

from __future__ import annotations

import asyncio

from prometheus_client import Histogram

INTERVAL = 0.25  # seconds between samples
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


async def sample_loop_lag(histogram: Histogram, interval: float = INTERVAL) -> None:
    """Run until cancelled: one observation of the loop's lateness per ``interval``."""
    loop = asyncio.get_running_loop()
    observe = histogram.observe
    while True:
        asked = loop.time() + interval
        await asyncio.sleep(interval)
        observe(max(0.0, loop.time() - asked))
