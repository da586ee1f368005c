"""The routing cost per request of a route over several targets (issue 20), in process.

Times what ``attempts._open_balanced`` adds around the upstream call — ``plan`` (cooldowns, the
strategy, the affinity pin), ``admit`` (the targets' rpm/tpm), ``started`` / ``served`` /
``ended`` — for each strategy, with the routing state in process memory, with the target limits
on a SQLite file store, and in a real redis-server (``--redis redis://127.0.0.1:6379/9``; one is
started on a free port when redis-server is installed). The ``limited`` rows give every target
an rpm and a tpm (never reached), so each request holds and settles one target's limits.

    .venv/bin/python bench/routing.py [-n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.events import Usage
from gateway.ir import ChatRequest
from gateway.routing.router import Resolved, Target
from gateway.routing.targets import Routing
from gateway.store.shared import LocalShared, SharedState

TARGETS = (Target("claude", "sonnet", 3), Target("bedrock", "sonnet", 1, rpm=10**9), Target("vertex", "sonnet", 1))
LIMITED = tuple(Target(t.provider, t.upstream_model, t.weight, rpm=10**9, tpm=10**12) for t in TARGETS)


def resolved(strategy: str, affinity: str, targets: tuple[Target, ...] = TARGETS) -> Resolved:
    return Resolved("smart", targets, pool=3, strategy=strategy, balanced=True, affinity=affinity)


async def per_request_us(
    shared: SharedState, counters: Any, strategy: str, affinity: str, n: int, limited: bool = False
) -> tuple[float, float]:
    """(wall µs, CPU µs) per request; CPU time is what the gateway process spends, which a loaded
    machine inflates far less than the wall clock. ``counters``: the store holding the target
    limits (None: this process)."""
    routing = Routing(shared)
    routing.counters = counters
    new_admit = "req" in inspect.signature(routing.admit).parameters  # (the bench also runs on the code before)
    route = resolved(strategy, affinity, LIMITED if limited else TARGETS)
    reqs = [ChatRequest("smart", session=f"s{i % 500}") for i in range(n)]
    usage = Usage(input=10, output=20)
    started, cpu = time.perf_counter(), time.process_time()
    for req in reqs:
        plan = await routing.plan(req, route, set())
        target = plan.candidates[0]
        if new_admit:
            hold = await routing.admit(route, target, req)
            await routing.started(route, target)
            await routing.served(route, target, plan, 0.2)
            await routing.ended(route, target, usage, hold)
        else:
            await routing.admit(route, target)  # type: ignore[call-arg]
            await routing.started(route, target)
            await routing.served(route, target, plan, 0.2)
            await routing.ended(route, target, usage)
    return (time.perf_counter() - started) / n * 1e6, (time.process_time() - cpu) / n * 1e6


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
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--redis")
    args = parser.parse_args()
    proc, url = (None, args.redis) if args.redis else start_redis()
    cases = [
        ("weighted", "none", False),
        ("weighted", "session", False),
        ("least_busy", "none", False),
        ("latency", "none", False),
        ("ordered", "none", False),
        ("weighted", "none", True),
        ("ordered", "none", True),
    ]
    print(
        "| strategy | affinity | targets | in-process µs/request (CPU) | SQLite file µs/request wall (CPU) | Redis µs/request wall (CPU) | Redis round trips/request |"
    )
    print("|---|---|---|---|---|---|---|")
    tmp = tempfile.TemporaryDirectory()
    try:
        from gateway.store.open import open_store

        sqlite_store = open_store(f"sqlite:///{tmp.name}/bench.db", 3600)
        redis_store = None
        if url:
            from gateway.store.redis import RedisStore

            redis_store = RedisStore(url, 3600)
            calls = [0]
            execute = redis_store._r.execute_command

            async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
                calls[0] += 1
                return await execute(*args, **kwargs)

            redis_store._r.execute_command = counted  # type: ignore[method-assign]
            from redis.asyncio.client import Pipeline

            pipelined = Pipeline.execute

            async def counted_pipeline(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                calls[0] += 1  # a pipeline (the settle of a target's hold) is one round trip too
                return await pipelined(self, *args, **kwargs)

            Pipeline.execute = counted_pipeline  # type: ignore[method-assign]
        if redis_store:
            ping = redis_store._r
            t0 = time.perf_counter()
            for _ in range(1000):
                await ping.ping()
            print(f"(one Redis round trip, PING, on this machine now: {(time.perf_counter() - t0) * 1000:.0f} µs)")
        for strategy, affinity, limited in cases:
            local, local_cpu = await per_request_us(LocalShared(), None, strategy, affinity, args.n, limited)
            n = max(1000, args.n // 10)
            lite, lite_cpu = await per_request_us(sqlite_store.shared(), sqlite_store, strategy, affinity, n, limited)
            line = f"| {strategy} | {affinity} | {'rpm+tpm each' if limited else 'one with rpm'} | {local:.1f} ({local_cpu:.1f}) | {lite:.0f} ({lite_cpu:.0f}) |"
            if redis_store:
                calls[0] = 0
                wall, cpu = await per_request_us(redis_store.shared(), redis_store, strategy, affinity, n, limited)
                line += f" {wall:.0f} ({cpu:.0f}) | {calls[0] / n:.2f} |"
            print(line)
        await sqlite_store.close()
        if redis_store:
            await redis_store.close()
    finally:
        tmp.cleanup()
        if proc is not None:
            proc.terminate()


if __name__ == "__main__":
    asyncio.run(main())
