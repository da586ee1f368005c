"""Redis backend: for replicas, so any gateway process can resume a stream another one runs.

Why it is built this way:

* The event log of a stream is a Redis stream ``gw:log:{<id>}`` with explicit ids ``0-1, 0-2, …``
  (entry ``0-(n+1)`` is event ``n``): replay is ``XRANGE``, the live tail is ``XREAD BLOCK`` on
  the same key, so a follower on any replica is woken by Redis itself the moment an event lands,
  and the numbering needs no separate counter.
* The end of the log is one more stream entry (field ``end`` = status), not a separate key: the
  follower reads it in order after the last event, so it can never see "finished" before events
  written earlier.
* Append, finish, claim, heartbeat and cancel are small Lua scripts: each check-then-write is
  atomic (no append after finish; ``expect=`` detects a second writer) and costs one round trip.
* Heartbeats are stamped with the Redis server's ``TIME`` and judged against it, so clock skew
  between replicas cannot make a live owner look dead or a dead one look alive.
* Objects are strings with ``PX`` = the store TTL; logs and their meta hash ``gw:meta:{<id>}``
  (owner, hb, cancel) get the same TTL, refreshed on every append and heartbeat.
* Redis Cluster (``redis+cluster://``): every key a script touches together has
  the same hash tag — ``{<id>}`` for one stored object and its log, ``{<name>}`` for one named
  key's limits (``redis_counters.py``), ``{rt}`` for routing state (``redis_shared.py``), ``{spend}``
  for the spend buckets and request records, ``{gw:keys}`` for the key records' version. The
  cache's entries are single keys spread over the cluster; its index is one more key, and
  nothing touches both in one command. Signals between replicas are polled keys, never pub/sub
  (a stream's ``cancel`` field, the key records' version), so they work the same on a cluster.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import orjson
from redis.exceptions import ResponseError

from gateway.store.base import Liveness, LogClosed, LogStatus, OwnerGone, Store
from gateway.store.redis_client import StoreClient, cluster_client, is_cluster, redis_client, run_pipeline
from gateway.store.redis_counters import RedisCounters
from gateway.store.redis_shared import RedisShared

_BATCH = 1000
_PREFIX = "gw:"

# KEYS: log, meta   ARGV: data, ttl_ms, expect ('' = any)
_APPEND = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 and last[1][2][1] == 'end' then return redis.error_reply('LOGCLOSED finished') end
local n = redis.call('XLEN', KEYS[1])
if ARGV[3] ~= '' and n ~= tonumber(ARGV[3]) then
  return redis.error_reply('LOGCLOSED next sequence number is ' .. n)
end
redis.call('XADD', KEYS[1], '0-' .. (n + 1), 'd', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return n
"""

