"""Workers: how keep-alive connections spread over ``--workers N``, and throughput against N.

    python bench/workers.py --workers 1 2 4 --gateway-cpus 1 --load-cpus 0 -c 64 -d 10
    python bench/workers.py --workers 2 --mode uvicorn      # uvicorn's own workers (one shared socket)

For each N it starts the fake upstream (bench/fake_upstream.py) and the gateway with N workers, the
gateway pinned to ``--gateway-cpus`` and the fake and this load generator to ``--load-cpus``
(``taskset`` / ``sched_setaffinity``: the two sides never compete for a core). Then:

* spread: ``--connections`` keep-alive connections open at once, one request each; which worker
  process holds each connection is read from ``/proc`` (the accepted socket's inode in
  ``/proc/net/tcp``, found among each worker's descriptors), so it works for either mode;
* throughput: loadgen.py's verified streams (``-c`` keep-alive connections, ``-d`` seconds), the
  streams per second and the gateway's CPU seconds per stream; the spread of those connections too.

``--mode reuseport`` (default) is the gateway's ``--workers`` (gateway/server/workers.py: one
SO_REUSEPORT socket per worker); ``--mode uvicorn`` is ``uvicorn.run(..., workers=N)`` (one socket
the workers share), the mode before. ``--json-out`` writes every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import loadgen  # noqa: E402
from run import _tree, cpu_seconds, free_port, gateway_python, stop, wait_http, write_config  # noqa: E402

UVICORN = (
    "import uvicorn; from gateway.server.protocol import uvicorn_options; "
    "uvicorn.run('gateway.server.serve:app_from_env', factory=True, workers={n}, host='127.0.0.1', port={port}, "
    "log_level='warning', access_log=False, lifespan='on', **uvicorn_options())"
)


def socket_inodes(pid: int) -> set[int]:
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    except OSError:
        pass
    return out


def accepted_by_client_port(server_port: int) -> dict[int, int]:
    """``{client port: inode}`` of the accepted sockets on ``server_port`` (``/proc/net/tcp``)."""
    out = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        local, remote, state, inode = parts[1], parts[2], parts[3], int(parts[9])
        if int(local.split(":")[1], 16) == server_port and inode and state != "0A":  # not the listening socket
            out[int(remote.split(":")[1], 16)] = inode
    return out


def workers_of(gw_pid: int) -> list[int]:
    """The gateway's worker processes: its descendants that hold a listening socket of their own
    (with one worker, the process itself)."""
    tree = [p for p in _tree(gw_pid) if p != gw_pid]
    return [p for p in tree if socket_inodes(p)] or [gw_pid]


def spread(gw_pid: int, server_port: int, client_ports: list[int]) -> dict[str, int]:
    """How many of ``client_ports``' connections each worker holds (by worker pid)."""
    by_port = accepted_by_client_port(server_port)
    owner = {inode: pid for pid in workers_of(gw_pid) for inode in socket_inodes(pid)}
    counts: Counter[str] = Counter()
    for port in client_ports:
        counts[str(owner.get(by_port.get(port, -1), "unknown"))] += 1
    return dict(sorted(counts.items()))


def measure_spread(gw_pid: int, port: int, connections: int) -> dict[str, int]:
    conns = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(connections)]
    try:
        for conn in conns:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: bench\r\n\r\n")
        for conn in conns:
            data = b""
            while b"}" not in data:
                data += conn.recv(4096)
        time.sleep(0.2)
        return spread(gw_pid, port, [c.getsockname()[1] for c in conns])
    finally:
        for conn in conns:
            conn.close()


