"""The Redis connection a ``[store] url`` names: one server, or the master of a Sentinel group.

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
refuses an entry whose sequence number is already there (``LOGCLOSED``); the limit reservation and
settlement scripts, which are keyed by the request's hold id. An ``INCRBY`` of spend whose reply was
lost with the dead master may be counted again on the new one only if the write had reached the
replica before the failover (Redis replication is asynchronous: a write acknowledged by the old
master can as well be lost); the failover test measures it.

A password comes from the URL (``redis+sentinel://:pw@h1:26379,…``) or ``[store] password_env``; the
same password is used for the sentinels and the data nodes.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

SENTINEL_SCHEME = "redis+sentinel"
RETRIES = 10
CONNECT_TIMEOUT = 2.0


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), RETRIES)


def parse_sentinel_url(url: str) -> tuple[list[tuple[str, int]], str, int, str | None]:
    """``redis+sentinel://[:pw@]h1:p1,h2:p2/<master>/<db>`` → (sentinels, master, db, password)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        password = unquote(auth.split(":", 1)[1] if ":" in auth else auth) or None
    hosts: list[tuple[str, int]] = []
    for item in netloc.split(","):
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host:
            host, port = port, "26379"
        try:
            hosts.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ValueError(f"[store] url: bad sentinel address {item!r}") from None
    path = [p for p in parts.path.split("/") if p]
    if not hosts or not path:
        raise ValueError("[store] url: use redis+sentinel://host:26379,host2:26379/<master-name>/<db>")
    try:
        db = int(path[1]) if len(path) > 1 else 0
    except ValueError:
        raise ValueError(f"[store] url: the database after the master name must be a number, got {path[1]!r}") from None
    return hosts, unquote(path[0]), db, password


def redis_client(url: str, password: str | None = None) -> aioredis.Redis:
    """The client for ``url``: a plain one, or the Sentinel group's master (see the module docstring)."""
    retry_on = [RedisConnectionError, RedisTimeoutError, ReadOnlyError]
    if url.split(":", 1)[0].lower() == SENTINEL_SCHEME:
        hosts, master, db, url_password = parse_sentinel_url(url)
        secret = url_password or password
        sentinel = Sentinel(  # type: ignore[no-untyped-call]  # redis-py's Sentinel.__init__ has no annotations
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
