"""What a named key with limits and a budget adds to one request: authentication, admission (the
atomic reserve in the store), pricing at finish and settlement — measured on the real classes
against a SQLite file, SQLite ``:memory:`` and a redis-server on loopback.

    .venv/bin/python bench/keys_cost.py [-n 2000] [--redis redis://127.0.0.1:6379/0]

Without ``--redis`` a redis-server is started on a free port when the binary is installed.
Prints, per store, the mean wall time and CPU time per request of the whole added path (the
reserve awaited one request at a time, as the relay does; settlements drained as the ledger does)
and the same path for a key without limits (no store round trip before the upstream).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.dialects.base import RequestMeta
from gateway.dialects.registry import codec_for
from gateway.server.app import create_state
from gateway.settings import Settings
from gateway.store import open_store
from gateway.telemetry.observe import AccessRecord

SECRET = "bench-key"
BODY = {
    "model": "smart",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "Say hello to the benchmark, in a few words."}],
}


def settings(url: str, limited: bool) -> Settings:
    key: dict[str, Any] = {"name": "bench", "key_sha256": hashlib.sha256(SECRET.encode()).hexdigest()}
    if limited:
        key.update(budget_usd=1e9, budget_period="month", rpm=10**9, tpm=10**12, max_parallel=10**6)
    return Settings(
        server={"access_log": False},
        auth={"keys_env": ""},
        store={"url": url},
        keys=[key],
        providers=[{"name": "claude", "dialect": "anthropic", "base_url": "http://127.0.0.1:9"}],
        routes=[{"model": "smart", "provider": "claude", "upstream_model": "claude-sonnet-4-5"}],
    )


async def run(url: str, n: int, limited: bool) -> tuple[float, float]:
    state = create_state(settings(url, limited))
    store = open_store(url, 3600)
    state.ledger.store = state.limiter.store = store
    state.ledger.prices.warm()
    await state.keys_ring.refresh(store)
    codec = codec_for("anthropic")
    scope = {"headers": [(b"x-api-key", SECRET.encode())], "path": "/v1/messages"}
    req = codec.parse_request(dict(BODY), RequestMeta())
    resolved = state.router.resolve("smart")

    async def one(i: int) -> None:
        record = AccessRecord(f"req_{i}", "anthropic", "/v1/messages")
        spec = await state.auth.authenticate(scope, {})
        assert spec is not None
        record.key = spec.name
        await state.limiter.admit(spec, req, resolved, record, "anthropic", [])
        record.provider, record.upstream_model, record.route = "claude", "claude-sonnet-4-5", "smart"
        record.attempts = [
            {"provider": "claude", "upstream_model": "claude-sonnet-4-5", "status": 200, "error": None, "ms": 1.0}
        ]
        record.input_tokens, record.output_tokens, record.cache_read_tokens, record.cache_write_tokens = (
            1200,
            80,
            1000,
            0,
        )
        state.observer.finish(record)
        await asyncio.sleep(0)  # a server yields between requests: the ledger's drain runs

    for i in range(200):  # warm up
        await one(i)
    await state.ledger.flush()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        await one(1000 + i)
    await state.ledger.flush()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await store.close()
    return wall / n * 1e6, cpu / n * 1e6


def start_redis() -> tuple[subprocess.Popen[bytes] | None, str | None]:
    exe = shutil.which("redis-server")
    if exe is None:
        return None, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    return None, None


async def baseline(n: int) -> tuple[float, float]:
    """Observer.finish without a ledger: what every request already cost before named keys."""
    state = create_state(settings("sqlite://:memory:", False))
    state.observer.ledger = None
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        record = AccessRecord(f"req_{i}", "anthropic", "/v1/messages")
        record.provider, record.input_tokens, record.output_tokens = "claude", 1200, 80
        state.observer.finish(record)
    return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6


def calibrate(tmp: str, redis_url: str | None) -> str:
    """What this machine pays right now for the two primitives the path is made of: one one-row
    SQLite write transaction on a WAL file, and one Redis round trip (PING) — so the table can be
    read against the machine's load."""
    import sqlite3

    db = sqlite3.connect(os.path.join(tmp, "cal.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID")
    n = 2000
    started = time.perf_counter()
    for _ in range(n):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET n = n + 1")
        db.execute("COMMIT")
    sqlite_us = (time.perf_counter() - started) / n * 1e6
    out = f"one-row SQLite write transaction: {sqlite_us:.0f} µs"
    if redis_url:
        import redis

        r = redis.Redis.from_url(redis_url)
        started = time.perf_counter()
        for _ in range(n):
            r.ping()
        out += f"; one Redis round trip (sync PING): {(time.perf_counter() - started) / n * 1e6:.0f} µs"
    return out + f"; load average {os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--redis")
    args = parser.parse_args()
    proc, url = (None, args.redis) if args.redis else start_redis()
    tmp = tempfile.mkdtemp()
    stores = [("sqlite file", f"sqlite:///{os.path.join(tmp, 'bench.db')}"), ("sqlite :memory:", "sqlite://:memory:")]
    if url:
        stores.append(("redis (loopback)", url))
    try:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        print("calibration:", calibrate(tmp, url))
        base = asyncio.run(baseline(args.n))
        print(f"baseline Observer.finish (no keys): {base[0]:.1f} µs wall, {base[1]:.1f} µs CPU per request")
        print("| store | key | added wall µs/request | added CPU µs/request |")
        print("|---|---|---|---|")
        for label, store_url in stores:
            for limited in (True, False):
                if store_url.startswith("redis"):
                    import redis

                    redis.Redis.from_url(store_url).flushdb()
                wall, cpu = asyncio.run(run(store_url, args.n, limited))
                kind = "budget + rpm + tpm + max_parallel" if limited else "named, no limits"
                print(f"| {label} | {kind} | {wall - base[0]:.0f} | {cpu - base[1]:.0f} |")
    finally:
        if proc is not None:
            proc.terminate()


if __name__ == "__main__":
    main()
