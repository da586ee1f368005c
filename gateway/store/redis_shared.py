"""Routing state in Redis (see ``gateway/store/shared.py``): every replica sees one cooldown per
target, one in-flight count, one session pin. Cooldowns are keys with a PX TTL and are read with
PTTL, so Redis's clock alone decides when one ends; each operation is one round trip.

Every key is under the hash tag ``{rt}`` (``gw:{rt}:cool:<target>``, ``…:n:<target>``,
``…:pin:<session>``): the snapshot script reads a route's cooldowns, counts and pin together, so on
a Redis Cluster they must share a slot. That puts the routing state on one node; it is small
(a few keys per target, one short string per pinned session, each with a TTL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.store.shared import SharedState

# KEYS: cooldown   ARGV: ms   — extend only: a shorter cooldown never replaces a longer one
_COOL = """
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
  return tonumber(ARGV[1])
end
return left
"""

# KEYS: counter   ARGV: delta, ms
_ADD = """
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v
"""

# KEYS: cooldowns...  -> PTTL of each (negative: none)
_COOLING = """
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('PTTL', k) end
return out
"""


# KEYS: cooldowns..., counters..., [pin]   ARGV: ncool, ncount, pin_ms ('' = no pin)
_SNAPSHOT = """
local nc, nn = tonumber(ARGV[1]), tonumber(ARGV[2])
local left, counts = {}, {}
for i = 1, nc do left[i] = redis.call('PTTL', KEYS[i]) end
for i = 1, nn do counts[i] = tonumber(redis.call('GET', KEYS[nc + i]) or '0') end
local pinned = false
if ARGV[3] ~= '' then
  pinned = redis.call('GET', KEYS[nc + nn + 1])
  if pinned then redis.call('PEXPIRE', KEYS[nc + nn + 1], ARGV[3]) end
end
return {left, counts, pinned}
"""


class RedisShared(SharedState):
    """:class:`gateway.store.shared.SharedState` on the store's Redis connection."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._r = client
        self._p = prefix + "{rt}:"
        self._cool = client.register_script(_COOL)
        self._add = client.register_script(_ADD)
        self._cooling = client.register_script(_COOLING)
        self._snapshot = client.register_script(_SNAPSHOT)

    async def snapshot(
        self, cool_keys: Sequence[str], count_keys: Sequence[str], pin_key: str | None, pin_ttl: float
    ) -> tuple[list[float], list[int], str | None]:
        p = self._p
        keys = [p + "cool:" + k for k in cool_keys] + [p + "n:" + k for k in count_keys]
        if pin_key is not None:
            keys.append(p + "pin:" + pin_key)
        args = [len(cool_keys), len(count_keys), max(1, int(pin_ttl * 1000)) if pin_key is not None else ""]
        left, counts, pinned = await self._snapshot(keys=keys, args=args)
        return (
            [max(0, int(ms)) / 1000 for ms in left],
            [int(n) for n in counts],
            None if pinned is None else pinned.decode(),
        )

    async def cool(self, key: str, seconds: float) -> float:
        return int(await self._cool(keys=[self._p + "cool:" + key], args=[max(1, int(seconds * 1000))])) / 1000

    async def cooling(self, keys: Sequence[str]) -> list[float]:
        if not keys:
            return []
        left = await self._cooling(keys=[self._p + "cool:" + k for k in keys])
        return [max(0, int(ms)) / 1000 for ms in left]

    async def add(self, key: str, delta: int, ttl: float) -> int:
        return int(await self._add(keys=[self._p + "n:" + key], args=[delta, max(1, int(ttl * 1000))]))

    async def pin(self, key: str, value: str, ttl: float) -> None:
        await self._r.set(self._p + "pin:" + key, value, px=max(1, int(ttl * 1000)))

    async def pinned(self, key: str, ttl: float) -> str | None:
        value = await self._r.getex(self._p + "pin:" + key, px=max(1, int(ttl * 1000)))
        return None if value is None else value.decode()
