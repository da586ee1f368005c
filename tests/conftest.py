"""Shared fixtures: a fake upstream on a loopback port and the gateway in front of it.

The gateway runs under real uvicorn on its own loopback port, configured with one provider per
upstream dialect (all pointing at the fake) and glob routes ``<dialect>--*``: a caller asking for
``openai-chat--tool_call`` reaches the OpenAI chat provider, which replays
``captures/openai-chat/tool_call.sse``. Routes ``<dialect>--<scenario>@<word>`` reach the same
answer under an upstream model named like the wire (``text``, ``length``, ``message`` …, see
``SCENARIO_WORDS``), which the fake echoes in its stream: the matrix runs through those.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.dialects import registry
from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.support.fake_upstream import SCENARIO_WORDS, FakeUpstream, ServerThread
from tests.support.redis_servers import RedisClusterGroup

# Every dialect a provider may speak that the fake upstream speaks too. Bedrock Converse is spoken
# only on its platform (SigV4, eventstream): tests/dialects/bedrock_converse/test_e2e.py.
NOT_FAKED = {"bedrock-converse"}
UPSTREAM_DIALECTS = [d for d in registry.UPSTREAM_DIALECTS if d not in NOT_FAKED]


def word_model(dialect: str, scenario: str) -> str:
    """The caller's model for ``scenario`` on ``dialect`` through an upstream model named like the wire."""
    return f"{dialect}--{scenario}@{SCENARIO_WORDS[scenario]}"


def gateway_config(fake_url: str, **server: Any) -> dict[str, Any]:
    bases = {
        "anthropic": fake_url,
        "openai-chat": fake_url + "/v1",
        "openai-responses": fake_url + "/v1",
        "gemini": fake_url,
        "gemini-interactions": fake_url,
    }
    providers = [
        {
            "name": f"up-{d}",
            "dialect": d,
            "base_url": bases[d],
            "api_key": f"sk-upstream-{d}-secret",
            "max_retries": 0,
            "first_byte_timeout": 5.0,
            "idle_timeout": 2.0,
            "connect_timeout": 2.0,
        }
        for d in UPSTREAM_DIALECTS
    ]
    providers.append({"name": "demo", "dialect": "demo"})
    routes = [
        {"model": word_model(d, s), "provider": f"up-{d}", "upstream_model": w}
        for d in UPSTREAM_DIALECTS
        for s, w in SCENARIO_WORDS.items()
    ]
    routes += [{"model": f"{d}--*", "provider": f"up-{d}"} for d in UPSTREAM_DIALECTS]
    routes.append({"model": "demo", "provider": "demo"})
    return {
        "server": {"keepalive_seconds": 0.5, "access_log": False, **server},
        "auth": {"keys_env": ""},
        "store": {"url": "sqlite://:memory:"},
        "providers": providers,
        "routes": routes,
    }


@pytest.fixture(scope="session")
def fake() -> Iterator[FakeUpstream]:
    upstream = FakeUpstream()
    with ServerThread(upstream) as server:
        upstream.port = server.port
        yield upstream


@pytest.fixture(scope="session")
def gateway(fake: FakeUpstream) -> Iterator[ServerThread]:
    settings = Settings(**gateway_config(f"http://127.0.0.1:{fake.port}"))
    with ServerThread(create_app(settings), **uvicorn_options()) as server:  # the gateway's own server layer
        yield server


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterGroup]:
    """A Redis Cluster of three masters and three replicas (tests/support/redis_servers.py), started
    once per session for every test that shares it (flush it with ``.flush()`` first)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed (apt-get install -y redis-server; .ci/run installs it)")
    group = RedisClusterGroup(tmp_path_factory.mktemp("cluster")).start()
    yield group
    group.stop()
