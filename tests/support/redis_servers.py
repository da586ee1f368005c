"""Real Redis topologies for tests, from Debian's ``redis-server`` binary on free loopback ports.

``SentinelGroup``: one master, one replica and three sentinels (``redis-server --sentinel``), quorum
2, a master declared down after 1 s. Each process has its own working directory (a sentinel rewrites
its config file). Persistence is off everywhere.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

MASTER = "mymaster"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis process did not listen on {port}") from None
            time.sleep(0.05)


class SentinelGroup:
    def __init__(self, root: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise FileNotFoundError("redis-server")
        self.exe = exe
        self.root = root
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.master_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]

    def _start(self, port: int, args: list[str], conf: str | None = None) -> None:
        work = self.root / str(port)
        work.mkdir(parents=True, exist_ok=True)
        cmd = [self.exe]
        if conf is not None:
            (work / "sentinel.conf").write_text(conf)
            cmd += [str(work / "sentinel.conf"), "--sentinel"]
        cmd += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(work), *args]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs[port] = proc
        wait_port(port, proc)

    def start(self) -> SentinelGroup:
        data = ["--save", "", "--appendonly", "no"]
        self._start(self.master_port, data)
        self._start(self.replica_port, [*data, "--replicaof", "127.0.0.1", str(self.master_port)])
        conf = (
            f"sentinel monitor {MASTER} 127.0.0.1 {self.master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} 1000\n"
            f"sentinel failover-timeout {MASTER} 4000\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        for port in self.sentinel_ports:
            self._start(port, [], conf)
        self.wait_synced()
        return self

    def wait_synced(self, timeout: float = 15.0) -> None:
        """Until the replica has caught up and every sentinel knows the replica."""
        import redis

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with redis.Redis(port=self.replica_port) as r:
                    info = r.info("replication")
                ok = info.get("master_link_status") == "up"
                for port in self.sentinel_ports:
                    with redis.Redis(port=port) as s:
                        ok = ok and len(s.sentinel_slaves(MASTER)) >= 1
                if ok:
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise RuntimeError("sentinel group did not settle")

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def current_master(self) -> int:
        import redis

        with redis.Redis(port=self.sentinel_ports[0]) as s:
            _host, port = s.sentinel_get_master_addr_by_name(MASTER)
        return int(port)

    def kill(self, port: int) -> None:
        proc = self.procs.pop(port)
        proc.kill()
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()
