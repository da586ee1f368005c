"""Limits and spend on Redis: one Lua script per reserve (every limit checked and held, or none —
one round trip, atomic for all replicas), one pipeline of two script calls per settlement per batch.

Keys of one named key share the hash tag ``{name}``: ``gw:rl:{name}:leases`` (zset lease → expiry),
``…:lease`` (hash lease → "tokens|cost|period|minute"), ``…:r:<minute>`` / ``…:t:<minute>``
(request / token counts, expiring after two minutes), ``…:b:<period>`` (hash spent, held), the
key's request records ``gw:requests:{name}``. Spend is kept in hourly hashes ``gw:{spend}:h:<hour>``
(field ``key␟model␟provider␟route␟measure``) indexed by the zset ``gw:{spend}:hours``, with the
records of all keys in ``gw:{spend}:requests`` (capped lists): one hash slot for what a script
touches together, on a Redis Cluster too (a gateway that wrote ``gw:spend:<hour>`` before these
names has that history left unread; it is not migrated).

The arithmetic mirrors ``gateway.store.counters.decide`` line by line (the store tests run the same
cases on both backends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import orjson

from gateway.store.counters import (
    SPEND_FIELDS,
    WINDOW,
    Ask,
    Hold,
    Settlement,
    Verdict,
    hour_of,
    minute_of,
    settlement_values,
)
from gateway.store.redis_client import run_pipeline

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

    from gateway.store.redis_client import StoreClient

SEP = "\x1f"

_RELEASE = """
local function int(x) return string.format('%.0f', x) end
local function release(prefix, leases, data, lease)
  local d = redis.call('HGET', data, lease)
  redis.call('ZREM', leases, lease)
  if not d then return end
  redis.call('HDEL', data, lease)
  local tokens, cost, period, minute = string.match(d, '^(%-?%d+)|(%-?%d+)|([^|]*)|(%-?%d+)$')
  tokens = tonumber(tokens); cost = tonumber(cost)
  if cost > 0 and period ~= '' then
    local b = prefix .. 'b:' .. period
    local held = tonumber(redis.call('HGET', b, 'held') or '0') - cost
    if held < 0 then held = 0 end
    redis.call('HSET', b, 'held', int(held))
  end
  if tokens > 0 then
    local t = prefix .. 't:' .. minute
    if redis.call('EXISTS', t) == 1 then
      local n = redis.call('DECRBY', t, int(tokens))
      if n < 0 then redis.call('SET', t, 0, 'KEEPTTL') end
    end
  end
end
"""

_RESERVE = (
    _RELEASE
    + """
local prefix = ARGV[1]
local now = tonumber(ARGV[2]); local lease = ARGV[3]; local lease_exp = tonumber(ARGV[4])
local tokens = tonumber(ARGV[5]); local cost = tonumber(ARGV[6]); local period = ARGV[7]
local period_end = tonumber(ARGV[8]); local rpm = tonumber(ARGV[9]); local tpm = tonumber(ARGV[10])
local maxp = tonumber(ARGV[11]); local budget = tonumber(ARGV[12]); local minute = tonumber(ARGV[13])
local W = tonumber(ARGV[14])
local leases, data = KEYS[1], KEYS[2]
for _, l in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now)) do release(prefix, leases, data, l) end
if redis.call('HEXISTS', data, lease) == 1 then
  -- this very reservation sent again (its first reply was lost): already held, hold nothing more
  local b = {false, false}
  if period ~= '' then b = redis.call('HMGET', KEYS[7], 'spent', 'held') end
  return {1, '', 0, -1, -1, b[1] or '0', b[2] or '0', 0}
end
local elapsed = now - minute * W
local function window(limit, prev, cur, need)
  local used = prev * (W - elapsed) / W + cur
  local remaining = math.floor(limit - used)
  if remaining < 0 then remaining = 0 end
  if used + need <= limit then return 1, 0, remaining end
  if need > limit then return 0, W, remaining end
  if cur + need > limit then
    local later = 0
    if cur > 0 then later = W * (1 - (limit - need) / cur) end
    if later < 0 then later = 0 end
    return 0, W - elapsed + later, remaining
  end
  local e2 = elapsed
  if prev > 0 then e2 = W * (1 - (limit - cur - need) / prev) end
  local wait = e2 - elapsed
  if wait < 0.001 then wait = 0.001 end
  return 0, wait, remaining
