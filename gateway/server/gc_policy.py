"""The cyclic garbage collector's settings for a serving process.

Measured with ``bench/memory.py`` (6,000 held streams, ~1M tracked objects): CPython's full (gen-2)
collections, which run whenever the long-lived heap grew by a quarter, paused the event loop for
0.5–2.7 s each on the shared bench VM, so every open stream stalled that long
(``gateway_event_loop_lag_seconds`` p99 <= 5 s; with the collector off: <= 0.25 s; with these
settings: <= 0.25 s, the worst sample <= 0.5 s). Two settings, applied once the app has started
(gateway/server/serve.py: the served process only, not an app a test embeds):

* ``gc.freeze()``: what startup built (modules, codecs, the price database, settings) moves to the
  permanent generation and is never scanned again;
* a larger young-generation threshold (``GEN0``): a request's short-lived objects are dead by the
  next young collection, so fewer survive into the old generations, fewer full collections follow,
  and the young collections themselves run a fraction as often.

Cycles are still collected (nothing is disabled); a full collection still costs time in
proportion to the open streams' objects, which ``--workers`` divides among processes.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("gateway")

GEN0 = 20_000  # CPython's default is 700 (with 10, 10 for the older generations, kept)


def tune_gc() -> None:
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0, gen1, gen2)
    log.info("gc: %d startup objects frozen, young threshold %d", gc.get_freeze_count(), GEN0)
