"""Routing state shared by the replicas: cooldowns, in-flight counters and pins, each with its own TTL.

(A route target's rpm/tpm is not here: it is held on the key limits' own sliding-window counters,
``Store.reserve`` / ``Store.settle``, see gateway/routing/targets.py.)

Why a separate, tiny interface (``Store.shared()``) instead of more rows in the store's tables:
routing reads it on every request, so it must cost microseconds in-process and one round trip on
Redis. The SQLite store therefore keeps it in process memory (one process: nothing to share; a
file round trip per request would cost more than the routing itself); the Redis store keeps it in
Redis (``gateway/store/redis_shared.py``), judged by Redis's own key TTLs so clock skew between
replicas cannot shorten or stretch a cooldown.

* ``cool(key, seconds)`` — a cooldown that only ever grows: a shorter one never replaces a longer.
* ``cooling(keys)`` — seconds left of each (0.0: healthy), in one read.
* ``add(key, delta, ttl)`` — a counter (requests in flight, for ``least_busy``), read by ``snapshot``.
* ``pin(key, value, ttl)`` / ``pinned(key, ttl)`` — a small string with a TTL that reading refreshes
  (the session → target map of affinity).
* ``snapshot`` — the three reads routing makes before a request, in one round trip.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence


class SharedState(abc.ABC):
    @abc.abstractmethod
    async def cool(self, key: str, seconds: float) -> float:
        """Cool ``key`` for at least ``seconds`` (never shortening a longer one); seconds left."""

    @abc.abstractmethod
    async def cooling(self, keys: Sequence[str]) -> list[float]:
        """Seconds of cooldown left for each key, 0.0 when none."""

    @abc.abstractmethod
    async def add(self, key: str, delta: int, ttl: float) -> int:
        """Add ``delta`` to a counter (created at 0) and keep it ``ttl`` seconds; the new value."""

    @abc.abstractmethod
    async def pin(self, key: str, value: str, ttl: float) -> None:
        """Keep ``value`` under ``key`` for ``ttl`` seconds."""

    @abc.abstractmethod
    async def pinned(self, key: str, ttl: float) -> str | None:
        """The pinned value (its TTL refreshed to ``ttl``), or None."""

    @abc.abstractmethod
    async def snapshot(
        self, cool_keys: Sequence[str], count_keys: Sequence[str], pin_key: str | None, pin_ttl: float
    ) -> tuple[list[float], list[int], str | None]:
        """``cooling``, each counter's value (0 when absent) and ``pinned``, at once: what routing
        reads before each request (Redis answers it in one round trip)."""


class LocalShared(SharedState):
    """In-process: dictionaries of (value, expiry on the monotonic clock)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._counts: dict[str, tuple[int, float]] = {}
        self._pins: dict[str, tuple[str, float]] = {}

    async def cool(self, key: str, seconds: float) -> float:
        now = time.monotonic()
        until = max(self._until.get(key, 0.0), now + seconds)
        self._until[key] = until
        return until - now

    async def cooling(self, keys: Sequence[str]) -> list[float]:
        now = time.monotonic()
        get = self._until.get
        return [max(0.0, get(k, 0.0) - now) for k in keys]

    async def add(self, key: str, delta: int, ttl: float) -> int:
        now = time.monotonic()
        value, expiry = self._counts.get(key, (0, 0.0))
        if expiry <= now:
            value = 0
        value += delta
        self._counts[key] = (value, now + ttl)
        if len(self._counts) > 65536:
            self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
        return value

    async def snapshot(
        self, cool_keys: Sequence[str], count_keys: Sequence[str], pin_key: str | None, pin_ttl: float
    ) -> tuple[list[float], list[int], str | None]:
        left = await self.cooling(cool_keys)
        now = time.monotonic()
        counts = []
        for key in count_keys:
            value, expiry = self._counts.get(key, (0, 0.0))
            counts.append(value if expiry > now else 0)
        pinned = await self.pinned(pin_key, pin_ttl) if pin_key is not None else None
        return left, counts, pinned

    async def pin(self, key: str, value: str, ttl: float) -> None:
        now = time.monotonic()
        self._pins[key] = (value, now + ttl)
        if len(self._pins) > 100_000:  # sessions come and go: drop the expired ones now and then
            self._pins = {k: v for k, v in self._pins.items() if v[1] > now}

    async def pinned(self, key: str, ttl: float) -> str | None:
        item = self._pins.get(key)
        now = time.monotonic()
        if item is None or item[1] <= now:
            return None
        self._pins[key] = (item[0], now + ttl)
        return item[0]
