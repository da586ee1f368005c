"""The response cache's entries in the store, on every backend (SQLite, one Redis, Sentinel, a Redis
Cluster — where the entries are single keys spread over the nodes and the index is one more key):
another "process" reads what one put, and past ``max_entries`` the oldest go."""

from __future__ import annotations

import asyncio

from tests.store.conftest import Opener


async def test_entries_are_shared_and_bounded(opener: Opener) -> None:
    a, b = opener(), opener()
    for i in range(12):
        await a.cache_put(f"entry-{i}", b"body %d" % i, 60, 5)
        await asyncio.sleep(0.002)  # distinct put times: the oldest is well defined
    kept = [i for i in range(12) if await b.cache_get(f"entry-{i}") is not None]
    assert 11 in kept and 0 not in kept
    assert len(kept) <= 5 + 4  # SQLite trims every few puts (docstring of Store.cache_put)
    assert await b.cache_get("entry-11") == b"body 11"
    assert await b.cache_get("text") is None