# KEYS: log, meta   ARGV: status, ttl_ms
_FINISH = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 or last[1][2][1] ~= 'end' then
  redis.call('XADD', KEYS[1], '0-' .. (redis.call('XLEN', KEYS[1]) + 1), 'end', ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""

# KEYS: meta, log   ARGV: owner, ttl_ms, only_if_owner ('1' = heartbeat, '' = claim)
_BEAT = """
if ARGV[3] == '' or redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'hb', t[1] .. '.' .. string.format('%06d', t[2]))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 1 end
return 0
"""

# KEYS: meta, log   ARGV: ttl_ms
_CANCEL = """
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last > 0 and last[1][2][1] == 'end' then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 and #last == 0 then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

# KEYS: object, log, meta  -> whether the object was there. A script rather than MULTI: atomic on a
# cluster too (the three keys share the tag {id}), where redis-py's transactions are not for asyncio.
_DELETE = """
local gone = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2], KEYS[3])
return gone
"""

# KEYS: meta, log  -> {now, owner, hb, cancel, count, end-status}
_STATUS = """
local t = redis.call('TIME')
local m = redis.call('HMGET', KEYS[1], 'owner', 'hb', 'cancel')
local n = redis.call('XLEN', KEYS[2])
local status = false
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last > 0 and last[1][2][1] == 'end' then status = last[1][2][2]; n = n - 1 end
if m[1] == false and m[2] == false and m[3] == false and #last == 0 then return false end
return {t[1] .. '.' .. string.format('%06d', t[2]), m[1], m[2], m[3], n, status}
"""


# Stream replies as this client (bytes, RESP2) returns them: the redis stubs type them as unions of
# every decode mode, so they are narrowed once here.
_Entry = tuple[bytes, dict[bytes, bytes]]
_ReadReply = list[tuple[bytes, list[_Entry]]]


def _seq(entry_id: bytes | str) -> int:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.split("-", 1)[1]) - 1


def _s(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class RedisStore(RedisCounters, Store):
    """Redis (``redis://host:port/db``, a Sentinel group's master or a Redis Cluster:
    ``gateway/store/redis_client.py``) behind the :class:`Store` interface."""

    def __init__(self, url: str, ttl_seconds: float, *, prefix: str = _PREFIX, password: str | None = None) -> None:
        self.ttl_seconds = ttl_seconds
        self._ttl_ms = max(1, int(ttl_seconds * 1000))
        self._prefix = prefix
        self._r: StoreClient = cluster_client(url, password) if is_cluster(url) else redis_client(url, password)
        self._append = self._r.register_script(_APPEND)
        self._finish = self._r.register_script(_FINISH)
        self._beat = self._r.register_script(_BEAT)
        self._cancel = self._r.register_script(_CANCEL)
        self._status = self._r.register_script(_STATUS)
        self._delete = self._r.register_script(_DELETE)
        self._init_counters()
        self._shared: RedisShared | None = None

    def _k(self, what: str, *parts: str) -> str:
        """``gw:log:{id}``: the id in braces is the Redis Cluster hash tag, so the keys one
        script touches (log, meta, object of one id) share a slot."""
        return self._prefix + what + ":" + ":".join(parts[:-1] + ("{" + parts[-1] + "}",))

    def _log_keys(self, sid: str) -> tuple[str, str]:
        return self._k("log", sid), self._k("meta", sid)

    async def put(self, kind: str, id: str, obj: dict[str, Any]) -> None:
        await self._r.set(self._k("obj", kind, id), orjson.dumps(obj), px=self._ttl_ms)

    async def get(self, kind: str, id: str) -> dict[str, Any] | None:
        body = await self._r.get(self._k("obj", kind, id))
        return None if body is None else orjson.loads(body)

    async def delete(self, kind: str, id: str) -> bool:
        log, meta = self._log_keys(id)
        return bool(await self._delete(keys=[self._k("obj", kind, id), log, meta]))

    async def append(self, stream_id: str, data: bytes, *, expect: int | None = None) -> int:
        log, meta = self._log_keys(stream_id)
        try:
            return int(
                await self._append(keys=[log, meta], args=[data, self._ttl_ms, "" if expect is None else expect])
            )
        except ResponseError as exc:
            if "LOGCLOSED" in str(exc):
                raise LogClosed(f"log {stream_id!r}: {exc}") from None
            raise

    async def finish(self, stream_id: str, status: str) -> None:
        log, meta = self._log_keys(stream_id)
        await self._finish(keys=[log, meta], args=[status, self._ttl_ms])

    async def events_after(self, stream_id: str, after: int | None) -> list[tuple[int, bytes]]:
        log, _ = self._log_keys(stream_id)
        out: list[tuple[int, bytes]] = []
        start = f"0-{(after if after is not None else -1) + 2}"
        while True:
            entries = cast(list[_Entry], await self._r.xrange(log, min=start, max="+", count=_BATCH))
            for eid, fields in entries:
                if b"d" in fields:
                    out.append((_seq(eid), fields[b"d"]))
            if len(entries) < _BATCH:
                return out
            start = f"0-{_seq(entries[-1][0]) + 2}"

    async def follow(
        self,
        stream_id: str,
        after: int | None,
        *,
        poll: float = 0.05,
        dead_after: float = 8.0,
        owner_alive: Callable[[], bool] | None = None,
    ) -> AsyncIterator[tuple[int, bytes]]:
        log, _ = self._log_keys(stream_id)
        last_id = f"0-{(after if after is not None else -1) + 1}"
        idle_since = time.monotonic()
        liveness = Liveness(dead_after, owner_alive)
        # How long one XREAD may block before we look at the owner's heartbeat again.
        block_ms = int(max(0.05, min(1.0, dead_after / 4)) * 1000)
        while True:
            resp = cast(_ReadReply, await self._r.xread({log: last_id}, count=_BATCH, block=block_ms))
            if resp:
                idle_since = time.monotonic()
                for eid, fields in resp[0][1]:
                    last_id = eid.decode()
                    if b"end" in fields:
                        return
                    yield _seq(eid), fields[b"d"]
                continue
            st = await self.log_status(stream_id)
            consumed = _seq(last_id) + 1  # events at or before our position
            if st is not None and st.finished and st.count <= consumed:
                return  # finished with nothing after us (also when ``after`` was past the end)
            if st is not None and (st.finished or st.count > consumed):
                continue  # landed between the XREAD and the status: read it
            age = time.monotonic() - idle_since  # never claimed: judge by the last event
            if st is not None and st.heartbeat_age is not None:
                age = min(age, st.heartbeat_age)  # events landing are a sign of life too
            if liveness.gone(None if st is None else st.heartbeat_at, age):
                raise OwnerGone(f"stream {stream_id!r}: no heartbeat for over {dead_after:g}s")

    async def log_status(self, stream_id: str) -> LogStatus | None:
        log, meta = self._log_keys(stream_id)
        row = await self._status(keys=[meta, log])
        if not row:
            return None
        now, owner, beat, cancel, count, status = row
        stamp = None if beat is None else float(beat)
        age = None if stamp is None else max(0.0, float(now) - stamp)
        return LogStatus(status is not None, _s(status), _s(owner), age, int(count), _s(cancel) == "1", stamp)

    async def claim(self, stream_id: str, owner: str) -> None:
        log, meta = self._log_keys(stream_id)
        await self._beat(keys=[meta, log], args=[owner, self._ttl_ms, ""])

    async def heartbeat(self, stream_id: str, owner: str) -> bool:
        log, meta = self._log_keys(stream_id)
        return bool(await self._beat(keys=[meta, log], args=[owner, self._ttl_ms, "1"]))

    async def request_cancel(self, stream_id: str) -> bool:
        log, meta = self._log_keys(stream_id)
        return bool(await self._cancel(keys=[meta, log], args=[self._ttl_ms]))

    async def cancel_requested(self, stream_id: str) -> bool:
        return _s(await self._r.hget(self._k("meta", stream_id), "cancel")) == "1"

    def shared(self) -> RedisShared:
        """Cooldowns, in-flight counts and session pins in Redis: one view for every replica."""
        if self._shared is None:
            self._shared = RedisShared(self._r, self._prefix)
        return self._shared

    async def cache_get(self, key: str) -> bytes | None:
        body = await self._r.get(self._prefix + "cache:" + key)
        return body if isinstance(body, bytes) or body is None else body.encode()

    async def cache_put(self, key: str, body: bytes, ttl_seconds: float, max_entries: int) -> None:
        """The entry as a string with its PX; a sorted set by time stored keeps the bound: the
        oldest names past ``max_entries`` are popped and their entries deleted."""
        now = time.time()
        index = self._prefix + "cache-index"

        def build(pipe: Any) -> None:  # single-key commands: on a cluster the entry and the index may be apart
            pipe.set(self._prefix + "cache:" + key, body, px=max(1, int(ttl_seconds * 1000)))
            pipe.zadd(index, {key: now})
            pipe.zremrangebyscore(index, "-inf", now - ttl_seconds)  # names whose entries expired by themselves
            pipe.zcard(index)

        replies = await run_pipeline(self._r, build)
        over = int(replies[-1]) - max_entries
        if over > 0:
            oldest = cast(list[tuple[bytes, float]], await self._r.zpopmin(index, over))
            names = [self._prefix + "cache:" + name.decode() for name, _ in oldest]
            if names:

                def evict(pipe: Any) -> None:  # one DEL per entry: a multi-key DEL would cross slots on a cluster
                    for name in names:
                        pipe.delete(name)

                await run_pipeline(self._r, evict)

    async def expire(self) -> int:
        return 0  # every key carries its own PX/PEXPIRE

    async def close(self) -> None:
        await self._r.aclose()
