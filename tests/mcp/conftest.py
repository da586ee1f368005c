"""The MCP gateway in front of loopback MCP servers: a streamable-HTTP one requiring a header
(tests/mcp/doubles.py), a stdio one the gateway starts (tests/mcp/stdio_server.py), and one that
is down (a closed port). Keys: ``search`` (read tools and calc), ``tight`` (rpm 2, calc only),
``models-only`` (no mcp_tools)."""

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
from gateway.settings import Settings
from gateway.telemetry.traces import Telemetry
from tests.mcp.doubles import FILES_TOKEN, Counting, files_server
from tests.support.access_log import Capture, capture_access_log
from tests.support.fake_upstream import ServerThread, free_port

HERE = Path(__file__).resolve().parent
ADMIN = "admin-secret-mcp"
KEYS = {"search": "sk-search-key", "tight": "sk-tight-key", "models-only": "sk-models-only"}


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mcp_config(files_url: str, **extra: Any) -> dict[str, Any]:
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
        ],
        "keys": [
            {"name": "search", "key_sha256": sha(KEYS["search"]), "mcp_tools": ["files_read_*", "files_fail",
             "files_slow", "files_progress", "calc_*", "gone_*"]},
            {"name": "tight", "key_sha256": sha(KEYS["tight"]), "mcp_tools": ["calc_add"], "rpm": 2},
            {"name": "models-only", "key_sha256": sha(KEYS["models-only"])},
        ],
        **extra,
    }  # fmt: skip


@pytest.fixture(scope="module")
def files() -> Iterator[tuple[Counting, str]]:
    app = Counting(files_server().streamable_http_app())
    with ServerThread(app) as server:
        yield app, f"{server.url}/mcp"


@pytest.fixture(scope="module")
def access() -> Iterator[Capture]:
    with capture_access_log() as capture:
        yield capture


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def gateway(files: tuple[Counting, str], access: Capture, spans: InMemorySpanExporter) -> Iterator[ServerThread]:
    mp = pytest.MonkeyPatch()
    mp.setenv("FILES_MCP_TOKEN", FILES_TOKEN)
    mp.setenv("CALC_GREETING_SOURCE", "hello from the gateway")
    settings = Settings(**mcp_config(files[1], admin={"key": ADMIN}))
    app = create_app(settings)
    app.state.gateway.telemetry = Telemetry(SimpleSpanProcessor(spans))
    with ServerThread(app) as server:
        yield server
    mp.undo()


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
