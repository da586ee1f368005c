"""The order in which a route's healthy targets are tried: one function per strategy.

Pure functions over small tuples (a route has a handful of targets), so a decision costs a few
microseconds; the inputs that need the store (in-flight counts) are read by the caller in one go.

* ``weighted``: a random order drawn by weight (Efraimidis–Spirakis keys ``u ** (1 / w)``): the
  first pick is target *i* with probability ``w_i / sum(w)``, and the rest follow as a backup order
  drawn the same way. Weight 0: only when every weighted target is out.
* ``least_busy``: fewest requests in flight first (ties in random order, so equal targets share).
* ``latency``: lowest recent time to first token first (``Latency``, an EWMA per target); a target
  never measured goes first, and ``EXPLORE`` of the requests take a random order, so a slow target
  that recovered is measured again and noticed.
* ``ordered``: as configured.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from gateway.routing.router import Target

EXPLORE = 0.05  # share of latency-routed requests sent in random order, to re-measure the others
ALPHA = 0.3  # EWMA weight of the newest time-to-first-token sample


class Latency:
    """Time to first token per target key, an exponentially weighted moving average (seconds).

    Kept per process: each replica measures what it sees, which is what its callers get."""

    def __init__(self) -> None:
        self.ewma: dict[str, float] = {}

    def observe(self, key: str, seconds: float) -> None:
        old = self.ewma.get(key)
        self.ewma[key] = seconds if old is None else old + ALPHA * (seconds - old)


def weighted(targets: Sequence[Target], rng: random.Random) -> list[Target]:
    if len(targets) < 2:
        return list(targets)
    keyed = [((rng.random() ** (1.0 / t.weight)) if t.weight > 0 else -rng.random(), t) for t in targets]
    keyed.sort(key=lambda kt: kt[0], reverse=True)
    return [t for _, t in keyed]


def least_busy(targets: Sequence[Target], in_flight: Sequence[int], rng: random.Random) -> list[Target]:
    keyed = sorted(zip(in_flight, [rng.random() for _ in targets], range(len(targets))))
    return [targets[i] for _, _, i in keyed]


def fastest(targets: Sequence[Target], latency: Latency, rng: random.Random) -> list[Target]:
    if rng.random() < EXPLORE:
        out = list(targets)
        rng.shuffle(out)
        return out
    ewma = latency.ewma
    return sorted(targets, key=lambda t: ewma.get(t.key, 0.0))


def order(
    strategy: str, targets: Sequence[Target], in_flight: Sequence[int] | None, latency: Latency, rng: random.Random
) -> list[Target]:
    """The targets in the order the strategy would try them."""
    if strategy == "weighted":
        return weighted(targets, rng)
    if strategy == "least_busy":
        return least_busy(targets, in_flight or [0] * len(targets), rng)
    if strategy == "latency":
        return fastest(targets, latency, rng)
    return list(targets)
