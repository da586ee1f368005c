"""Liveness and speed: a resume never hangs on a dead owner (stopped heartbeats, or a real child
process killed with SIGKILL), never gives up on a quiet live one, and sees appends quickly.
Run against both backends (see conftest.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.store import OwnerGone, Store
from tests.store.conftest import Opener, beating, collect

ROOT = Path(__file__).resolve().parents[2]


async def test_owner_gone_when_heartbeats_stop(store: Store) -> None:
    await store.claim("dead", "owner-A")
    await store.append("dead", b"e0")
    await store.append("dead", b"e1")
    got: list[tuple[int, bytes]] = []
    t0 = time.monotonic()
    with pytest.raises(OwnerGone):
        async for item in store.follow("dead", None, dead_after=0.5):
            got.append(item)
    assert got == [(0, b"e0"), (1, b"e1")]  # everything stored was delivered first
    assert time.monotonic() - t0 < 3.0


async def test_owner_gone_for_unknown_stream(store: Store) -> None:
    t0 = time.monotonic()
    with pytest.raises(OwnerGone):
        await collect(store, "never-claimed", None, dead_after=0.3)
    assert time.monotonic() - t0 < 2.5


async def test_quiet_but_alive_owner_is_not_gone(opener: Opener) -> None:
    a, b = opener(), opener()
    await a.claim("slow", "owner-A")
    beats = asyncio.create_task(beating(a, "slow", "owner-A"))
    follower = asyncio.create_task(collect(b, "slow", None, dead_after=0.4))
    await asyncio.sleep(1.5)  # nothing appended for longer than dead_after: still alive
    assert not follower.done()
    await a.append("slow", b"late")
    await a.finish("slow", "completed")
    assert await asyncio.wait_for(follower, 5) == [(0, b"late")]
    beats.cancel()


_CHILD = """
import asyncio, sys
from gateway.store import open_store

async def main():
    store = open_store(sys.argv[1], 60)
    await store.claim("orphan", "child")
    i = 0
    while True:
        await store.append("orphan", b"e%d" % i)
        await store.heartbeat("orphan", "child")
        i += 1
        await asyncio.sleep(0.05)

asyncio.run(main())
"""


async def test_owner_process_killed_ends_resume_with_error(store: Store, url: str) -> None:
    """The replica running a task dies (SIGKILL): a waiting resume on another ends within seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, url], cwd=ROOT, env=env)
    try:
        async with asyncio.timeout(30):  # the child starts slowly on a busy machine: follow once it owns the log
            while await store.log_status("orphan") is None:
                await asyncio.sleep(0.05)
        got: list[int] = []
        t_kill = 0.0
        with pytest.raises(OwnerGone):
            async with asyncio.timeout(30):
                async for seq, _ in store.follow("orphan", None, dead_after=1.0):
                    got.append(seq)
                    if len(got) == 5:
                        child.send_signal(signal.SIGKILL)
                        t_kill = time.monotonic()
        assert got == list(range(len(got))) and len(got) >= 5
        assert time.monotonic() - t_kill < 4.0
    finally:
        child.kill()
        child.wait()


async def test_append_to_follow_latency(opener: Opener, url: str) -> None:
    """How long an appended event takes to reach a follower: same instance and another one."""
    report = []
    for label, reader in (("same instance", None), ("other instance", opener())):
        writer = opener()
        reader = reader or writer
        sid = f"lat-{label}"
        await writer.claim(sid, "o")
        stamps: list[float] = []

        async def read(reader=reader, sid: str = sid, stamps: list[float] = stamps) -> None:  # this pass's
            async for _ in reader.follow(sid, None):
                stamps.append(time.perf_counter() - sent)  # noqa: B023 -- the latest append's clock, read late on purpose

        task = asyncio.create_task(read())
        await asyncio.sleep(0.05)
        lags = []
        for i in range(30):
            sent = time.perf_counter()
            await writer.append(sid, b"e%d" % i)
            while len(stamps) <= i:
                await asyncio.sleep(0.0005)
            lags.append(stamps[i])
            await asyncio.sleep(0.01)
        await writer.finish(sid, "completed")
        await asyncio.wait_for(task, 5)
        med = statistics.median(lags)
        report.append(f"{url.split(':')[0]} {label}: median {med * 1000:.2f} ms, max {max(lags) * 1000:.2f} ms")
        assert med < 0.2
    print("\n" + "\n".join(report))
