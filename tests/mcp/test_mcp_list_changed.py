"""A handshake-only server's ``notifications/tools/list_changed`` (tests/mcp/handshake_server.py,
over stdio) makes the gateway list that server's tools again at once — with the periodic check
set to a minute here, so nothing else could have read the new list."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.mcp.conftest import HERE, mcp_client, quick_start, sha, wait_ready
from tests.support.fake_upstream import ServerThread


@pytest.fixture(scope="module")
def gateway() -> Iterator[ServerThread]:
    import gateway.mcp.upstream as upstream

    mp = pytest.MonkeyPatch()
    quick_start(mp)
    mp.setattr(upstream, "HEALTH_SECONDS", 60.0)
    config: dict[str, Any] = {
        "store": {"url": "sqlite://:memory:"},
        "providers": [{"name": "demo", "dialect": "demo"}],
        "routes": [{"model": "demo", "provider": "demo"}],
        "mcp_servers": [{"name": "hand", "command": [sys.executable, str(HERE / "handshake_server.py")]}],
        "keys": [{"name": "hand-user", "key_sha256": sha("sk-hand-user"), "mcp_tools": ["hand_*"]}],
    }
    with ServerThread(create_app(Settings(**config))) as server:
        wait_ready(server.url, ["hand"])
        yield server
    mp.undo()


async def test_a_handshake_servers_list_changed_is_read_at_once(gateway: ServerThread) -> None:
    async with mcp_client(f"{gateway.url}/mcp", "sk-hand-user") as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["hand_grow"]
        assert (await client.call_tool("hand_grow", {})).content[0].text == "grew"  # type: ignore[union-attr]
        started = time.monotonic()
        while [t.name for t in (await client.list_tools()).tools] != ["hand_added", "hand_grow"]:
            assert time.monotonic() - started < 3.0, "the changed list was not read at once"
            await asyncio.sleep(0.05)
        assert (await client.call_tool("hand_added", {})).content[0].text == "added"  # type: ignore[union-attr]
