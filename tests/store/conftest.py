"""Fixtures for the store suite: every test runs against SQLite (a file), a real redis-server, a
Sentinel group and a Redis Cluster (three masters, three replicas).

The redis-server is the Debian package, started once per session on a free loopback port with
persistence off; the Redis half is skipped (with the reason) only when the binary is missing.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from gateway.store import Store, open_store
from tests.support.redis_servers import RedisClusterGroup, SentinelGroup

Opener = Callable[..., Store]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server not installed (apt-get install -y redis-server; .ci/run installs it)")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"redis-server did not start on port {port}")
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def sentinel_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    """One master, one replica, three sentinels (tests/support/redis_servers.py), once per session."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed (apt-get install -y redis-server; .ci/run installs it)")
    group = SentinelGroup(tmp_path_factory.mktemp("sentinel")).start()
    yield group
    group.stop()


@pytest.fixture(params=["sqlite", "redis", "sentinel", "cluster"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"  # absolute path: sqlite:////tmp/...
    if request.param == "cluster":
        cluster: RedisClusterGroup = request.getfixturevalue("redis_cluster")
        cluster.flush()
        return cluster.url
    if request.param == "sentinel":
        group: SentinelGroup = request.getfixturevalue("sentinel_group")
        import redis

        with redis.Redis(port=group.current_master()) as r:
            r.flushdb()
        return group.url
    server: str = request.getfixturevalue("redis_server")
    import redis

    with redis.Redis.from_url(server) as r:
        r.flushdb()
    return server


@pytest.fixture
async def opener(url: str) -> AsyncIterator[Opener]:
    """Opens stores on the test's URL (each one a separate "process"); closes them after."""
    opened: list[Store] = []

    def make(ttl: float = 60.0) -> Store:
        store = open_store(url, ttl)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


@pytest.fixture
def store(opener: Opener) -> Store:
    return opener()


async def collect(store: Store, sid: str, after: int | None, **kw: float) -> list[tuple[int, bytes]]:
    """Everything ``follow`` yields until the log ends."""
    return [item async for item in store.follow(sid, after, **kw)]


async def beating(store: Store, sid: str, owner: str, every: float = 0.1) -> None:
    """An owner that is alive but says nothing: heartbeats only."""
    while True:
        await store.heartbeat(sid, owner)
        await asyncio.sleep(every)


async def produce(store: Store, sid: str, first: int, end: int, gap: float = 0.005) -> None:
    """The running task: events ``e{first}``..``e{end-1}`` with heartbeats, then finish."""
    for i in range(first, end):
        await store.append(sid, f"e{i}".encode(), expect=i)
        await store.heartbeat(sid, "owner-A")
        await asyncio.sleep(gap)
    await store.finish(sid, "completed")