end
local spent, held = 0, 0
if period ~= '' then
  local b = redis.call('HMGET', KEYS[7], 'spent', 'held')
  spent = tonumber(b[1] or '0'); held = tonumber(b[2] or '0')
end
local reason, wait = nil, -1
local req_rem, tok_rem, too_large = -1, -1, 0
local function refuse(r, w)
  if reason == 'budget' then return end
  if r == 'budget' or w > wait then reason = r; wait = w end
end
if maxp >= 0 and redis.call('ZCARD', leases) >= maxp then refuse('parallel', 1) end
if rpm >= 0 then
  local fits, w, rem = window(rpm, tonumber(redis.call('GET', KEYS[3]) or '0'), tonumber(redis.call('GET', KEYS[4]) or '0'), 1)
  req_rem = rem
  if fits == 0 then refuse('rpm', w) end
end
if tpm >= 0 then
  local fits, w, rem = window(tpm, tonumber(redis.call('GET', KEYS[5]) or '0'), tonumber(redis.call('GET', KEYS[6]) or '0'), tokens)
  tok_rem = rem
  if fits == 0 then
    if tokens > tpm then too_large = 1 end
    refuse('tpm', w)
  end
end
if budget >= 0 and spent + held + cost > budget then
  local w = -1
  if period_end >= 0 then w = period_end - now; if w < 1 then w = 1 end end
  reason = 'budget'; wait = w
end
if reason then
  return {0, reason, math.floor(wait * 1000), req_rem, tok_rem, int(spent), int(held), too_large}
end
redis.call('ZADD', leases, lease_exp, lease)
redis.call('HSET', data, lease, int(tokens) .. '|' .. int(cost) .. '|' .. period .. '|' .. int(minute))
redis.call('PEXPIRE', leases, math.floor((lease_exp - now) * 1000) + 60000)
redis.call('PEXPIRE', data, math.floor((lease_exp - now) * 1000) + 60000)
redis.call('INCR', KEYS[4]); redis.call('PEXPIRE', KEYS[4], 2 * W * 1000 + 5000)
if tokens > 0 then redis.call('INCRBY', KEYS[6], int(tokens)); redis.call('PEXPIRE', KEYS[6], 2 * W * 1000 + 5000) end
if period ~= '' then redis.call('HINCRBY', KEYS[7], 'held', int(cost)) end
if req_rem > 0 then req_rem = req_rem - 1 end
if tok_rem >= 0 then tok_rem = tok_rem - tokens; if tok_rem < 0 then tok_rem = 0 end end
return {1, '', 0, req_rem, tok_rem, int(spent), int(held + cost), 0}
"""
)

# The settlement, in two scripts so that each keeps its keys in one hash slot (Redis Cluster):
#
# * _SETTLE_KEY, tag {name}: release the hold, count the tokens in the minute window, add the cost
#   to the budget period, the key's own request record; returns the period's spent.
# * _SETTLE_SPEND, tag {spend}: the hourly spend bucket, the hours index, the request record of all.
#
# Each part first sets ``done:<settlement id>`` (NX, kept SETTLED_MS) in its own slot and does
# nothing when it was already there, so either may be sent again — by the client's retry after a
# reply lost in a failover, or by a pipeline rebuilt after one node failed while another had
# answered — and is still counted exactly once. A settlement whose first part landed and whose
# second did not (its node down past the retry) has its budget right and its spend bucket short;
# the error is logged by the ledger.
_SETTLE_KEY = (
    _RELEASE
    + """
local prefix, lease, total, cost, period = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local record, kept = ARGV[6], tonumber(ARGV[7])
local first = redis.call('SET', KEYS[6], '1', 'NX', 'PX', ARGV[8])
if first and lease ~= '' then
  release(prefix, KEYS[1], KEYS[2], lease)
  if total > 0 then redis.call('INCRBY', KEYS[4], int(total)); redis.call('PEXPIRE', KEYS[4], 125000) end
end
local spent = '0'
if period ~= '' then
  if first and cost > 0 then redis.call('HINCRBY', KEYS[3], 'spent', ARGV[4]) end
  spent = redis.call('HGET', KEYS[3], 'spent') or '0'
