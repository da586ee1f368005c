"""The gateway's ``/mcp`` with the official MCP Python SDK as the client, over loopback MCP servers
built with the SDK's server side (tests/mcp/conftest.py): what each key sees and may call, answers
passed exactly, a forbidden call never reaching its server, a down or slow server, limits, the
access log, metrics and spans."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_PROTOCOL_VERSION

from tests.mcp.conftest import ADMIN, FILES_TOKEN, KEYS, mcp_client

MODES = ["auto", "legacy"]  # the SDK's default (2026-07-28 when the server speaks it) and the initialize handshake


def dumped(result: Any) -> dict[str, Any]:
    """A result as its wire dict, without the ``_meta`` each server stamps (its serverInfo)."""
    wire: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    wire.pop("_meta", None)
    return wire


@asynccontextmanager
async def direct_client(files: Any) -> Any:
    """The files server without the gateway (with its header): what the gateway must pass unchanged."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"x-files-token": FILES_TOKEN}) as http,
        Client(streamable_http_client(files[1], http_client=http), cache=None) as client,
    ):
        yield client


@pytest.mark.parametrize("mode", MODES)
async def test_each_key_lists_only_its_tools(gateway: Any, mode: str) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode=mode) as client:
        if mode == "auto":
            assert client.protocol_version == LATEST_PROTOCOL_VERSION
        names = [t.name for t in (await client.list_tools()).tools]
    # files_delete_file is not in the key's globs; gone is down (its tools are left out)
    assert names == [
        "calc_add",
        "calc_env",
        "calc_pid",
        "files_fail",
        "files_progress",
        "files_read_file",
        "files_slow",
    ]
    async with mcp_client(f"{gateway.url}/mcp", KEYS["tight"], mode=mode) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["calc_add"]
    async with mcp_client(f"{gateway.url}/mcp", KEYS["models-only"], mode=mode) as client:
        assert (await client.list_tools()).tools == []  # no mcp_tools: no tool


async def test_descriptions_and_schemas_are_the_servers_own(gateway: Any, files: Any) -> None:
    async with direct_client(files) as direct:
        own = {t.name: dumped(t) for t in (await direct.list_tools()).tools}
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"]) as client:
        listed = {t.name: dumped(t) for t in (await client.list_tools()).tools}
    for name in ("read_file", "fail", "slow", "progress"):
        mine = listed[f"files_{name}"]
        assert {**mine, "name": name} == own[name]
    assert "outputSchema" in listed["files_read_file"]


async def test_pagination_walks_every_tool(gateway: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import gateway.mcp.catalog as catalog

    monkeypatch.setattr(catalog, "PAGE_SIZE", 3)
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode="legacy") as client:
        pages, cursor, names = 0, None, []
        while True:
            page = await client.list_tools(cursor=cursor)
            pages += 1
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3 and len(names) == 7 == len(set(names))
        with pytest.raises(MCPError) as bad:
            await client.list_tools(cursor="not-a-cursor")
        assert bad.value.code == -32602


@pytest.mark.parametrize("mode", MODES)
async def test_calls_are_answered_exactly(gateway: Any, files: Any, mode: str) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode=mode) as client, direct_client(files) as direct:
        for args in ({"path": "notes/text"},):
            mine = await client.call_tool("files_read_file", args)
            assert dumped(mine) == dumped(await direct.call_tool("read_file", args))
            if mine.meta:  # the gateway is the server this client talks to, not "files"
                assert mine.meta.get("io.modelcontextprotocol/serverInfo", {}).get("name") != "files"
            assert mine.structured_content == {"path": "notes/text", "size": 10, "text": "contents of notes/text"}
        failed = await client.call_tool("files_fail", {"reason": "disk"})
        assert failed.is_error is True
        assert dumped(failed) == dumped(await direct.call_tool("fail", {"reason": "disk"}))
        added = await client.call_tool("calc_add", {"a": 40, "b": 2})
        assert added.structured_content == {"result": 42} and not added.is_error
        # the stdio child got the variable the gateway was told to pass (env_env)
        env = await client.call_tool("calc_env", {"name": "CALC_GREETING"})
        assert env.content[0].text == "hello from the gateway"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_progress_is_passed_through(gateway: Any, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode=mode) as client:
        result = await client.call_tool("files_progress", {"steps": 3}, progress_callback=progress)
    assert result.content[0].text == "done"  # type: ignore[union-attr]
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_a_forbidden_call_never_reaches_its_server(gateway: Any, files: Any, access: Any) -> None:
    before = list(files[0].calls)
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"]) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("files_delete_file", {"path": "/"})
    assert refused.value.code == -32602 and "may not call" in refused.value.message
    async with mcp_client(f"{gateway.url}/mcp", KEYS["models-only"]) as client:
        with pytest.raises(MCPError):
            await client.call_tool("files_read_file", {"path": "x"})
    assert files[0].calls == before  # nothing reached the server
    line = access.line_where(lambda e: e.get("kind") == "mcp" and e.get("tool") == "files_delete_file")
    assert line["status"] == 403 and line["key"] == "search" and line["error_kind"] == "permission"


