"""Two gateway processes on one real redis-server share the response cache."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.relay.test_stateful import redis_url  # noqa: F401  (the fixture: a redis-server of this module)
from tests.support.fake_upstream import ServerThread, free_port
from tests.support.processes import start_gateway_process
from tests.support.targets import Deployments


def _config(upstream: str, redis: str, port: int) -> str:
    return f"""
[server]
port = {port}
access_log = false
[store]
url = "{redis}"
[cache]
enabled = true
ttl_seconds = 60
[auth]
keys_env = ""
[[providers]]
name = "up"
dialect = "openai-chat"
base_url = "{upstream}/v1"
api_key = "sk-up"
max_retries = 0
[[routes]]
model = "text"
provider = "up"
upstream_model = "a"
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


def _ask(url: str, question: str, stream: bool = False) -> httpx.Response:
    body = {"model": "text", "stream": stream, "messages": [{"role": "user", "content": question}]}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 200, r.text
    return r


def test_two_replicas_share_entries(deployments: Deployments, redis_url: str, tmp_path: Path) -> None:  # noqa: F811
    import redis as redis_lib

    url = redis_url.rsplit("/", 1)[0] + "/6"
    with redis_lib.Redis.from_url(url) as r:
        r.flushdb()
    a, url_a = _start(tmp_path, deployments.url, url, "a")  # type: ignore[attr-defined]
    b, url_b = _start(tmp_path, deployments.url, url, "b")  # type: ignore[attr-defined]
    try:
        first = _ask(url_a, "shared question")
        assert first.headers["x-gateway-cache"] == "miss"
        again = _ask(url_b, "shared question")  # the other replica answers from the entry A kept
        assert again.headers["x-gateway-cache"] == "hit"
        assert again.json()["choices"][0]["message"] == first.json()["choices"][0]["message"]
        streamed = _ask(url_a, "shared question", stream=True)
        assert streamed.headers["x-gateway-cache"] == "hit" and "data: [DONE]" in streamed.text
        assert deployments.hits == ["a"]
        with redis_lib.Redis.from_url(url) as r:
            keys = [k for k in r.keys("gw:cache:*") if k != b"gw:cache-index"]
            assert len(keys) == 1 and 0 < r.pttl(keys[0]) <= 60_000  # the TTL is Redis's own
    finally:
        for proc in (a, b):
            proc.terminate()
            proc.wait(timeout=10)