end
if first and record ~= '' then redis.call('LPUSH', KEYS[5], record); redis.call('LTRIM', KEYS[5], 0, kept - 1) end
return spent
"""
)

_SETTLE_SPEND = """
local dims, record, kept, hour = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[5]) then return 0 end
if ARGV[6] == '1' then
  local names = {%FIELDS%}
  for i, name in ipairs(names) do
    redis.call('HINCRBY', KEYS[1], dims .. name, ARGV[6 + i])
  end
  redis.call('ZADD', KEYS[2], hour, hour)
end
if record ~= '' then redis.call('LPUSH', KEYS[3], record); redis.call('LTRIM', KEYS[3], 0, kept - 1) end
return 1
""".replace("%FIELDS%", ", ".join(f"'{f}'" for f in SPEND_FIELDS))

# KEYS: records, version   ARGV: name, record — a script rather than MULTI (one slot, see _version)
_PUT_KEY_RECORD = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return redis.call('INCR', KEYS[2])
"""

SETTLED_MS = 60_000  # how long a settlement's "done" marker outlives it: well past any retry (~6 s)


def _num(value: Any) -> int:
    return int(value.decode() if isinstance(value, bytes) else value)


class RedisCounters:
    """The limits-and-spend half of ``RedisStore``."""

    requests_kept: int = 10000

    if TYPE_CHECKING:
        _r: StoreClient
        _prefix: str

    def _init_counters(self) -> None:
        self._reserve_script = self._r.register_script(_RESERVE)
        self._settle_key_script = self._r.register_script(_SETTLE_KEY)
        self._settle_spend_script = self._r.register_script(_SETTLE_SPEND)
        self._key_record_script = self._r.register_script(_PUT_KEY_RECORD)

    def _rl(self, key: str) -> str:
        return f"{self._prefix}rl:{{{key}}}:"

    async def reserve(self, ask: Ask) -> Verdict:
        p = self._rl(ask.key)
        minute = minute_of(ask.now)
        keys = [
            p + "leases",
            p + "lease",
            f"{p}r:{minute - 1}",
            f"{p}r:{minute}",
            f"{p}t:{minute - 1}",
            f"{p}t:{minute}",
            f"{p}b:{ask.period}",
        ]

        def opt(value: int | None) -> int:
            return -1 if value is None else value

        row = await self._reserve_script(
            keys=keys,
            args=[
                p,
                repr(ask.now),
                ask.lease,
                repr(ask.now + ask.lease_seconds),
                ask.tokens,
                ask.cost_nano,
                ask.period,
                -1 if ask.period_end is None else repr(ask.period_end),
                opt(ask.rpm),
                opt(ask.tpm),
                opt(ask.max_parallel),
                opt(ask.budget_nano),
                minute,
                repr(WINDOW),
            ],
        )
        ok, reason, wait_ms, req_rem, tok_rem, spent, held, too_large = row
        reason = reason.decode() if isinstance(reason, bytes) else reason
        v = Verdict(
            ok=bool(ok),
            reason=reason or None,
            retry_after=None if int(wait_ms) < 0 else int(wait_ms) / 1000,
            requests_remaining=None if int(req_rem) < 0 else int(req_rem),
            tokens_remaining=None if int(tok_rem) < 0 else int(tok_rem),
            reset_at=(minute + 1) * WINDOW,
            spent_nano=_num(spent),
            held_nano=_num(held),
            too_large=bool(too_large),
        )
        if v.ok:
            v.retry_after = None
            v.hold = Hold(ask.key, ask.lease, ask.period, minute, ask.tokens, ask.cost_nano)
        return v

    def _spend(self) -> str:
        """``gw:{spend}:``: the spend buckets and the request records of all keys, one slot."""
        return self._prefix + "{spend}:"

    def _settle_calls(self, s: Settlement, sid: str) -> list[tuple[AsyncScript, list[str], list[Any]]]:
        """The (script, keys, args) of each part of ``s`` that has something to do."""
        calls: list[tuple[AsyncScript, list[str], list[Any]]] = []
        record = orjson.dumps(s.record) if s.logged else b""
        if s.key:
            p = self._rl(s.key)
            keys = [
                p + "leases",
                p + "lease",
                f"{p}b:{s.period}",
                f"{p}t:{minute_of(s.now)}",
                f"{self._prefix}requests:{{{s.key}}}",
                p + "done:" + sid,
            ]
            lease = s.hold.lease if s.hold is not None else ""
            args = [p, lease, s.input + s.output, s.cost_nano, s.period, record, self.requests_kept, SETTLED_MS]
            calls.append((self._settle_key_script, keys, args))
        if s.counted or record:
            g = self._spend()
            hour = hour_of(s.now)
            dims = SEP.join((s.key, s.model, s.provider, s.route)) + SEP
            keys = [f"{g}h:{hour}", g + "hours", g + "requests", g + "done:" + sid]
            args = [dims, record, self.requests_kept, hour, SETTLED_MS, "1" if s.counted else "0"]
            calls.append((self._settle_spend_script, keys, [*args, *settlement_values(s)]))
        return calls

    async def settle(self, items: list[Settlement]) -> list[int]:
        """Both parts of every settlement in one pipeline (one round trip per node); the period's
        spent of each from its first part (0 without a named key)."""
        calls = [self._settle_calls(s, s.id) for s in items]
        flat = [call for parts in calls for call in parts]
        if len(flat) == 1:  # (a route target's hold, settled as its answer ends: no pipeline to build)
            script, keys, args = flat[0]
            results = [await script(keys=keys, args=args)]
        else:

            def build(pipe: Any) -> None:
                for script, keys, args in flat:
                    # (execute_command: a cluster pipeline refuses its evalsha method, not the command)
                    pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                    if hasattr(pipe, "scripts"):  # one server / Sentinel: redis-py loads them before executing
                        pipe.scripts.add(script)

            results = await run_pipeline(self._r, build, scripts=(self._settle_key_script, self._settle_spend_script))
        out: list[int] = []
        i = 0
        for s, parts in zip(items, calls):
            out.append(_num(results[i]) if s.key else 0)
            i += len(parts)
        return out

    async def budget_state(self, key: str, period: str) -> tuple[int, int]:
        spent, held = await self._r.hmget(f"{self._rl(key)}b:{period}", "spent", "held")
        return (_num(spent) if spent is not None else 0, _num(held) if held is not None else 0)

    async def spend_buckets(self, start_hour: int, end_hour: int, key: str | None) -> list[tuple[Any, ...]]:
        g = self._spend()
        hours = [_num(h) for h in await self._r.zrangebyscore(g + "hours", start_hour, end_hour - 1)]
        if not hours:
            return []

        def build(pipe: Any) -> None:
            for hour in hours:
                pipe.hgetall(f"{g}h:{hour}")

        maps = await run_pipeline(self._r, build)
        rows: dict[tuple[Any, ...], list[int]] = {}
        index = {name: i for i, name in enumerate(SPEND_FIELDS)}
        for hour, fields in zip(hours, maps):
            for raw, value in fields.items():
                k, model, provider, route, measure = raw.decode().split(SEP)
                if key is not None and k != key:
                    continue
                rows.setdefault((hour, k, model, provider, route), [0] * len(SPEND_FIELDS))[index[measure]] += _num(
                    value
                )
        return [(*dims, *values) for dims, values in rows.items()]

    async def recent_requests(self, key: str | None, limit: int) -> list[dict[str, Any]]:
        name = self._spend() + "requests" if key is None else f"{self._prefix}requests:{{{key}}}"
        return [orjson.loads(b) for b in await self._r.lrange(name, 0, max(limit, 1) - 1)]

    async def key_records(self) -> dict[str, dict[str, Any]]:
        raw = cast(dict[bytes, bytes], await self._r.hgetall(self._prefix + "keys"))
        return {k.decode(): orjson.loads(v) for k, v in raw.items()}

    async def put_key_record(self, name: str, record: dict[str, Any]) -> None:
        await self._key_record_script(keys=[self._prefix + "keys", self._version()], args=[name, orjson.dumps(record)])

    def _version(self) -> str:
        """``{gw:keys}:version``: its tag is the whole name of the records' hash ``gw:keys``, so
        both are in one slot and change in one script on a cluster too."""
        return "{" + self._prefix + "keys}:version"

    async def key_version(self) -> int:
        value = await self._r.get(self._version())
        return 0 if value is None else _num(value)
