"""Two gateways on one real redis-server behind a round-robin balancer: a client's MCP session
(the initialize handshake included) works whichever replica each request reaches, and a key's rpm
is one count over both; a ``notifications/cancelled`` reaching the other replica stops the call; a server's changed
tool list shows on every replica at once, and reaches a client's ``subscriptions/listen`` stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
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
        ]
        + [
            {"name": "canceller", "key_sha256": sha("sk-replicas-cancel"), "mcp_tools": ["files_slow"]},
            {"name": "watcher", "key_sha256": sha("sk-replicas-watch"), "mcp_tools": ["files_added_*"]},
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


def _slow_call(id_: int, seconds: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": {"name": "files_slow", "arguments": {"seconds": seconds}}}  # fmt: skip


async def test_a_cancel_sent_to_the_other_replica_stops_the_call(replicas: list[ServerThread], files: Any) -> None:
    """Raw HTTP (the SDK's client sends the notification to the URL the call went to; a load balancer
    may not): the call on replica A, its ``notifications/cancelled`` on replica B."""
    a, b = (f"{r.url}/mcp" for r in replicas)
    headers = {"authorization": "Bearer sk-replicas-cancel", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-06-18"}  # fmt: skip
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41, "reason": "enough"}}
    told_before = len(files[0].cancelled)
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        started = time.monotonic()
        call = asyncio.create_task(http.post(a, json=_slow_call(41, 5.0)))
        await asyncio.sleep(0.6)
        assert (await http.post(b, json=cancel)).status_code == 202
        answer = await call
        took = time.monotonic() - started
    assert took < 3.0, f"the call ran on for {took:.1f}s after its cancel"
    assert answer.status_code == 200 and "cancelled" in answer.text and "slow answer" not in answer.text
    deadline = time.monotonic() + 5.0
    while len(files[0].cancelled) == told_before:  # A cancelled its own call at the server
        assert time.monotonic() < deadline, "the server was not told the call was cancelled"
        await asyncio.sleep(0.02)


async def test_a_cancel_after_its_call_ended_stops_no_later_call(replicas: list[ServerThread]) -> None:
    """Clients number requests from 0 in each session: a late cancel's marker must not stop the next
    call of the same key and id."""
    a, b = (f"{r.url}/mcp" for r in replicas)
    headers = {"authorization": "Bearer sk-replicas-cancel", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-06-18"}  # fmt: skip
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 42}}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        assert (await http.post(b, json=cancel)).status_code == 202  # nothing runs: a marker is left
        await asyncio.sleep(0.7)  # (past the clock-skew allowance)
        answer = await http.post(a, json=_slow_call(42, 0.8))
    assert "slow answer" in answer.text


async def test_a_servers_changed_list_shows_at_once_and_reaches_listeners(
    replicas: list[ServerThread], files: Any
) -> None:
    """The files server adds a tool and says so: both replicas list it well within their 5 s check,
    and a 2026-07-28 client listening on replica A hears ``tools`` changed."""
    from tests.mcp.conftest import mcp_client

    a, b = (f"{r.url}/mcp" for r in replicas)
    async with (
        httpx2.AsyncClient(headers={"x-files-token": FILES_TOKEN}) as http,
        Client(streamable_http_client(files[1], http_client=http), cache=None) as direct,
        mcp_client(a, "sk-replicas-watch") as client,
        mcp_client(b, "sk-replicas-watch") as other,
    ):
        assert (await client.list_tools()).tools == []
        async with client.listen(tools_list_changed=True) as subscription:
            started = time.monotonic()
            assert not (await direct.call_tool("grow", {"name": "text"})).is_error
            with anyio.fail_after(3.0):
                event = await anext(aiter(subscription))
            assert type(event).__name__ == "ToolsListChanged"
        assert [t.name for t in (await client.list_tools()).tools] == ["files_added_text"]
        while [t.name for t in (await other.list_tools()).tools] != ["files_added_text"]:
            assert time.monotonic() - started < 3.0, "replica B did not list the new tool at once"
            await asyncio.sleep(0.05)
        answer = await other.call_tool("files_added_text", {})
        assert answer.content[0].text == "added text"  # type: ignore[union-attr]
