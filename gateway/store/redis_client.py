"""The Redis connection a ``[store] url`` names: one server, the master of a Sentinel group, or a Cluster.

``redis://host:6379/0`` (also ``rediss://``, ``unix://``) is one server. ``redis+sentinel://h1:26379,
h2:26379/<master>/<db>`` asks the sentinels for the master of ``<master>`` and asks again after a
failover: redis-py's ``SentinelConnectionPool`` finds the master on every new connection, and a
connection to a demoted master fails with ``READONLY``, which drops the pool's connections so the
next command reconnects to the promoted one.

Retries (Sentinel only: a single server has no replica to wait for, so its outage is answered at
once). A command that fails to reach a master (connection refused or reset, a timeout, READONLY
while the sentinels promote a replica) is sent again with exponential backoff, at most ``RETRIES``
times (about 6 s in all, longer than a sentinel's usual ``down-after-milliseconds`` + election);
after that the error reaches the request, which answers 503 in the caller's dialect (the store is
unavailable) rather than hanging or counting in process memory. What is safe to send twice: every
read; ``SET``/``PEXPIRE``/``HSET`` of a whole value (idempotent); the event-log append script, which
refuses an entry whose sequence number is already there (``LOGCLOSED``); the limit reservation,
which holds nothing more when its request id already holds; both parts of a settlement, each of
which sets a ``done:<settlement id>`` marker in its own slot and does nothing when it is there
(``gateway/store/redis_counters.py``). Not guarded: the routing in-flight count (``INCRBY`` with a
TTL, ``redis_shared.py``) may be off by one until its TTL if its reply was lost. Redis replication is
asynchronous: a write acknowledged by the old master just before it died can be lost with it; the
failover tests measure what survives.

A password comes from the URL (``redis+sentinel://:pw@h1:26379,…``) or ``[store] password_env``; the
same password is used for the sentinels and the data nodes.

``redis+cluster://h1:7000,h2:7001,…`` is a Redis Cluster: redis-py's ``RedisCluster`` learns the slot
map from any of the listed nodes (one reachable is enough), follows ``MOVED``/``ASK`` itself and,
when a master dies, reloads the map and sends again (the same bounded retry as for Sentinel) until
the cluster has promoted the master's replica. Every multi-key script keeps its
keys in one hash slot (the ``{tag}`` in the key names, see ``gateway/store/redis.py`` and
``redis_counters.py``), so nothing here needs to know about slots. A cluster has no databases: a
path after the hosts is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterDownError, NoScriptError, ReadOnlyError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"
RETRIES = 10
CONNECT_TIMEOUT = 2.0


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), RETRIES)


def parse_sentinel_url(url: str) -> tuple[list[tuple[str, int]], str, int, str | None]:
    """``redis+sentinel://[:pw@]h1:p1,h2:p2/<master>/<db>`` → (sentinels, master, db, password)."""
    parts = urlsplit(url)
    netloc, password = _auth(parts.netloc)
    hosts = _hosts(netloc, 26379, "sentinel")
    path = [p for p in parts.path.split("/") if p]
    if not hosts or not path:
        raise ValueError("[store] url: use redis+sentinel://host:26379,host2:26379/<master-name>/<db>")
    try:
        db = int(path[1]) if len(path) > 1 else 0
    except ValueError:
        raise ValueError(f"[store] url: the database after the master name must be a number, got {path[1]!r}") from None
    return hosts, unquote(path[0]), db, password


def _hosts(netloc: str, default_port: int, what: str) -> list[tuple[str, int]]:
    hosts: list[tuple[str, int]] = []
    for item in netloc.split(","):
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host:
            host, port = port, str(default_port)
        try:
            hosts.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ValueError(f"[store] url: bad {what} address {item!r}") from None
    return hosts


def _auth(netloc: str) -> tuple[str, str | None]:
    """(hosts part, password) of ``[:pw@]h1:p1,h2:p2``."""
    if "@" not in netloc:
        return netloc, None
    auth, netloc = netloc.rsplit("@", 1)
    return netloc, unquote(auth.split(":", 1)[1] if ":" in auth else auth) or None


def parse_cluster_url(url: str) -> tuple[list[tuple[str, int]], str | None]:
    """``redis+cluster://[:pw@]h1:p1,h2:p2`` → (startup nodes, password)."""
    parts = urlsplit(url)
    netloc, password = _auth(parts.netloc)
    hosts = _hosts(netloc, 6379, "cluster node")
    if not hosts:
        raise ValueError("[store] url: use redis+cluster://host:7000,host2:7001 (any of the cluster's nodes)")
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError(f"[store] url: a Redis Cluster has only database 0, got {parts.path!r}")
    return hosts, password


# What a cluster answers while a master is down and before its replica took over.
_CLUSTER_TRANSIENT = (RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError)


async def _again(_error: Exception) -> None:
    return None


