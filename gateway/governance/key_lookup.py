"""An unknown key is looked up in the ``[store]`` before it is refused, within a bound.

Why: a key made with ``POST /admin/keys`` on one replica reaches the others on their next poll of
the store's key version (``REFRESH_SECONDS``); a caller who uses it at once on another replica
would get a 401. So a key this replica does not know makes it reload the key records now (the
same read as the poll: the version first, the records only when it moved), then look again.

A flood of bad keys must not turn into a flood of store reads:

* one reload at a time: concurrent unknown keys wait for the running one and look again;
* a negative cache: a key still unknown after a reload is refused without another for
  ``NEGATIVE_SECONDS`` (the hash only is kept, at most ``NEGATIVE_MAX`` of them);
* at most ``LOOKUPS_PER_SECOND`` reloads a second over all callers (a token bucket); past it an
  unknown key is refused at once, as before.

Revocation is unchanged: a revoked key is known, so it never comes here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

NEGATIVE_SECONDS = 2.0
NEGATIVE_MAX = 10_000
LOOKUPS_PER_SECOND = 10.0


class UnknownKeys:
    """The bounded store lookups of keys this replica does not know."""

    def __init__(self, rate: float = LOOKUPS_PER_SECOND, negative_seconds: float = NEGATIVE_SECONDS) -> None:
        self.rate = rate
        self.negative_seconds = negative_seconds
        self._tokens = rate
        self._at = time.monotonic()
        self._negative: dict[str, float] = {}  # sha256 -> until (monotonic)
        self._lock: asyncio.Lock | None = None
        self.reloads = 0  # store reads made for unknown keys (tests, metrics)

    def _take(self, now: float) -> bool:
        self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def _remember(self, sha: str, now: float) -> None:
        if len(self._negative) >= NEGATIVE_MAX:
            for old in [h for h, until in self._negative.items() if until <= now] or list(self._negative)[:1000]:
                del self._negative[old]
        self._negative[sha] = now + self.negative_seconds

    async def reload_for(self, sha: str, ring: Any, store: Any) -> bool:
        """Reload ``ring`` from ``store`` for a key of hash ``sha`` it does not know; False when the
        bound says not to (recently unknown, or the lookups of this second are spent)."""
        now = time.monotonic()
        until = self._negative.get(sha)
        if until is not None:
            if until > now:
                return False
            del self._negative[sha]
        if self._lock is None:
            self._lock = asyncio.Lock()
        version = ring.version
        async with self._lock:
            if ring.version != version:  # another caller's reload ran while this one waited
                return True
            if not self._take(time.monotonic()):
                return False
            self.reloads += 1
            try:
                await ring.refresh(store)
            except Exception:  # the store is down: the key stays unknown, as before this lookup
                return False
        return True

    def still_unknown(self, sha: str) -> None:
        self._remember(sha, time.monotonic())