async def test_unknown_tool_is_invalid_params(gateway: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"]) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("files_read_nothing", {})
    assert unknown.value.code == -32602 and "unknown tool" in unknown.value.message


async def test_a_down_or_slow_server_holds_up_nothing_else(gateway: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode="legacy") as client:
        started = time.monotonic()
        down = await client.call_tool("gone_anything", {})
        assert down.is_error and "unavailable" in down.content[0].text  # type: ignore[union-attr]
        assert time.monotonic() - started < 3.0  # at once, not after a timeout (generous: CI is loaded)

        async def fast() -> tuple[float, Any]:
            await asyncio.sleep(0.2)
            at = time.monotonic()
            return at, await client.call_tool("calc_add", {"a": 1, "b": 1})

        started = time.monotonic()
        slow, (at, quick) = await asyncio.gather(client.call_tool("files_slow", {"seconds": 10}), fast())
        took = time.monotonic() - started
        assert slow.is_error and "did not answer within 2s" in slow.content[0].text  # type: ignore[union-attr]
        assert 1.9 < took < 8.0  # the files server's timeout (2 s), not the tool's 10 s
        assert quick.structured_content == {"result": 2} and time.monotonic() - at < took
        listed = time.monotonic()
        await client.list_tools()
        assert time.monotonic() - listed < 3.0
    ready = httpx.get(f"{gateway.url}/readyz").json()
    assert ready["mcp_servers"]["gone"] == {"up": False, "tools": 0, "error": "ConnectError"}
    assert ready["mcp_servers"]["files"] == {"up": True, "tools": 6}
    assert ready["mcp_servers"]["legacy"] == {"up": True, "tools": 6}


async def test_a_stdio_server_that_dies_is_started_again(gateway: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode="legacy") as client:
        first = (await client.call_tool("calc_pid", {})).structured_content["result"]  # type: ignore[index]
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 60  # a loaded machine takes seconds to start a python child
        while True:
            result = await client.call_tool("calc_pid", {})
            if not result.is_error:
                break
            assert time.monotonic() < deadline, "the stdio server was not started again"
            await asyncio.sleep(0.2)
        assert result.structured_content["result"] != first  # type: ignore[index]


async def test_rpm_refuses_a_call(gateway: Any, access: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["tight"], mode="legacy") as client:
        answers = [await client.call_tool("calc_add", {"a": i, "b": 0}) for i in range(3)]
    assert [a.is_error for a in answers] == [False, False, True]
    assert "rate limit of 2 requests per minute" in answers[2].content[0].text  # type: ignore[union-attr]
    line = access.line_where(lambda e: e.get("kind") == "mcp" and e.get("key") == "tight" and e["status"] == 429)
    assert line["tool"] == "calc_add" and line["server"] == "calc"


def _post(gateway: Any, body: bytes, key: str | None = KEYS["search"], **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    if key is not None:
        sent["authorization"] = f"Bearer {key}"
    return httpx.post(f"{gateway.url}/mcp", content=body, headers=sent, timeout=10)


def _sse_message(response: httpx.Response) -> dict[str, Any]:
    import orjson

    if response.headers["content-type"].startswith("application/json"):
        return orjson.loads(response.content)  # type: ignore[no-any-return]
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return orjson.loads(data[-1])  # type: ignore[no-any-return]


def test_the_access_log_line_of_a_call(gateway: Any, access: Any) -> None:
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
    assert _post(gateway, init).status_code == 200
    body = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files_read_file","arguments":{"path":"a"}}}'
    )
    answer = _post(gateway, body, **{"mcp-protocol-version": "2025-06-18", "x-request-id": "req-mcp-log-1"})
    assert answer.headers["x-request-id"] == "req-mcp-log-1"
    assert _sse_message(answer)["result"]["structuredContent"]["path"] == "a"
    line = access.line("req-mcp-log-1")
    assert line["kind"] == "mcp" and line["server"] == "files" and line["tool"] == "files_read_file"
    assert line["key"] == "search" and line["status"] == 200 and line["duration_ms"] > 0
    assert line["cost_usd"] == 0.25  # the server's price_per_call


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
def test_every_handshake_revision_is_served(gateway: Any, version: str) -> None:
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"%s","capabilities":{},'
        b'"clientInfo":{"name":"t","version":"1"}}}' % version.encode()
    )
    answer = _post(gateway, init)
    assert answer.status_code == 200 and "mcp-session-id" not in answer.headers  # stateless: no session
    result = _sse_message(answer)["result"]
    assert result["protocolVersion"] == version and result["serverInfo"]["name"] == "llm-gateway"
    assert "tools" in result["capabilities"]
    listed = _post(gateway, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}', **{"mcp-protocol-version": version})
    assert "calc_add" in {t["name"] for t in _sse_message(listed)["result"]["tools"]}
    ping = _post(gateway, b'{"jsonrpc":"2.0","id":3,"method":"ping"}', **{"mcp-protocol-version": version})
    assert _sse_message(ping) == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_a_json_only_client_gets_json(gateway: Any) -> None:
    answer = _post(
        gateway,
        b'{"jsonrpc":"2.0","id":3,"method":"ping"}',
        accept="application/json",
        **{"mcp-protocol-version": "2025-06-18"},
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, -32700),
        (b'{"jsonrpc":"2.0","id":1}', 400, -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', 400, -32600),
        (b'"text"', 400, -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"text/unknown"}', 200, -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}', 200, -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (5 << 20) + b'"}}', 413, -32600),
    ],
)
def test_malformed_input_is_the_json_rpc_error_the_spec_names(
    gateway: Any, body: bytes, status: int, code: int
) -> None:
    answer = _post(gateway, body, **{"mcp-protocol-version": "2025-06-18"})
    assert answer.status_code == status
    assert _sse_message(answer)["error"]["code"] == code


