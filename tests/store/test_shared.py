"""Routing state (``Store.shared()``, gateway/store/shared.py) on both backends: cooldowns that
only grow and end by themselves, counters with a TTL, pins refreshed when read. On Redis a second
store instance (another replica) sees the same state; on SQLite it is per process by design."""

from __future__ import annotations

import asyncio

from tests.store.conftest import Opener


async def test_cooldowns_only_grow_and_end(opener: Opener, url: str) -> None:
    shared = opener().shared()
    assert await shared.cooling(["t1", "t2"]) == [0.0, 0.0]
    assert 0.25 <= await shared.cool("t1", 0.3) <= 0.301
    assert 0.25 <= await shared.cool("t1", 0.05) <= 0.301  # a shorter cooldown never shortens it
    left = await shared.cooling(["t1", "t2"])
    assert 0.2 <= left[0] <= 0.3 and left[1] == 0.0
    await asyncio.sleep(0.35)
    assert await shared.cooling(["t1"]) == [0.0]
    if url.startswith("redis"):
        other = opener().shared()  # another replica
        await other.cooling(["t0"])  # connected first (a cluster client's start is slot map + scripts)
        await shared.cool("t2", 5)
        assert 4 <= (await other.cooling(["t2"]))[0] <= 5


async def test_counters_with_ttl(opener: Opener, url: str) -> None:
    shared = opener().shared()
    assert await shared.add("busy:x", 1, 10) == 1
    assert await shared.add("busy:x", 1, 10) == 2
    assert await shared.add("busy:x", -1, 10) == 1
    assert (await shared.snapshot([], ["busy:x", "busy:y"], None, 0))[1] == [1, 0]
    assert await shared.add("busy:z", 1, 0.1) == 1
    await asyncio.sleep(0.2)
    assert (await shared.snapshot([], ["busy:z"], None, 0))[1] == [0]
    if url.startswith("redis"):
        assert (await opener().shared().snapshot([], ["busy:x"], None, 0))[1] == [1]


async def test_pins_refresh_when_read(opener: Opener, url: str) -> None:
    shared = opener().shared()
    assert await shared.pinned("aff:s", 1) is None
    await shared.pin("aff:s", "up:a", 0.3)
    for _ in range(3):
        await asyncio.sleep(0.15)
        assert await shared.pinned("aff:s", 0.3) == "up:a"  # each read keeps it 0.3 s longer
    await asyncio.sleep(0.4)
    assert await shared.pinned("aff:s", 0.3) is None
    if url.startswith("redis"):
        await shared.pin("aff:t", "up:b", 10)
        assert await opener().shared().pinned("aff:t", 10) == "up:b"
