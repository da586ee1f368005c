"""``[[mcp_servers]]`` and ``mcp_tools`` as the configuration checks them; the startup error when the
SDK is missing; the catalog's names and cursors; the endpoint's JSON-RPC pre-checks."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from gateway.mcp.catalog import BadCursor, decode_cursor, encode_cursor
from gateway.mcp.endpoint import check_message
from gateway.settings import Settings

BASE: dict[str, Any] = {
    "providers": [{"name": "demo", "dialect": "demo"}],
    "routes": [{"model": "demo", "provider": "demo"}],
    "store": {"url": "sqlite://:memory:"},
}


@pytest.mark.parametrize(
    ("server", "error"),
    [
        ({"name": "files_x", "url": "http://127.0.0.1:1/mcp"}, "letters, digits or '-'"),
        ({"name": "both", "url": "http://127.0.0.1:1/mcp", "command": ["x"]}, "exactly one of url or command"),
        ({"name": "neither"}, "exactly one of url or command"),
        ({"name": "slow", "url": "http://127.0.0.1:1/mcp", "timeout": 0}, "greater than 0"),
        ({"name": "priced", "url": "http://127.0.0.1:1/mcp", "price_per_call": -1}, "greater than or equal to 0"),
    ],
)
def test_a_bad_server_entry_is_refused_naming_the_rule(server: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Settings(**BASE, mcp_servers=[server])


def test_server_names_are_unique() -> None:
    entry = {"name": "files", "url": "http://127.0.0.1:1/mcp"}
    with pytest.raises(ValueError, match="duplicate mcp_servers names"):
        Settings(**BASE, mcp_servers=[entry, entry])


def test_a_missing_sdk_is_a_startup_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.server.app import create_app

    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    settings = Settings(**BASE, mcp_servers=[{"name": "files", "url": "http://127.0.0.1:1/mcp"}])
    with pytest.raises(SystemExit, match=r"pip install 'llm-gateway\[mcp\]'"):
        create_app(settings)


def test_no_mcp_servers_no_endpoint() -> None:
    from starlette.testclient import TestClient

    from gateway.server.app import create_app

    with TestClient(create_app(Settings(**BASE))) as client:
        assert client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 404


def test_cursors_round_trip_and_foreign_ones_are_refused() -> None:
    assert decode_cursor(encode_cursor(300)) == 300
    assert decode_cursor(None) == 0
    for bad in ("x", encode_cursor(-1), "bzotMQ==", "!!!"):
        with pytest.raises(BadCursor):
            decode_cursor(bad)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", -32700),
        (b"{", -32700),
        (b"[]", None),  # a batch: gateway/mcp/batch.py judges it (test_mcp_gateway's batch tests)
        (b"1", -32600),
        (b'{"jsonrpc":"2.0"}', -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":""}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', None),  # a response (to a server request) is a message
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        (b'{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}', None),
    ],
)
def test_the_json_rpc_pre_check(body: bytes, code: int | None) -> None:
    _, refusal = check_message(body)
    assert (refusal[0] if refusal else None) == code


async def test_a_stdio_server_is_stopped_with_the_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import time
    from pathlib import Path

    from gateway.server.app import create_app
    from tests.mcp.conftest import mcp_client, quick_start, wait_ready
    from tests.support.fake_upstream import ServerThread

    script = Path(__file__).resolve().parent / "stdio_server.py"
    settings = Settings(**BASE, mcp_servers=[{"name": "calc", "command": [sys.executable, str(script)]}])
    quick_start(monkeypatch)
    with ServerThread(create_app(settings)) as gateway:
        wait_ready(gateway.url, ["calc"])
        async with mcp_client(f"{gateway.url}/mcp", None) as client:  # no keys: every tool, as every model
            pid = (await client.call_tool("calc_pid", {})).structured_content["result"]  # type: ignore[index]
        os.kill(pid, 0)  # running
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        try:  # reaped by the SDK's stdio client; a zombie would still answer kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
        except OSError:
            break
        assert time.monotonic() < deadline, "the stdio server outlived the gateway"
        time.sleep(0.05)


async def test_a_store_that_cannot_be_reached_refuses_the_call_not_unlimited() -> None:
    from gateway.errors import GatewayError
    from gateway.governance.keys import KeySpec
    from gateway.governance.limits import Limiter
    from gateway.governance.prices import PriceBook
    from gateway.settings import SpendSettings
    from gateway.telemetry.observe import AccessRecord, Metrics

    limiter = Limiter(SpendSettings(), Metrics(), PriceBook({}), {})  # store never opened
    record = AccessRecord("req-store-down", "mcp", "/mcp", kind="mcp")
    with pytest.raises(GatewayError) as refused:
        await limiter.admit_call(KeySpec("k", None, rpm=5, mcp_tools=("*",)), record)
    assert refused.value.status == 503 and "cannot reach its store" in refused.value.message
    await limiter.admit_call(KeySpec("free", None, mcp_tools=("*",)), record)  # no limits: no store needed


def test_variables_named_in_headers_env_are_not_read_as_settings(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.settings import load_settings

    monkeypatch.setenv("GATEWAY_FILES_AUTH", "Bearer files-secret")  # a GATEWAY_ name, as an operator may pick
    monkeypatch.setenv("GATEWAY_CALC_TOKEN", "calc-secret")
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[[providers]]\nname = "demo"\ndialect = "demo"\n[[routes]]\nmodel = "demo"\nprovider = "demo"\n'
        '[[mcp_servers]]\nname = "files"\nurl = "http://127.0.0.1:1/mcp"\n'
        'headers_env = { Authorization = "GATEWAY_FILES_AUTH" }\n'
        '[[mcp_servers]]\nname = "calc"\ncommand = ["calc"]\nenv_env = { TOKEN = "GATEWAY_CALC_TOKEN" }\n'
    )
    settings = load_settings(config)
    assert settings.mcp_servers[0].headers_env == {"Authorization": "GATEWAY_FILES_AUTH"}