def run_one(args: argparse.Namespace, n: int, tmp: Path) -> dict:
    fake_port, gw_port = free_port(), free_port()
    cfg = tmp / f"gateway-{n}.toml"
    write_config(cfg, gw_port, fake_port, [args.chunks])
    load = ["taskset", "-c", args.load_cpus] if args.load_cpus else []
    pin = ["taskset", "-c", args.gateway_cpus] if args.gateway_cpus else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env["PYTHONPATH"] = str(ROOT)
    fake_log, gw_log = tmp / f"fake-{n}.log", tmp / f"gateway-{n}.log"
    fake = subprocess.Popen(
        [
            *load,
            sys.executable,
            str(BENCH / "fake_upstream.py"),
            "--port",
            str(fake_port),
            "--chunks",
            str(args.chunks),
        ],
        stdout=fake_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    if args.mode == "uvicorn" and n > 1:
        env["GATEWAY_CONFIG"] = str(cfg)
        cmd = [*pin, gateway_python(), "-c", UVICORN.format(n=n, port=gw_port)]
    else:
        cmd = [*pin, gateway_python(), "-m", "gateway", "serve", "--config", str(cfg), "--workers", str(n)]
    gw = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=gw_log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{fake_port}/healthz", fake, 10, "the fake upstream", fake_log)
        wait_http(f"http://127.0.0.1:{gw_port}/healthz", gw, 60, "the gateway", gw_log)
        deadline = time.time() + 60
        while len(workers_of(gw.pid)) < n and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # every worker listening
        row: dict = {"workers": n, "mode": args.mode, "spread": measure_spread(gw.pid, gw_port, args.connections)}
        url = f"http://127.0.0.1:{gw_port}"
        loop = loadgen.new_loop()
        try:  # warm-up, then the measured run
            loop.run_until_complete(
                loadgen.run_load(url, args.dialect, f"bench-{args.upstream}", 8, 1.0, chunks=args.chunks)
            )
            cpu0 = cpu_seconds(gw.pid)
            under_load: dict[str, int] = {}

            async def sample_spread() -> None:  # the load generator's connections, mid-run
                await asyncio.sleep(args.duration / 2)
                under_load.update(spread(gw.pid, gw_port, list(accepted_by_client_port(gw_port))))

            async def both() -> loadgen.Result:
                load = loadgen.run_load(
                    url, args.dialect, f"bench-{args.upstream}", args.concurrency, args.duration, chunks=args.chunks
                )
                result, _ = await asyncio.gather(load, sample_spread())
                return result

            res = loop.run_until_complete(both())
            cpu = cpu_seconds(gw.pid) - cpu0
        finally:
            loop.close()
        row.update(
            spread_under_load=under_load,
            streams_per_s=round(res.streams_per_s, 1),
            verified=res.verified,
            errors=res.errors,
            ttfb_p50_ms=round(res.pct(50), 2),
            ttfb_p99_ms=round(res.pct(99), 2),
            gateway_cpu_ms_per_stream=round(1000 * cpu / max(1, res.verified), 3),
        )
        return row
    finally:
        stop(gw)
        stop(fake)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Connection spread and throughput of --workers N (see bench/README.md).")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--mode", choices=["reuseport", "uvicorn"], default="reuseport")
    ap.add_argument("--gateway-cpus", default="", help="taskset CPU list for the gateway (e.g. 1 or 2-5)")
    ap.add_argument("--load-cpus", default="", help="taskset CPU list for the fake and this load generator")
    ap.add_argument("--connections", type=int, default=64, help="keep-alive connections of the spread test")
    ap.add_argument("-c", "--concurrency", type=int, default=64)
    ap.add_argument("-d", "--duration", type=float, default=10.0)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--dialect", default="openai-chat", choices=loadgen.DIALECTS)
    ap.add_argument("--upstream", default="anthropic", choices=loadgen.DIALECTS)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    if args.load_cpus:
        os.sched_setaffinity(0, {int(c) for c in args.load_cpus.replace("-", ",").split(",")})
    rows = []
    with tempfile.TemporaryDirectory(prefix="gateway-workers-bench-") as tmp:
        for n in args.workers:
            row = run_one(args, n, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = rows[0]["streams_per_s"] or 1
    print(
        f"\n| workers ({args.mode}) | spread of {args.connections} keep-alive connections | spread of the {args.concurrency} under load | streams/s | × the first | gateway CPU ms/stream | errors |"
    )
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        share = " / ".join(str(v) for v in sorted(r["spread"].values(), reverse=True))
        loaded = " / ".join(str(v) for v in sorted(r["spread_under_load"].values(), reverse=True))
        print(
            f"| {r['workers']} | {share} | {loaded} | {r['streams_per_s']} | {r['streams_per_s'] / base:.2f} | {r['gateway_cpu_ms_per_stream']} | {r['errors']} |"
        )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
