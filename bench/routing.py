"""The routing cost per request of a route over several targets (issue 20), in process.

Times what ``attempts._open_balanced`` adds around the upstream call — ``plan`` (cooldowns, the
strategy, the affinity pin), ``admit`` (rpm), ``started`` / ``served`` / ``ended`` — for each
strategy, with the routing state in process memory (SQLite store) and in a real redis-server
(``--redis redis://127.0.0.1:6379/9``; one is started on a free port when redis-server is installed).

    .venv/bin/python bench/routing.py [-n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.ir import ChatRequest
from gateway.router import Resolved, Target
from gateway.routing import Routing
from gateway.store.shared import LocalShared, SharedState

TARGETS = (Target("claude", "sonnet", 3), Target("bedrock", "sonnet", 1, rpm=10**9), Target("vertex", "sonnet", 1))


def resolved(strategy: str, affinity: str) -> Resolved:
    return Resolved("smart", TARGETS, pool=3, strategy=strategy, balanced=True, affinity=affinity)


async def per_request_us(shared: SharedState, strategy: str, affinity: str, n: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per request; CPU time is what the gateway process spends, which a loaded
    machine inflates far less than the wall clock."""
    routing = Routing(shared)
    route = resolved(strategy, affinity)
    reqs = [ChatRequest("smart", session=f"s{i % 500}") for i in range(n)]
    started, cpu = time.perf_counter(), time.process_time()
    for req in reqs:
        plan = await routing.plan(req, route, set())
        target = plan.candidates[0]
        await routing.admit(route, target)
        await routing.started(route, target)
        await routing.served(route, target, plan, 0.2)
        await routing.ended(route, target)
    return (time.perf_counter() - started) / n * 1e6, (time.process_time() - cpu) / n * 1e6


def start_redis() -> tuple[subprocess.Popen[bytes] | None, str | None]:
    exe = shutil.which("redis-server")
    if exe is None:
        return None, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
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
    cases = [("weighted", "none"), ("weighted", "session"), ("least_busy", "none"), ("latency", "none"), ("ordered", "none")]
    print("| strategy | affinity | in-process µs/request (CPU) | Redis µs/request wall (CPU) | Redis round trips/request |")
    print("|---|---|---|---|---|")
    try:
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
        if redis_store:
            ping = redis_store._r
            t0 = time.perf_counter()
            for _ in range(1000):
                await ping.ping()
            print(f"(one Redis round trip, PING, on this machine now: {(time.perf_counter() - t0) * 1000:.0f} µs)")
        for strategy, affinity in cases:
            local, local_cpu = await per_request_us(LocalShared(), strategy, affinity, args.n)
            line = f"| {strategy} | {affinity} | {local:.1f} ({local_cpu:.1f}) |"
            if redis_store:
                n = max(1000, args.n // 10)
                calls[0] = 0
                wall, cpu = await per_request_us(redis_store.shared(), strategy, affinity, n)
                line += f" {wall:.0f} ({cpu:.0f}) | {calls[0] / n:.2f} |"
            print(line)
        if redis_store:
            await redis_store.close()
    finally:
        if proc is not None:
            proc.terminate()


if __name__ == "__main__":
    asyncio.run(main())
