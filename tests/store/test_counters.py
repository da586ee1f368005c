"""Limits and spend in the store, the same cases on SQLite (a file) and a real redis-server: holds are
atomic across "processes" (separate store objects), released by settlement or lease expiry, budgets
per period, spend buckets and request records, key records with a version."""

from __future__ import annotations

import asyncio

from gateway.store import Store
from gateway.store.counters import Ask, Settlement
from tests.store.conftest import Opener

NOW = 1_800_000_030.0  # 30 s into a minute


def ask(lease: str, now: float = NOW, **kw: object) -> Ask:
    base: dict[str, object] = dict(
        key="team", lease=lease, now=now, lease_seconds=600.0, tokens=0, cost_nano=0, period="", period_end=None
    )
    base.update(kw)
    return Ask(**base)  # type: ignore[arg-type]


def settlement(hold: object, cost: int = 0, now: float = NOW, **kw: object) -> Settlement:
    base: dict[str, object] = dict(
        key="team",
        now=now,
        hold=hold,
        model="m",
        provider="p",
        route="r",
        input=10,
        output=5,
        cache_read=2,
        cache_write=1,
        reasoning=3,
        cost_nano=cost,
        unpriced=False,
        counted=True,
        record={"request_id": "x"},
        period=getattr(hold, "period", ""),
    )
    base.update(kw)
    return Settlement(**base)  # type: ignore[arg-type]


async def test_max_parallel_holds_across_processes_and_settle_releases(opener: Opener) -> None:
    a, b = opener(), opener()
    first = await a.reserve(ask("r1", max_parallel=2))
    second = await b.reserve(ask("r2", max_parallel=2))
    third = await a.reserve(ask("r3", max_parallel=2))
    assert first.ok and second.ok and not third.ok and third.reason == "parallel"
    await b.settle([settlement(first.hold)])
    assert (await a.reserve(ask("r4", max_parallel=2))).ok


async def test_rpm_is_shared_and_refusal_says_when(opener: Opener) -> None:
    a, b = opener(), opener()
    verdicts = [await (a if i % 2 else b).reserve(ask(f"r{i}", rpm=5)) for i in range(7)]
    assert [v.ok for v in verdicts] == [True] * 5 + [False] * 2
    refused = verdicts[5]
    assert refused.reason == "rpm" and refused.requests_remaining == 0
    assert 30 <= refused.retry_after <= 60  # the current minute must end first
    assert verdicts[0].requests_remaining == 4
    # the next minute: the previous one still weighs (sliding window), half of it at 30 s in
    later = await a.reserve(ask("r9", now=NOW + 60, rpm=5))
    assert later.ok and later.requests_remaining == 1  # 5 × 0.5 + 1 used of 5
    assert (await b.reserve(ask("r10", now=NOW + 60, rpm=5))).ok
    assert not (await b.reserve(ask("r11", now=NOW + 60, rpm=5))).ok


async def test_concurrent_reserves_never_exceed_the_limit(opener: Opener) -> None:
    stores = [opener() for _ in range(4)]
    verdicts = await asyncio.gather(*(stores[i % 4].reserve(ask(f"r{i}", max_parallel=7)) for i in range(40)))
    assert sum(v.ok for v in verdicts) == 7


async def test_tpm_counts_the_reservation_until_settled_then_the_real_tokens(opener: Opener) -> None:
    s = opener()
    held = await s.reserve(ask("r1", tokens=800, tpm=1000))
    assert held.ok and held.tokens_remaining == 200
    assert not (await s.reserve(ask("r2", tokens=300, tpm=1000))).ok
    await s.settle([settlement(held.hold, input=100, output=50)])
    again = await s.reserve(ask("r3", tokens=300, tpm=1000))
    assert again.ok and again.tokens_remaining == 1000 - 150 - 300
    too_big = await s.reserve(ask("r4", tokens=5000, tpm=1000))
    assert not too_big.ok and too_big.too_large


async def test_budget_holds_estimates_and_settles_real_cost_per_period(opener: Opener) -> None:
    a, b = opener(), opener()
    kw = dict(period="month:2027-01", period_end=NOW + 1000, budget_nano=1000)
    h1 = await a.reserve(ask("r1", cost_nano=400, **kw))
    h2 = await b.reserve(ask("r2", cost_nano=400, **kw))
    h3 = await a.reserve(ask("r3", cost_nano=400, **kw))
    assert h1.ok and h2.ok and not h3.ok and h3.reason == "budget"
    assert h3.retry_after == 1000 and h3.held_nano == 800
    spent = await a.settle([settlement(h1.hold, cost=100), settlement(h2.hold, cost=150)])
    assert spent == [100, 250]
    assert await b.budget_state("team", "month:2027-01") == (250, 0)
    assert (await a.reserve(ask("r4", cost_nano=700, **kw))).ok
    assert not (await a.reserve(ask("r5", cost_nano=100, **kw))).ok
    other = dict(kw, period="month:2027-02")  # a new period starts from zero
    assert (await a.reserve(ask("r6", cost_nano=900, **other))).ok


async def test_an_expired_lease_gives_its_hold_back(opener: Opener) -> None:
    s = opener()
    kw = dict(period="total", budget_nano=1000, max_parallel=1, lease_seconds=5.0)
    assert (await s.reserve(ask("dead", cost_nano=900, **kw))).ok  # its replica dies: never settled
    assert not (await s.reserve(ask("r2", now=NOW + 1, cost_nano=900, **kw))).ok
    assert (await s.reserve(ask("r3", now=NOW + 6, cost_nano=900, **kw))).ok


async def test_spend_buckets_and_request_records(opener: Opener) -> None:
    a, b = opener(), opener()
    await a.settle([settlement(None, cost=7, now=NOW), settlement(None, cost=5, now=NOW + 3600, model="m2")])
    await b.settle([settlement(None, cost=1, now=NOW, key="", record={"request_id": "anon"})])
    rows = await b.spend_buckets(int(NOW // 3600), int(NOW // 3600) + 2, None)
    by = {(r[0], r[1], r[2]): r[5:] for r in rows}
    hour = int(NOW // 3600)
    assert by[(hour, "team", "m")] == (1, 10, 5, 2, 1, 3, 7, 0)
    assert by[(hour + 1, "team", "m2")][6] == 5
    assert by[(hour, "", "m")][6] == 1
    assert len(await a.spend_buckets(hour, hour + 1, "team")) == 1
    assert [r["request_id"] for r in await a.recent_requests(None, 10)] == ["anon", "x", "x"]
    assert len(await a.recent_requests("team", 10)) == 2


async def test_key_records_and_version(opener: Opener) -> None:
    a, b = opener(), opener()
    v0 = await b.key_version()
    await a.put_key_record("k1", {"sha256": "ab", "rpm": 3})
    assert await b.key_version() != v0
    assert (await b.key_records()) == {"k1": {"sha256": "ab", "rpm": 3}}


async def test_spend_survives_reopening(opener: Opener, url: str) -> None:
    s: Store = opener()
    await s.settle([settlement(None, cost=42, period="total")])
    again = opener()
    assert await again.budget_state("team", "total") == (42, 0)


async def test_large_sums_stay_exact(opener: Opener) -> None:
    s = opener()
    big = 12_345_678_901_234  # $12,345.68 in nano-dollars
    kw = dict(period="total", budget_nano=10 * big)
    held = await s.reserve(ask("r1", cost_nano=big, **kw))
    assert held.ok and held.held_nano == big
    assert await s.settle([settlement(held.hold, cost=big + 1)]) == [big + 1]
    assert await s.budget_state("team", "total") == (big + 1, 0)
