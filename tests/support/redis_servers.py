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
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


class RedisClusterGroup:
    """A Redis Cluster of three masters and three replicas (one each), built by hand.

    Each node is ``redis-server --cluster-enabled yes`` in its own directory (its nodes.conf);
    the slots are assigned with ``CLUSTER ADDSLOTSRANGE``, the nodes introduced with
    ``CLUSTER MEET`` and the replicas attached with ``CLUSTER REPLICATE`` — what
    ``redis-cli --cluster create`` does, without needing redis-cli. ``cluster-node-timeout`` is
    1 s so a killed master's replica takes over in a few seconds.
    """

    NODE_TIMEOUT_MS = 1000

    def __init__(self, root: Path, password: str | None = None) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise FileNotFoundError("redis-server")
        self.exe = exe
        self.root = root
        self.password = password  # requirepass on every node (and masterauth for the replicas)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.ports = [free_port() for _ in range(6)]
        self.bus_ports = {port: free_port() for port in self.ports}  # not port + 10000: that may pass 65535

    def _start(self, port: int) -> None:
        work = self.root / str(port)
        work.mkdir(parents=True, exist_ok=True)
        cmd = [
            self.exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(work),
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(work / "nodes.conf"),
            "--cluster-node-timeout",
            str(self.NODE_TIMEOUT_MS),
            "--cluster-port",
            str(self.bus_ports[port]),
            "--repl-diskless-sync-delay",
            "0",  # a replica syncs at once (the default waits 5 s for more replicas to join)
        ]
        if self.password is not None:
            cmd += ["--requirepass", self.password, "--masterauth", self.password]
        self.procs[port] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self) -> RedisClusterGroup:
        import redis

        for port in self.ports:
            self._start(port)
        for port in self.ports:
            wait_port(port, self.procs[port])
        masters, replicas = self.ports[:3], self.ports[3:]
        clients = {port: redis.Redis(port=port, password=self.password, decode_responses=True) for port in self.ports}
        try:
            bounds = [0, 5461, 10923, 16384]
            for i, port in enumerate(masters):
                clients[port].execute_command("CLUSTER ADDSLOTSRANGE", bounds[i], bounds[i + 1] - 1)
            for port in self.ports[1:]:
                clients[self.ports[0]].execute_command("CLUSTER MEET", "127.0.0.1", port, self.bus_ports[port])
            ids = {port: clients[port].execute_command("CLUSTER MYID") for port in self.ports}
            self._until(lambda: all(self._known(clients[p]) == 6 for p in self.ports), "the nodes did not meet")
            for master, replica in zip(masters, replicas):
                clients[replica].execute_command("CLUSTER REPLICATE", ids[master])
            self._until(lambda: self._settled(clients), "the cluster did not settle")
        finally:
            for client in clients.values():
                client.close()
        return self

    @staticmethod
    def _info(client: Any) -> dict[str, Any]:
        info: dict[str, Any] = client.execute_command("CLUSTER INFO")  # redis-py parses it into a dict
        return info

    def _known(self, client: Any) -> int:
        return int(self._info(client).get("cluster_known_nodes", 0))

    def _settled(self, clients: dict[int, Any]) -> bool:
        for port in self.ports:
            if port in self.ports[3:] and clients[port].info("replication").get("master_link_status") != "up":
                return False
            if self._info(clients[port]).get("cluster_state") != "ok":
                return False
        return True

    @staticmethod
    def _until(ok: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ok():
                    return
            except redis.RedisError:
                pass
            time.sleep(0.05)
        raise RuntimeError(what)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def masters(self) -> list[int]:
        """The ports of the live nodes that are masters now."""
        import redis

        out = []
        for port in self.procs:
            try:
                with redis.Redis(port=port, password=self.password) as r:
                    if r.info("replication").get("role") == "master":
                        out.append(port)
            except redis.RedisError:
                continue
        return sorted(out)

    def master_of(self, key: str) -> int:
        """The port of the master that serves ``key``'s slot now (as the live nodes see it)."""
        import redis
        from redis.cluster import key_slot

        slot = key_slot(key.encode())
        for port in self.procs:
            try:
                with redis.Redis(port=port, password=self.password) as r:
                    for start, end, master, *_ in r.execute_command("CLUSTER SLOTS"):
                        if start <= slot <= end:
                            return int(master[1])
            except redis.RedisError:
                continue
        raise RuntimeError("no live node knows the slot")

    def flush(self) -> None:
        import redis

        for port in self.masters():
            with redis.Redis(port=port, password=self.password) as r:
                r.flushall()

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
