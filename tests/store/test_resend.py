"""What a Redis client may send twice — after a reply lost while a master fails over, redis-py sends
the same command again — is counted once: a reservation held once, each part of a settlement
(the key's part, the spend part) recorded once. Run on a single Redis, a Sentinel group and a
Redis Cluster (the conftest's backends without SQLite, whose writes are local transactions)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.store.counters import hour_of
from gateway.store.redis import RedisStore
from tests.store.conftest import Opener
from tests.store.test_counters import NOW, ask, settlement


@pytest.fixture
def redis_store(opener: Opener, url: str) -> RedisStore:
    if url.startswith("sqlite"):
        pytest.skip("SQLite writes in local transactions: nothing is sent twice")
    store = opener()
    assert isinstance(store, RedisStore)
    return store


async def _send(store: RedisStore, calls: list[tuple[Any, list[str], list[Any]]]) -> None:
    for script, keys, args in calls:
        await script(keys=keys, args=args)


async def test_a_settlement_sent_twice_is_counted_once(redis_store: RedisStore) -> None:
    kw = dict(period="total", budget_nano=10_000, tokens=100, tpm=1000)
    held = await redis_store.reserve(ask("r1", cost_nano=500, **kw))
    assert held.ok and held.hold is not None
    s = settlement(held.hold, cost=300, period="total")
    calls = redis_store._settle_calls(s, "same-id")
    assert len(calls) == 2  # the key's part and the spend part, each in its own hash slot
    for _ in range(3):  # the first send and two resends of the very same commands
        await _send(redis_store, calls)
    await _send(redis_store, calls[1:])  # the spend part alone once more (its node answered late)
    assert await redis_store.budget_state("team", "total") == (300, 0)
    rows = await redis_store.spend_buckets(hour_of(NOW), hour_of(NOW) + 1, "team")
    assert [row[5:] for row in rows] == [(1, 10, 5, 2, 1, 3, 300, 0)]
    assert len(await redis_store.recent_requests(None, 10)) == 1
    assert len(await redis_store.recent_requests("team", 10)) == 1
    # a different settlement of the same size is a second one
    await redis_store.settle([settlement(None, cost=300, period="total")])
    assert (await redis_store.budget_state("team", "total"))[0] == 600


async def test_a_reservation_sent_twice_holds_once(redis_store: RedisStore) -> None:
    kw = dict(period="total", budget_nano=1000, max_parallel=2, rpm=10)
    first = await redis_store.reserve(ask("r1", cost_nano=400, **kw))
    again = await redis_store.reserve(ask("r1", cost_nano=400, **kw))  # the same request id: a resend
    assert first.ok and again.ok
    assert await redis_store.budget_state("team", "total") == (0, 400)
    other = await redis_store.reserve(ask("r2", cost_nano=400, **kw))
    assert other.ok and other.held_nano == 800 and other.requests_remaining == 8
    assert first.hold is not None
    await redis_store.settle([settlement(first.hold, cost=100, period="total")])
    assert await redis_store.budget_state("team", "total") == (100, 400)


async def test_the_ledger_sends_a_failed_batch_again_and_it_counts_once(
    opener: Opener, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose reply was lost (applied, then the connection failed) is sent again by the
    ledger (``Ledger._settle``, gateway/governance/ledger.py) with the same settlement ids: its
    spend and hold count once, on every store (SQLite rolls a failed batch back; Redis keeps done
    markers). Before, a failed batch was dropped: its spend lost, its holds kept until they expired."""
    from gateway.governance import ledger as ledger_module

    monkeypatch.setattr(ledger_module, "SETTLE_RETRY_PAUSES", (0.01, 0.01))
    store = opener()
    kw = dict(period="total", budget_nano=10_000, tokens=100, tpm=1000)
    held = await store.reserve(ask("r1", cost_nano=500, **kw))
    assert held.ok and held.hold is not None
    batch = [settlement(held.hold, cost=300, period="total")]
    real = store.settle
    calls = 0

    async def lossy(items: list[Any]) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            if not url.startswith("sqlite"):
                await real(items)  # applied on the server; the reply never came back
            raise ConnectionError("connection lost")
        return await real(items)

    monkeypatch.setattr(store, "settle", lossy)
    ledger = ledger_module.Ledger.__new__(ledger_module.Ledger)  # only its store is read by _settle
    ledger.store = store
    await ledger._settle(batch)
    assert calls == 2
    assert await store.budget_state("team", "total") == (300, 0)
    rows = await store.spend_buckets(hour_of(NOW), hour_of(NOW) + 1, "team")
    assert [row[5:] for row in rows] == [(1, 10, 5, 2, 1, 3, 300, 0)]
