"""A Sentinel group's master killed mid-traffic: the store finds the promoted replica by itself.

Real processes (tests/support/redis_servers.py): one master, one replica, three sentinels. A writer
appends to an event log and stores objects without pause while the master is killed; every
operation either succeeds (after the client's bounded retry) or raises — none hangs — and the
writer measures the longest gap between two successful operations. Afterwards the log holds each
sequence number exactly once (an append retried after a lost reply is refused by its ``expect``
check, never duplicated).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from gateway.store import open_store
from tests.support.redis_servers import SentinelGroup

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")


async def test_master_killed_mid_traffic(tmp_path: Path) -> None:
    group = SentinelGroup(tmp_path).start()
    store = open_store(group.url, 600)
    try:
        first = group.current_master()
        written = 0
        failures = 0
        longest_gap = 0.0
        last_ok = time.monotonic()
        killed_at: float | None = None
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if killed_at is None and written == 50:
                group.kill(first)
                killed_at = time.monotonic()
            try:
                seq = await asyncio.wait_for(store.append("s1", b"e%d" % written, expect=written), 15)
                assert seq == written
                await asyncio.wait_for(store.put("obj", f"o{written}", {"n": written}), 15)
            except Exception as exc:  # a failed operation must fail, not hang: wait_for bounds it
                assert not isinstance(exc, asyncio.TimeoutError), "a store operation hung through the failover"
                failures += 1
                await asyncio.sleep(0.1)
                # an append whose reply was lost may have landed: read where the log really is
                events = await asyncio.wait_for(store.events_after("s1", None), 15) if failures < 100 else []
                written = len(events)
                continue
            now = time.monotonic()
            longest_gap = max(longest_gap, now - last_ok)
            last_ok = now
            written += 1
            if killed_at is not None and group.current_master() != first and written >= 150:
                break
        assert killed_at is not None
        assert group.current_master() != first, "the sentinels did not promote the replica"
        assert written >= 150, f"writes did not resume after the failover ({written} written)"
        events = await store.events_after("s1", None)
        assert [seq for seq, _ in events] == list(range(len(events)))
        assert [data for _, data in events] == [b"e%d" % i for i in range(len(events))]
        assert await store.get("obj", f"o{written - 1}") == {"n": written - 1}
        print(f"longest gap through the failover: {longest_gap:.2f} s, failed operations: {failures}")
        assert longest_gap < 20
    finally:
        await store.close()
        group.stop()
