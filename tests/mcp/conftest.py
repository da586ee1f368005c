"""The MCP gateway in front of loopback MCP servers: a streamable-HTTP one requiring a header
(tests/mcp/doubles.py), a stdio one the gateway starts (tests/mcp/stdio_server.py), and one that
is down (a closed port), and the files tools again on the legacy HTTP+SSE transport (``legacy``).
Keys: ``search`` (read tools and calc), ``tight`` (rpm 2, calc only), ``models-only`` (no
mcp_tools), ``legacy-user`` (the legacy server's tools, max_parallel 1), ``batch`` (read tools, rpm 3)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from gateway.telemetry.traces import Telemetry
from tests.mcp.doubles import FILES_TOKEN, Counting, files_server
from tests.support.access_log import Capture, capture_access_log
from tests.support.fake_upstream import ServerThread, free_port

HERE = Path(__file__).resolve().parent
ADMIN = "admin-secret-mcp"
KEYS = {
    "search": "sk-search-key",
    "tight": "sk-tight-key",
    "models-only": "sk-models-only",
    "legacy-user": "sk-legacy-user",
    "batch": "sk-batch-key",
}


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mcp_config(files_url: str, legacy_url: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "server": {"access_log": True},
        "store": {"url": "sqlite://:memory:"},
        "providers": [{"name": "demo", "dialect": "demo"}],
        "routes": [{"model": "demo", "provider": "demo"}],
        "mcp_servers": [
            {"name": "files", "url": files_url, "headers_env": {"X-Files-Token": "FILES_MCP_TOKEN"}, "timeout": 2.0,
             "price_per_call": 0.25},
            {"name": "calc", "command": [sys.executable, str(HERE / "stdio_server.py")],
             "env_env": {"CALC_GREETING": "CALC_GREETING_SOURCE"}, "timeout": 5.0},
            {"name": "gone", "url": f"http://127.0.0.1:{free_port()}/mcp", "timeout": 0.5},
            *([{"name": "legacy", "url": legacy_url, "transport": "sse"}] if legacy_url else []),
        ],
        "keys": [
            {"name": "search", "key_sha256": sha(KEYS["search"]), "mcp_tools": ["files_read_*", "files_fail",
             "files_slow", "files_progress", "calc_*", "gone_*"]},
            {"name": "tight", "key_sha256": sha(KEYS["tight"]), "mcp_tools": ["calc_add"], "rpm": 2},
            {"name": "models-only", "key_sha256": sha(KEYS["models-only"])},
            {"name": "legacy-user", "key_sha256": sha(KEYS["legacy-user"]), "mcp_tools": ["legacy_*"],
             "max_parallel": 1},
            {"name": "batch", "key_sha256": sha(KEYS["batch"]), "mcp_tools": ["files_read_*"], "rpm": 3},
        ],
        **extra,
    }  # fmt: skip


@pytest.fixture(scope="module")
def files() -> Iterator[tuple[Counting, str]]:
    app = Counting(files_server().streamable_http_app())
    with ServerThread(app) as server:
        yield app, f"{server.url}/mcp"


@pytest.fixture(scope="module")
def legacy() -> Iterator[str]:
    """The same tools on the legacy HTTP+SSE transport (the SDK's ``sse_app``), no header needed."""
    with ServerThread(files_server().sse_app()) as server:
        yield f"{server.url}/sse"


@pytest.fixture(scope="module")
def access() -> Iterator[Capture]:
    with capture_access_log() as capture:
        yield capture


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def gateway(
    files: tuple[Counting, str], legacy: str, access: Capture, spans: InMemorySpanExporter
) -> Iterator[ServerThread]:
    mp = pytest.MonkeyPatch()
    mp.setenv("FILES_MCP_TOKEN", FILES_TOKEN)
    mp.setenv("CALC_GREETING_SOURCE", "hello from the gateway")
    quick_start(mp)
    settings = Settings(**mcp_config(files[1], legacy, admin={"key": ADMIN}))
    app = create_app(settings)
    app.state.gateway.telemetry = Telemetry(SimpleSpanProcessor(spans))
    with ServerThread(app, **uvicorn_options()) as server:  # the gateway's own server layer
        wait_ready(server.url, ["files", "calc", "legacy"])
        yield server
    mp.undo()


def quick_start(mp: pytest.MonkeyPatch) -> None:
    """The gateway's startup waits at most this long for the servers' first sessions (its default is
    10 s): on a loaded machine a stdio child's imports alone can take longer than ``ServerThread``
    waits for startup, so a test starts the gateway at once and waits with ``wait_ready``."""
    import gateway.mcp.endpoint as endpoint

    mp.setattr(endpoint, "STARTUP_WAIT_SECONDS", 0.5)


def wait_ready(url: str, servers: list[str], timeout: float = 90.0) -> None:
    """Until ``/readyz`` says each of ``servers`` is up (their tools listed)."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while True:
        status = httpx.get(f"{url}/readyz", timeout=10).json().get("mcp_servers", {})
        if all(status.get(name, {}).get("up") for name in servers):
            return
        assert time.monotonic() < deadline, f"MCP servers not up: {status}"
        time.sleep(0.1)


@asynccontextmanager
async def mcp_client(url: str, key: str | None, **options: Any) -> Any:
    """The official SDK's ``Client`` on the gateway's ``/mcp`` with ``key`` as the Bearer token."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, **options) as client,
    ):
        yield client
