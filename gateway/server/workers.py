"""``--workers N``: N server processes on one port, each with its own listening socket.

Why not uvicorn's own ``workers=N``: it listens on one socket in the parent and every worker accepts
from it, so whichever worker wakes first takes the connection; measured on the bench, one worker of
two took 75–82 % of 64 keep-alive connections, and the busiest worker caps the whole. Here each
worker binds its own socket with ``SO_REUSEPORT`` and the kernel spreads new connections over the
listening sockets by a hash of the connection's addresses, evenly whatever each worker is doing.

The parent (this module's ``serve_workers``) holds a bound, never listening socket on the port (so
the port is taken, and a port of 0 becomes a real one every worker shares), starts the workers
(``multiprocessing`` spawn: a fresh interpreter each, nothing inherited but the environment),
restarts one that dies (and stops, exit code 1, when one cannot start at all), and on SIGTERM / SIGINT passes SIGTERM on and waits for them: each worker
then shuts down gracefully (gateway/server/serve.py: in-flight streams get their grace).

Each worker also listens on a private Unix socket in a run directory only this user can read
(``<dir>/worker-<i>.sock``): the siblings ask each other there for the figures kept per process
(gateway/telemetry/workers.py), so ``/metrics``, the console and the inspector answer for every
worker whichever one a caller reaches.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import Any

from gateway.telemetry.workers import socket_path

log = logging.getLogger("gateway")

RESTART_PAUSE = 1.0  # seconds between restarts of a worker that keeps dying (no busy loop)
EARLY_EXIT_SECONDS = 10.0  # a worker gone this soon after its start did not get going
EARLY_EXITS = 5  # so many of those in a row: the gateway stops (exit code 1) rather than loop


def reuseport_socket(host: str, port: int, bind: bool = True) -> socket.socket:
    """A TCP socket with SO_REUSEPORT (and SO_REUSEADDR), bound to (host, port), not listening yet:
    asyncio's ``create_server(sock=...)`` listens once the worker's app has started, so the kernel
    never hands a connection to a worker that cannot answer it yet."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if bind:
        sock.bind((host, port))
    sock.set_inheritable(False)
    return sock


def _worker(index: int, count: int, run_dir: str, host: str, port: int, options: dict[str, Any]) -> None:
    """One worker process: its own SO_REUSEPORT socket on the shared port and its private Unix socket."""
    import uvicorn

    os.environ.update(GATEWAY_WORKER_INDEX=str(index), GATEWAY_WORKER_COUNT=str(count), GATEWAY_WORKER_DIR=run_dir)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s %(name)s [worker {index}]: %(message)s")
    from gateway.server.serve import GracefulServer, app_from_env

    tcp = reuseport_socket(host, port)
    private = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = socket_path(run_dir, index)
    path.unlink(missing_ok=True)  # a restarted worker's predecessor left its socket file
    private.bind(str(path))
    config = uvicorn.Config(app_from_env(), **options)
    GracefulServer(config).run(sockets=[tcp, private])


def serve_workers(count: int, host: str, port: int, options: dict[str, Any]) -> int:
    """Run ``count`` workers until SIGTERM / SIGINT; see the module docstring."""
    try:
        holder = reuseport_socket(host, port)
    except OSError as exc:
        log.error("cannot bind %s:%d: %s", host, port, exc)
        return 1
    port = holder.getsockname()[1]
    os.environ["GATEWAY_SERVER__PORT"] = str(port)  # a port of 0 is now the real one, for every worker
    run_dir = tempfile.mkdtemp(prefix="gateway-workers-")  # mode 0700: only this user reaches the sockets
    context = multiprocessing.get_context("spawn")
    stopping = False

    def start(index: int) -> BaseProcess:
        proc = context.Process(
            target=_worker, args=(index, count, run_dir, host, port, options), name=f"gateway-worker-{index}"
        )
        proc.start()
        return proc

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for proc in procs:
            if proc.pid is not None and proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)

    procs = [start(i) for i in range(count)]
    started = [time.monotonic()] * count
    quick_exits = [0] * count  # exits in a row within EARLY_EXIT_SECONDS of starting
    failed = False
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    log.info("serving on http://%s:%d with %d workers (SO_REUSEPORT, one socket each)", host, port, count)
    try:
        while not stopping:
            wait([p.sentinel for p in procs], timeout=1.0)
            for i, proc in enumerate(procs):
                if proc.is_alive() or stopping:
                    continue
                quick = time.monotonic() - started[i] < EARLY_EXIT_SECONDS
                quick_exits[i] = quick_exits[i] + 1 if quick else 0
                if quick_exits[i] >= EARLY_EXITS:  # it cannot start (the store is out, say): do not loop
                    log.error("worker %d exited %d times in a row just after starting; stopping", i, EARLY_EXITS)
                    failed = True
                    stop(signal.SIGTERM, None)
                    break
                log.error("worker %d (pid %s) exited with %s; starting it again", i, proc.pid, proc.exitcode)
                time.sleep(RESTART_PAUSE)
                if not stopping:
                    procs[i], started[i] = start(i), time.monotonic()
        for proc in procs:
            proc.join()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        holder.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if failed else 0