class FailoverCluster(RedisCluster):
    """``RedisCluster`` whose commands ride through a master's failover.

    redis-py's cluster client reloads the slot map and resends at once after a connection error,
    a few times, without waiting: on a dead master that is over in milliseconds, long before the
    cluster has noticed (``cluster-node-timeout``) and promoted the replica. Each command is
    therefore wrapped in the same bounded exponential backoff as the Sentinel client (about 6 s),
    around the library's own redirect and reload handling (which stays as it is).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._script_lock = asyncio.Lock()
        self._scripts: list[AsyncScript] = []
        self.scripts_loaded = False
        self.failover_retry = Retry(
            ExponentialBackoff(cap=1.0, base=0.05), RETRIES, supported_errors=_CLUSTER_TRANSIENT
        )

    async def script_load(self, script: Any) -> Any:
        """One ``SCRIPT LOAD`` (sent to every primary) at a time: when many requests meet an
        unloaded script together, redis-py's concurrent all-primaries sends break each other's
        fresh connections (seen with redis-py 8.1: ``'NoneType' object has no attribute
        'writelines'``)."""
        async with self._script_lock:
            return await super().script_load(script)

    def register_script(self, script: Any) -> Any:  # an AsyncScript (the stubs say Script)
        registered = super().register_script(script)
        self._scripts.append(registered)
        return registered

    async def load_scripts(self) -> None:
        """Every registered script on every primary before the first command, one at a time, so
        requests do not all meet ``NOSCRIPT`` together at startup."""
        async with self._script_lock:
            if not self.scripts_loaded:
                for script in self._scripts:
                    await super().script_load(script.script)
                self.scripts_loaded = True

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if not self.scripts_loaded and args and args[0] == "EVALSHA":
            await self.load_scripts()
        return await self.failover_retry.call_with_retry(
            lambda: super(FailoverCluster, self).execute_command(*args, **kwargs), _again
        )


def cluster_client(url: str, password: str | None = None) -> FailoverCluster:
    """The cluster client for a ``redis+cluster://`` url (see the module docstring)."""
    hosts, url_password = parse_cluster_url(url)
    return FailoverCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in hosts],
        password=url_password or password,
        protocol=2,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=CONNECT_TIMEOUT * 2,
        retry=Retry(NoBackoff(), 3),  # the library's own immediate resends (slot map reloads)
    )


StoreClient = aioredis.Redis | FailoverCluster


def is_cluster(url: str) -> bool:
    return url.split(":", 1)[0].lower() == CLUSTER_SCHEME


Build = Callable[[Any], None]


async def run_pipeline(client: Any, build: Build, *, scripts: Sequence[AsyncScript] = ()) -> list[Any]:
    """Queue ``build(pipe)`` on a pipeline of ``client`` and execute it.

    Never a transaction (redis-py's asyncio cluster runs a transaction's commands on a thread of
    their own): what must be atomic is a script. On one server or a Sentinel group this is just a pipeline (its connection retries by itself,
    and redis-py loads the pipeline's scripts first). On a cluster the pipeline is split by node
    and redis-py resets it after a failure, so it is built again for each attempt: the failover
    backoff of :class:`FailoverCluster`, and once more after ``NOSCRIPT`` (a cluster pipeline does
    not load scripts; a promoted replica may not have them) with ``scripts`` loaded on every
    primary. Only pipelines whose commands are safe to send twice come here (see the callers).
    """
    if not isinstance(client, FailoverCluster):
        async with client.pipeline(transaction=False) as pipe:
            build(pipe)
            return list(await pipe.execute())

    if scripts and not client.scripts_loaded:
        await client.load_scripts()

    async def attempt() -> list[Any]:
        for loaded in (False, True):
            pipe = client.pipeline(transaction=False)
            build(pipe)
            try:
                return list(await pipe.execute())
            except NoScriptError:
                if loaded or not scripts:
                    raise
                for script in scripts:
                    await client.script_load(script.script)
        raise AssertionError("unreachable")

    return await client.failover_retry.call_with_retry(attempt, _again)


def redis_client(url: str, password: str | None = None) -> aioredis.Redis:
    """The client for ``url``: a plain one, or the Sentinel group's master (see the module docstring)."""
    retry_on = [RedisConnectionError, RedisTimeoutError, ReadOnlyError]
    if url.split(":", 1)[0].lower() == SENTINEL_SCHEME:
        hosts, master, db, url_password = parse_sentinel_url(url)
        secret = url_password or password
        # redis-py's Sentinel.__init__ is annotated from 8.2 on, not before: called untyped either way
        make_sentinel: Any = Sentinel
        sentinel = make_sentinel(
            hosts,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=CONNECT_TIMEOUT,
            sentinel_kwargs={
                "password": secret,
                "socket_connect_timeout": CONNECT_TIMEOUT,
                "socket_timeout": CONNECT_TIMEOUT,
            },
        )
        master_client: aioredis.Redis = sentinel.master_for(
            master,
            db=db,
            password=secret,
            protocol=2,
            socket_connect_timeout=CONNECT_TIMEOUT,
            retry=_retry(),
            retry_on_error=retry_on,
        )
        return master_client
    # one server: no failover to wait for, so an outage is answered at once (redis-py's own default retry)
    if password is not None:
        return aioredis.Redis.from_url(url, protocol=2, socket_connect_timeout=CONNECT_TIMEOUT, password=password)
    return aioredis.Redis.from_url(url, protocol=2, socket_connect_timeout=CONNECT_TIMEOUT)
