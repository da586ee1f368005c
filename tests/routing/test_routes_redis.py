"""Two gateway processes on one real redis-server (and on a Redis Cluster) share target cooldowns
and session affinity."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.relay.test_stateful import redis_url  # noqa: F401  (the fixture: a redis-server of this module)
from tests.support.fake_upstream import ServerThread, free_port
from tests.support.processes import start_gateway_process
from tests.support.redis_servers import RedisClusterGroup
from tests.support.targets import Behaviour, Deployments

ROOT = Path(__file__).resolve().parents[2]


def _config(upstream: str, redis: str, port: int) -> str:
    return f"""
[server]
port = {port}
access_log = false
[store]
url = "{redis}"
[auth]
keys_env = ""
[[providers]]
name = "up"
dialect = "openai-chat"
base_url = "{upstream}/v1"
api_key = "sk-up"
max_retries = 0
first_byte_timeout = 5.0

[[routes]]
model = "text"
strategy = "ordered"
cooldown_seconds = 30
targets = [{{ provider = "up", upstream_model = "a" }}, {{ provider = "up", upstream_model = "b" }}]

[[routes]]
model = "busy"
strategy = "least_busy"
targets = [{{ provider = "up", upstream_model = "f" }}, {{ provider = "up", upstream_model = "g" }}]

[[routes]]
model = "chat"
strategy = "weighted"
affinity = "session"
targets = [{{ provider = "up", upstream_model = "c" }}, {{ provider = "up", upstream_model = "d" }}, {{ provider = "up", upstream_model = "e" }}]
"""


def _start(tmp: Path, upstream: str, redis: str, name: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    path = tmp / f"{name}.toml"
    path.write_text(_config(upstream, redis, port))
    return start_gateway_process(path, port, timeout=20)


@pytest.fixture
def deployments() -> Iterator[Deployments]:
    app = Deployments()
    with ServerThread(app) as server:
        app.url = server.url  # type: ignore[attr-defined]
        yield app


CLIENT = httpx.Client(timeout=10)


def _ask(url: str, model: str, session: str | None = None) -> str:
    r = CLIENT.post(
        url + "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-session-id": session} if session else {},
    )
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"].removeprefix("from ")


@pytest.fixture(params=["redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "cluster":
        cluster: RedisClusterGroup = request.getfixturevalue("redis_cluster")
        cluster.flush()
        return cluster.url
    import redis as redis_lib

    url = request.getfixturevalue("redis_url").rsplit("/", 1)[0] + "/5"
    with redis_lib.Redis.from_url(url) as r:
        r.flushdb()
    return str(url)


def test_two_replicas_share_cooldowns_and_affinity(deployments: Deployments, store_url: str, tmp_path: Path) -> None:
    url = store_url
    a, url_a = _start(tmp_path, deployments.url, url, "a")  # type: ignore[attr-defined]
    b, url_b = _start(tmp_path, deployments.url, url, "b")  # type: ignore[attr-defined]
    try:
        deployments.behaviour["a"] = Behaviour(always_fail=500)
        assert _ask(url_a, "text") == "b"
        assert deployments.hits == ["a", "b"]
        for _ in range(10):  # the other replica knows a is cooling: it never calls it
            assert _ask(url_b, "text") == "b"
        assert deployments.count("a") == 1
        # a long stream held through replica A: replica B sends its requests to the other target
        deployments.behaviour["f"] = Behaviour(hold=4.0)
        deployments.behaviour["g"] = Behaviour(hold=4.0)
        holder = threading.Thread(
            target=lambda: httpx.post(
                url_a + "/v1/chat/completions",
                json={"model": "busy", "stream": True, "messages": [{"role": "user", "content": "hold"}]},
                timeout=20,
            )
        )
        holder.start()
        deadline = time.monotonic() + 5
        while not any(deployments.open.values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        held = next(m for m, n in deployments.open.items() if n)
        assert {_ask(url_b, "busy") for _ in range(10)} == {"g" if held == "f" else "f"}
        holder.join()
        for session in ("s1", "s2", "s3"):
            home = _ask(url_a, "chat", session)
            assert {_ask(u, "chat", session) for u in (url_a, url_b) for _ in range(10)} == {home}
    finally:
        for proc in (a, b):
            proc.terminate()
            proc.wait(timeout=10)
