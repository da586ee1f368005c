"""The store's contract, run unchanged against both backends (see conftest.py): objects, event
logs, replay from every position, the live tail (same instance and a second one), cancel across
instances, TTL expiry and a restart.

The store writes only what it is given: honouring ``store: false`` (never calling put/append) is
the relay's job and is tested there, not here.
"""

from __future__ import annotations

import asyncio

import pytest

from gateway.store import LogClosed, Store, open_store
from gateway.store.sqlite import sqlite_path
from tests.store.conftest import Opener, collect, produce


async def test_put_get_delete(store: Store) -> None:
    obj = {"id": "ia_1", "status": "completed", "outputs": [{"type": "text", "text": "hé"}]}
    await store.put("interaction", "ia_1", obj)
    assert await store.get("interaction", "ia_1") == obj
    assert await store.get("response", "ia_1") is None
    assert await store.get("interaction", "nope") is None
    await store.put("interaction", "ia_1", {"id": "ia_1", "status": "failed"})
    assert (await store.get("interaction", "ia_1")) == {"id": "ia_1", "status": "failed"}
    await store.append("ia_1", b"event")
    await store.finish("ia_1", "failed")
    assert await store.delete("interaction", "ia_1") is True
    assert await store.get("interaction", "ia_1") is None
    assert await store.events_after("ia_1", None) == []
    assert await store.log_status("ia_1") is None
    assert await store.delete("interaction", "ia_1") is False


async def test_append_order_and_finish(store: Store) -> None:
    assert await store.log_status("s") is None
    seqs = [await store.append("s", f"e{i}".encode()) for i in range(5)]
    assert seqs == [0, 1, 2, 3, 4]
    assert await store.events_after("s", None) == [(i, f"e{i}".encode()) for i in range(5)]
    assert await store.events_after("s", 2) == [(3, b"e3"), (4, b"e4")]
    assert await store.events_after("s", 4) == []
    st = await store.log_status("s")
    assert st is not None and (st.finished, st.status, st.count, st.owner) == (False, None, 5, None)
    with pytest.raises(LogClosed):
        await store.append("s", b"x", expect=3)  # a second writer would be caught
    assert await store.append("s", b"e5", expect=5) == 5
    await store.finish("s", "completed")
    await store.finish("s", "cancelled")  # idempotent: the first status stays
    st = await store.log_status("s")
    assert st is not None and (st.finished, st.status, st.count) == (True, "completed", 6)
    with pytest.raises(LogClosed):
        await store.append("s", b"late")
    assert len(await store.events_after("s", None)) == 6


async def test_binary_and_large_events(store: Store) -> None:
    blobs = [bytes(range(256)), b"", b"\x00end\x00", b"x" * 1_000_000]
    for blob in blobs:
        await store.append("bin", blob)
    await store.finish("bin", "completed")
    assert [d for _, d in await store.events_after("bin", None)] == blobs
    assert [d for _, d in await collect(store, "bin", None)] == blobs


async def test_follow_from_every_position_when_finished(store: Store) -> None:
    events = [(i, f'data: {{"n": {i}}}\n\n'.encode()) for i in range(7)]
    for _, data in events:
        await store.append("f", data)
    await store.finish("f", "completed")
    for after in [None, *range(7)]:
        start = 0 if after is None else after + 1
        assert await collect(store, "f", after) == events[start:], after


async def test_follow_after_past_the_end(store: Store) -> None:
    """A bogus ``last_event_id`` beyond the log: nothing to send, and the follow still ends."""
    for i in range(3):
        await store.append("p", b"e%d" % i)
    await store.finish("p", "completed")
    assert await asyncio.wait_for(collect(store, "p", 50), 5) == []
    assert await store.events_after("p", 50) == []


async def test_follow_many_events_past_one_batch(store: Store) -> None:
    n = 2500  # more than one read batch (1000)
    for i in range(n):
        await store.append("big", str(i).encode())
    await store.finish("big", "completed")
    got = await collect(store, "big", 10)
    assert [s for s, _ in got] == list(range(11, n))
    assert len(await store.events_after("big", None)) == n


@pytest.mark.parametrize("after", [None, 3])
async def test_follow_live_tail_in_process(store: Store, after: int | None) -> None:
    await store.claim("live", "owner-A")
    await store.append("live", b"e0")
    followers = [asyncio.create_task(collect(store, "live", after)) for _ in range(3)]
    await asyncio.sleep(0.05)
    # e1.. are appended while the followers wait: they must get them live, once each
    producer = asyncio.create_task(produce(store, "live", 1, 40))
    results = await asyncio.wait_for(asyncio.gather(*followers), 20)
    await producer
    start = 0 if after is None else after + 1
    expected = [(i, f"e{i}".encode()) for i in range(start, 40)]
    for got in results:
        assert got == expected


async def test_follow_across_two_instances(opener: Opener) -> None:
    a, b = opener(), opener()
    await a.claim("x", "replica-a")
    await a.append("x", b"e0")
    await a.append("x", b"e1")
    resumed = asyncio.create_task(collect(b, "x", 0))  # the caller dropped after e0, came back on b
    fresh = asyncio.create_task(collect(b, "x", None))
    await asyncio.sleep(0.1)
    await produce(a, "x", 2, 30)
    expected = [(i, f"e{i}".encode()) for i in range(30)]
    assert await asyncio.wait_for(resumed, 10) == expected[1:]
    assert await asyncio.wait_for(fresh, 10) == expected
    st = await b.log_status("x")
    assert st is not None and st.finished and st.owner == "replica-a" and st.count == 30