def test_http_methods_and_authentication(gateway: Any) -> None:
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, f"{gateway.url}/mcp", headers={"authorization": f"Bearer {KEYS['search']}"})
        assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert _post(gateway, ping, key=None).status_code == 401
    refused = _post(gateway, ping, key="sk-wrong")
    assert refused.status_code == 401 and refused.json()["error"]["message"] == "invalid API key"


async def test_credentials_stay_on_their_side(gateway: Any, files: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"]) as client:
        result = await client.call_tool("files_read_file", {"path": "b"})
        assert FILES_TOKEN not in result.model_dump_json()
        assert FILES_TOKEN not in str([t.model_dump() for t in (await client.list_tools()).tools])
    seen = files[0].headers[-1]
    assert seen["x-files-token"] == FILES_TOKEN
    assert all(KEYS["search"] not in value for h in files[0].headers for value in h.values())
    assert FILES_TOKEN not in httpx.get(f"{gateway.url}/readyz").text


async def test_metrics_and_spans(gateway: Any, spans: Any) -> None:
    spans.clear()
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"]) as client:
        await client.call_tool("calc_add", {"a": 2, "b": 2})
    text = httpx.get(f"{gateway.url}/metrics").text
    assert 'gateway_mcp_calls_total{server="calc",status="ok",tool="calc_add"}' in text
    assert 'gateway_mcp_server_up{server="gone"} 0.0' in text
    assert 'gateway_mcp_server_up{server="files"} 1.0' in text
    deadline = time.monotonic() + 5
    while not any(s.name == "execute_tool calc_add" for s in spans.get_finished_spans()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool calc_add")
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "calc_add"
    assert span.attributes["gateway.mcp.server"] == "calc"


async def test_admin_api_and_console_records(gateway: Any) -> None:
    admin = {"authorization": f"Bearer {ADMIN}"}
    made = httpx.post(
        f"{gateway.url}/admin/keys", json={"name": "mcp-admin-made", "mcp_tools": ["calc_add"]}, headers=admin
    )
    assert made.status_code in (200, 201), made.text
    assert made.json()["mcp_tools"] == ["calc_add"]
    async with mcp_client(f"{gateway.url}/mcp", made.json()["key"]) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["calc_add"]
    changed = httpx.patch(f"{gateway.url}/admin/keys/mcp-admin-made", json={"mcp_tools": ["calc_*"]}, headers=admin)
    assert changed.status_code == 200 and changed.json()["mcp_tools"] == ["calc_*"]
    bad = httpx.patch(f"{gateway.url}/admin/keys/mcp-admin-made", json={"mcp_tools": "calc_*"}, headers=admin)
    assert bad.status_code == 400 and "mcp_tools" in bad.text
    listed = httpx.get(f"{gateway.url}/admin/keys/search", headers=admin).json()
    assert listed["mcp_tools"][0] == "files_read_*"
    recent = httpx.get(f"{gateway.url}/admin/requests?limit=50", headers=admin).json()["requests"]
    assert any(r.get("kind") == "mcp" and r.get("tool") for r in recent)


async def test_a_legacy_sse_server_and_max_parallel(gateway: Any, access: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["legacy-user"]) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == [
            "legacy_delete_file",
            "legacy_fail",
            "legacy_grow",
            "legacy_progress",
            "legacy_read_file",
            "legacy_slow",
        ]
        read = await client.call_tool("legacy_read_file", {"path": "old"})
        assert read.structured_content == {"path": "old", "size": 3, "text": "contents of old"}
        # max_parallel 1: a second call while the first runs is refused, the first answers
        slow, second = await asyncio.gather(
            client.call_tool("legacy_slow", {"seconds": 0.6}),
            _after(0.2, client.call_tool("legacy_read_file", {"path": "p"})),
        )
    assert slow.content[0].text == "slow answer" and not slow.is_error  # type: ignore[union-attr]
    assert second.is_error and "already has 1 requests in flight" in second.content[0].text  # type: ignore[union-attr]


async def _after(seconds: float, call: Any) -> Any:
    await asyncio.sleep(seconds)
    return await call


async def test_a_servers_json_rpc_error_reaches_the_caller(gateway: Any, access: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode="legacy") as client:
        result = await client.call_tool("files_read_file", {"wrong": 1})  # the server's own verdict on bad arguments
    assert result.is_error is True and "path" in result.content[0].text  # type: ignore[union-attr]


async def test_spend_by_tool_in_the_admin_api(gateway: Any) -> None:
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"]) as client:
        await client.call_tool("files_read_file", {"path": "spend"})
    admin = {"authorization": f"Bearer {ADMIN}"}
    deadline = time.monotonic() + 5
    while True:
        rows = httpx.get(f"{gateway.url}/admin/spend?group_by=model&key=search", headers=admin).json()["rows"]
        by_model = {r["group"]: r for r in rows}
        if "files_read_file" in by_model:
            break
        assert time.monotonic() < deadline, rows
        await asyncio.sleep(0.05)
    row = by_model["files_read_file"]
    assert row["cost_usd"] >= 0.25 and row["cost_usd"] == pytest.approx(0.25 * row["requests"])
    providers = httpx.get(f"{gateway.url}/admin/spend?group_by=provider&key=search", headers=admin).json()["rows"]
    assert "mcp:files" in {r["group"] for r in providers}


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_is_cancelled_at_its_server(gateway: Any, files: Any, access: Any, mode: str) -> None:
    before = len(files[0].cancelled)
    async with mcp_client(f"{gateway.url}/mcp", KEYS["search"], mode=mode) as client:
        call = asyncio.create_task(client.call_tool("files_slow", {"seconds": 1.5}))
        await asyncio.sleep(0.4)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        deadline = time.monotonic() + 5.0  # (a hang-up counts only before the answer: no false pass)
        while len(files[0].cancelled) == before:
            assert time.monotonic() < deadline, "the server was not told the call was cancelled"
            await asyncio.sleep(0.02)
    line = access.line_where(lambda e: e.get("tool") == "files_slow" and e["status"] == 499)
    assert line["error_kind"] == "cancelled"


def _element(id_: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params else {})}


def _read(id_: int, path: str, name: str = "files_read_file") -> dict[str, Any]:
    return _element(id_, "tools/call", name=name, arguments={"path": path})


def test_a_2025_03_26_batch_is_served_element_by_element(gateway: Any, files: Any, access: Any) -> None:
    """The raw HTTP a 2025-03-26 client may send (the SDKs send no batches): one POST, an array."""
    import orjson

    init = _element(1, "initialize", protocolVersion="2025-03-26", capabilities={},
                    clientInfo={"name": "t", "version": "1"})  # fmt: skip
    batch = [
        init,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _element("two", "tools/list"),  # type: ignore[arg-type]
        _read(3, "text"),
        _read(4, "x", name="files_delete_file"),  # not the key's: refused, never reaching the server
        _read(5, "b"),
        _read(6, "c"),
        _read(7, "d"),  # the key's rpm is 3: the fourth read is refused
        {"jsonrpc": "2.0", "id": 8},  # not a request: its own -32600, the others still served
        _element(9, "ping"),
    ]
    calls_before = list(files[0].calls)
    answer = _post(gateway, orjson.dumps(batch), key=KEYS["batch"], **{"x-request-id": "req-batch"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert answer.headers["x-request-id"] == "req-batch"
    by_id = {a["id"]: a for a in answer.json()}
    assert sorted(by_id, key=str) == sorted([1, "two", 3, 4, 5, 6, 7, 8, 9], key=str)  # no answer to a notification
    assert by_id[1]["result"]["protocolVersion"] == "2025-03-26"
    assert [t["name"] for t in by_id["two"]["result"]["tools"]] == ["files_read_file"]
    answered = {
        r["structuredContent"]["path"]: r for i in (3, 5, 6, 7) if "structuredContent" in (r := by_id[i]["result"])
    }
    assert len(answered) == 3  # (the elements run concurrently: which one the limit refuses is not fixed)
    for path, result in answered.items():  # each answer is its own element's
        assert result["structuredContent"] == {"path": path, "size": len(path), "text": f"contents of {path}"}
    assert by_id[4]["error"]["code"] == -32602 and "may not call it" in by_id[4]["error"]["message"]
    results = [by_id[i]["result"] for i in (3, 5, 6, 7)]
    assert sorted(r.get("isError", False) for r in results) == [False, False, False, True]  # rpm 3, as single calls
    assert any("rate limit of 3 requests per minute" in r["content"][0]["text"] for r in results if r.get("isError"))
    assert by_id[8]["error"]["code"] == -32600 and by_id[9]["result"] == {}
    assert "delete_file" not in files[0].calls[len(calls_before) :]
    assert files[0].calls[len(calls_before) :].count("read_file") == 3
    assert access.line("req-batch.4")["status"] == 403 and access.line("req-batch.3")["key"] == "batch"
    assert sorted(access.line(f"req-batch.{i}")["status"] for i in (3, 5, 6, 7)) == [200, 200, 200, 429]


def test_batch_revisions(gateway: Any) -> None:
    """A batch of notifications only is a 202; a batch for a revision without batches is -32600, whole."""
    import orjson

    notes = orjson.dumps([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
    accepted = _post(gateway, notes, **{"mcp-protocol-version": "2025-03-26"})
    assert accepted.status_code == 202 and accepted.content == b""
    init = _element(1, "initialize", protocolVersion="2025-11-25", capabilities={},
                    clientInfo={"name": "t", "version": "1"})  # fmt: skip
    for body, headers in [
        ([_element(1, "ping")], {"mcp-protocol-version": "2025-06-18"}),
        ([_element(1, "ping")], {"mcp-protocol-version": LATEST_PROTOCOL_VERSION}),
        ([init, _element(2, "ping")], {}),  # the initialize in it asks for a revision without batches
        ([], {"mcp-protocol-version": "2025-03-26"}),
    ]:
        refused = _post(gateway, orjson.dumps(body), **headers)
        assert refused.status_code == 400, body
        assert refused.json()["error"]["code"] == -32600 and refused.json()["id"] is None


async def test_a_servers_changed_list_over_legacy_sse_is_read_at_once(gateway: Any) -> None:
    """The legacy-SSE server adds a tool and says so (the SDK negotiates 2026-07-28 over SSE too, so
    through ``subscriptions/listen``): its new tool is listed well within the 5 s check. (Last in
    this module: it changes the legacy server's list.)"""
    async with mcp_client(f"{gateway.url}/mcp", KEYS["legacy-user"]) as client:
        assert not (await client.call_tool("legacy_grow", {"name": "text"})).is_error
        started = time.monotonic()
        while "legacy_added_text" not in {t.name for t in (await client.list_tools()).tools}:
            assert time.monotonic() - started < 3.0, "the changed list was not read at once"
            await asyncio.sleep(0.05)
        assert (await client.call_tool("legacy_added_text", {})).content[0].text == "added text"  # type: ignore[union-attr]
