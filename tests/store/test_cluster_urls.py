"""``redis+cluster://`` urls: the nodes and the password read from them, a database number refused
(a cluster has only 0), and a cluster nobody answers for failing at once rather than hanging."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gateway.store import open_store
from gateway.store.redis_client import parse_cluster_url
from tests.store.test_counters import ask
from tests.support.redis_servers import RedisClusterGroup


def test_nodes_and_password() -> None:
    assert parse_cluster_url("redis+cluster://:p%40ss@h1:7000,h2:7001,[::1]:7002") == (
        [("h1", 7000), ("h2", 7001), ("::1", 7002)],
        "p@ss",
    )
    assert parse_cluster_url("redis+cluster://h1,h2:7001/") == ([("h1", 6379), ("h2", 7001)], None)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://h1:7000/3", "only database 0"),
        ("redis+cluster://", "any of the cluster.s nodes"),
        ("redis+cluster://h1:port", "bad cluster node address"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        open_store(url, 60)


def test_an_unknown_scheme_names_the_cluster_kind() -> None:
    with pytest.raises(ValueError, match="redis\\+cluster://"):
        open_store("memcached://h1", 60)


async def test_a_cluster_nobody_answers_for_fails_at_once() -> None:
    store = open_store("redis+cluster://127.0.0.1:1,127.0.0.1:2", 60)
    started = time.monotonic()
    with pytest.raises(Exception, match="cannot be connected"):
        await store.reserve(ask("r1", max_parallel=1))
    assert time.monotonic() - started < 5
    await store.close()


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")
async def test_a_cluster_with_a_password_takes_it_from_password_env(tmp_path: Path) -> None:
    """The password ``[store] password_env`` names (``open_store``'s ``password``) reaches every node;
    without it the cluster refuses the store at once, with the reason."""
    cluster = RedisClusterGroup(tmp_path, password="s3cret pw").start()
    try:
        store = open_store(cluster.url, 60, password="s3cret pw")
        assert (await store.reserve(ask("r1", max_parallel=1))).ok
        await store.put("obj", "a", {"n": 1})
        assert await store.get("obj", "a") == {"n": 1}
        await store.close()
        refused = open_store(cluster.url, 60)
        with pytest.raises(Exception, match=r"(?i)auth"):
            await refused.get("obj", "a")
        await refused.close()
    finally:
        cluster.stop()
