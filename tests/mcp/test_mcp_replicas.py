"""Two gateways on one real redis-server behind a round-robin balancer: a client's MCP session
(the initialize handshake included) works whichever replica each request reaches, and a key's rpm
is one count over both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.mcp.conftest import FILES_TOKEN, quick_start, sha, wait_ready
from tests.relay.test_stateful import redis_url  # noqa: F401  (the fixture: a redis-server of this module)
from tests.support.fake_upstream import ServerThread

MODES = ["legacy", "auto"]  # the initialize handshake (its initialize on one replica), and 2026-07-28


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer double: each request to the next replica's port, in turn."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.sent: list[int] = []
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.sent) % len(self.ports)]
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def replicas(files: Any, redis_url: str) -> Iterator[list[ServerThread]]:  # noqa: F811
    mp = pytest.MonkeyPatch()
    mp.setenv("FILES_MCP_TOKEN", FILES_TOKEN)
    quick_start(mp)
    config = {
        "store": {"url": redis_url},
        "providers": [{"name": "demo", "dialect": "demo"}],
        "routes": [{"model": "demo", "provider": "demo"}],
        "mcp_servers": [{"name": "files", "url": files[1], "headers_env": {"X-Files-Token": "FILES_MCP_TOKEN"}}],
        "keys": [
            {"name": mode, "key_sha256": sha(f"sk-replicas-{mode}"), "mcp_tools": ["files_read_*"], "rpm": 3}
            for mode in MODES
        ],
    }
    with ServerThread(create_app(Settings(**config))) as a, ServerThread(create_app(Settings(**config))) as b:
        for replica in (a, b):
            wait_ready(replica.url, ["files"])
        yield [a, b]
    mp.undo()


@pytest.mark.parametrize("mode", MODES)
async def test_a_session_spans_replicas_and_rpm_is_shared(replicas: list[ServerThread], mode: str) -> None:
    balancer = RoundRobin([r.port for r in replicas])
    headers = {"Authorization": f"Bearer sk-replicas-{mode}"}  # a key per mode: each has its own minute
    async with httpx2.AsyncClient(transport=balancer, headers=headers) as http:
        url = f"http://127.0.0.1:{replicas[0].port}/mcp"
        async with Client(streamable_http_client(url, http_client=http), cache=None, mode=mode) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["files_read_file"]
            answers = [await client.call_tool("files_read_file", {"path": f"p{i}"}) for i in range(4)]
    assert set(balancer.sent) == {r.port for r in replicas}  # both replicas answered this one client
    assert [a.is_error for a in answers] == [False, False, False, True]  # rpm 3 over both replicas
    assert answers[0].structured_content == {"path": "p0", "size": 2, "text": "contents of p0"}
    assert "rate limit of 3 requests per minute" in answers[3].content[0].text  # type: ignore[union-attr]