async def test_ttl_expiry(opener: Opener, url: str) -> None:
    store = opener(ttl=0.3)
    await store.put("response", "r", {"id": "r"})
    await store.claim("r", "o")
    await store.append("r", b"e0")
    await store.finish("r", "completed")
    assert await store.get("response", "r") == {"id": "r"}
    await asyncio.sleep(0.7)
    assert await store.get("response", "r") is None
    assert await store.events_after("r", None) == []
    assert await store.log_status("r") is None
    removed = await store.expire()
    assert removed >= (3 if url.startswith("sqlite") else 0)  # object + event + log rows
    assert await store.expire() == 0


async def test_running_stream_refreshes_its_ttl(opener: Opener) -> None:
    store = opener(ttl=0.4)
    await store.claim("long", "o")
    for i in range(8):  # 0.8 s of activity, twice the TTL
        await store.append("long", b"e%d" % i)
        await store.heartbeat("long", "o")
        await asyncio.sleep(0.1)
    assert len(await store.events_after("long", None)) == 8


async def test_cancel_across_instances(opener: Opener) -> None:
    a, b = opener(), opener()
    assert await b.request_cancel("unknown") is False
    await a.claim("c", "owner-A")
    assert await a.heartbeat("c", "owner-A") is False
    assert await b.cancel_requested("c") is False
    assert await b.request_cancel("c") is True
    assert await a.cancel_requested("c") is True
    assert await a.heartbeat("c", "owner-A") is True  # the owner learns it on its next beat
    st = await b.log_status("c")
    assert st is not None and st.cancel_requested and not st.finished
    await a.finish("c", "cancelled")
    assert await b.request_cancel("c") is False  # nothing left to cancel


async def test_restart_keeps_finished_objects_and_logs(url: str) -> None:
    first = open_store(url, 60)
    await first.put("interaction", "keep", {"id": "keep", "status": "completed"})
    await first.claim("keep", "o")
    for i in range(3):
        await first.append("keep", b"e%d" % i)
    await first.finish("keep", "completed")
    await first.close()
    second = open_store(url, 60)
    try:
        assert await second.get("interaction", "keep") == {"id": "keep", "status": "completed"}
        assert await second.events_after("keep", 0) == [(1, b"e1"), (2, b"e2")]
        assert await collect(second, "keep", None) == [(0, b"e0"), (1, b"e1"), (2, b"e2")]
        st = await second.log_status("keep")
        assert st is not None and (st.finished, st.status, st.count) == (True, "completed", 3)
    finally:
        await second.close()


def test_sqlite_urls() -> None:
    assert sqlite_path("sqlite:///gateway-state.db") == "gateway-state.db"
    assert sqlite_path("sqlite:///dir/sub.db") == "dir/sub.db"
    assert sqlite_path("sqlite:////abs/path.db") == "/abs/path.db"
    assert sqlite_path("sqlite://:memory:") == ":memory:"
    with pytest.raises(ValueError):
        sqlite_path("sqlite://")
    with pytest.raises(ValueError):
        open_store("postgres://x/y", 60)


async def test_memory_store_works() -> None:
    store = open_store("sqlite://:memory:", 60)
    try:
        await store.put("k", "i", {"a": 1})
        assert await store.get("k", "i") == {"a": 1}
        await store.append("i", b"e0")
        await store.finish("i", "completed")
        assert await collect(store, "i", None) == [(0, b"e0")]
    finally:
        await store.close()


async def test_concurrent_appends_many_streams(store: Store) -> None:
    """Many live streams at once (SQLite commits them in groups): each log stays dense and ordered,
    and a refused append (finished log) fails alone."""
    await store.finish("closed", "completed")

    async def one(k: int) -> list[int]:
        return [await store.append(f"m{k}", f"{k}:{i}".encode()) for i in range(30)]

    late = asyncio.create_task(store.append("closed", b"late"))
    seqs = await asyncio.gather(*(one(k) for k in range(20)))
    with pytest.raises(LogClosed):
        await late
    assert all(s == list(range(30)) for s in seqs)
    for k in range(20):
        assert await store.events_after(f"m{k}", None) == [(i, f"{k}:{i}".encode()) for i in range(30)]


async def test_caller_hangs_up_while_following(store: Store) -> None:
    """A follower cancelled mid-wait (the caller left) leaves the store fully usable."""
    await store.claim("h", "owner-A")
    await store.append("h", b"e0")
    for _ in range(3):
        task = asyncio.create_task(collect(store, "h", None))
        await asyncio.sleep(0.15)  # it is now blocked waiting for the live tail
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await store.append("h", b"e1") == 1
    await store.put("interaction", "h", {"id": "h"})
    assert await store.get("interaction", "h") == {"id": "h"}
    await store.finish("h", "completed")
    assert await collect(store, "h", None) == [(0, b"e0"), (1, b"e1")]
