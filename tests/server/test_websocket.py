"""Responses over WebSocket (gateway/server/websocket.py): Codex's fast mode, on every upstream dialect.

Callers are the ``websockets`` client (what Codex's tungstenite speaks on the wire) and the official
openai SDK's ``client.responses.connect()``; the upstreams are the fake on a loopback port, so
every turn goes through the real pipeline and a real upstream HTTP call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.conftest import UPSTREAM_DIALECTS, gateway_config
from tests.support.access_log import Capture, capture_access_log
from tests.support.fake_upstream import FakeUpstream, ServerThread

KEY = "gw-ws-key"
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
VOLATILE = {"id", "item_id", "created_at", "completed_at"}  # new per answer, over either transport


@pytest.fixture(scope="module")
def log() -> Iterator[Capture]:
    with capture_access_log() as capture:
        yield capture


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream, log: Capture) -> Iterator[ServerThread]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True)
    config["auth"] = {"keys": [KEY], "keys_env": ""}
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
        yield server


def ws_url(server: ServerThread) -> str:
    return f"ws://127.0.0.1:{server.port}/v1/responses"


def connect(server: ServerThread, key: str = KEY, **headers: str) -> Any:
    return websockets.connect(ws_url(server), additional_headers={"Authorization": f"Bearer {key}", **headers})


async def turn(ws: Any, **body: Any) -> list[dict[str, Any]]:
    """Send one ``response.create``; every frame until the turn's end (a terminal event, or an
    in-band refusal: an ``error`` with a ``status``)."""
    await ws.send(orjson.dumps({"type": "response.create", **body}).decode())
    frames = []
    while True:
        message = await asyncio.wait_for(ws.recv(), 10)
        assert isinstance(message, str), "every server event is a text frame"
        frame = orjson.loads(message)
        frames.append(frame)
        if frame["type"] in TERMINAL or (frame["type"] == "error" and "status" in frame):
            return frames


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def sse_events(server: ServerThread, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The same request over the SSE endpoint: its events' JSON, in order."""
    events = []
    with httpx.stream(
        "POST",
        server.url + "/v1/responses",
        json={**body, "stream": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(orjson.loads(line[5:].strip()))
    return events


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def final(frames: list[dict[str, Any]]) -> dict[str, Any]:
    assert frames[-1]["type"] == "response.completed", frames[-1]
    response: dict[str, Any] = frames[-1]["response"]
    return response


# ------------------------------------------------------------------ frames


@pytest.mark.parametrize("scenario", ["text", "tool_call"])
@pytest.mark.parametrize("dialect", UPSTREAM_DIALECTS)
def test_the_frames_are_the_sse_endpoints_events(gw: ServerThread, dialect: str, scenario: str) -> None:
    # store as the API's default (true): the HTTP answer is then re-encoded too (a kept turn never
    # takes the same-dialect frame passthrough), as every WebSocket turn is (the connection keeps it)
    body: dict[str, Any] = {"model": f"{dialect}--{scenario}", "input": "hello"}
    if scenario == "tool_call":
        body["tools"] = [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
        ]

    async def go() -> list[dict[str, Any]]:
        async with connect(gw) as ws:
            return await turn(ws, **body)

    frames = run(go())
    events = sse_events(gw, body)
    assert [f["type"] for f in frames] == [e["type"] for e in events]
    assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
    assert stable(frames) == stable(events)
    if scenario == "tool_call":
        assert any(item["type"] == "function_call" for item in final(frames)["output"])


def test_handshake_headers_and_compression(gw: ServerThread) -> None:
    async def go() -> Any:
        async with connect(gw, **{"OpenAI-Beta": "responses_websockets=2026-02-06"}) as ws:
            return ws.response.headers

    headers = run(go())
    assert headers["x-request-id"]
    assert headers["x-codex-turn-state"]
    assert "permessage-deflate" in headers["sec-websocket-extensions"]


def test_open_sockets_are_a_gauge(gw: ServerThread) -> None:
    def gauge() -> float:
        text = httpx.get(gw.url + "/metrics").text
        line = next(x for x in text.splitlines() if x.startswith("gateway_websocket_connections "))
        return float(line.split()[1])

    async def go() -> float:
        async with connect(gw), connect(gw):
            return gauge()

    assert run(go()) >= 2
    deadline = time.monotonic() + 3
    while gauge() > 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gauge() == 0


def test_the_turn_state_the_caller_sent_is_kept(gw: ServerThread) -> None:
    async def go() -> Any:
        async with websockets.connect(
            ws_url(gw), additional_headers={"Authorization": f"Bearer {KEY}", "x-codex-turn-state": "ts_mine"}
        ) as ws:
            return ws.response.headers

    assert run(go())["x-codex-turn-state"] == "ts_mine"


# ------------------------------------------------------------------ handshake refusals


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_a_refused_key_is_a_plain_http_401_before_the_upgrade(gw: ServerThread, fake: FakeUpstream, key: Any) -> None:
    before = len(fake.received)
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def go() -> None:
        async with websockets.connect(ws_url(gw), additional_headers=headers):
            pass

    with pytest.raises(InvalidStatus) as caught:
        run(go())
    response = caught.value.response
    assert response.status_code == 401
    assert (
        orjson.loads(response.body)["error"]["type"] == "invalid_request_error"
        or orjson.loads(response.body)["error"]["message"]
    )
    assert len(fake.received) == before


# ------------------------------------------------------------------ state


def test_a_continuation_sends_only_the_new_items(gw: ServerThread, fake: FakeUpstream) -> None:
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect(gw) as ws:
            first = final(await turn(ws, model="anthropic--tool_call", input="weather?", tools=tools, store=False))
            call = next(item for item in first["output"] if item["type"] == "function_call")
            second = final(
                await turn(
                    ws,
                    model="anthropic--text",
                    previous_response_id=first["id"],
                    input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}],
                    tools=tools,
                    store=False,
                )
            )
            return call, second

    call, second = run(go())
    assert second["status"] == "completed"
    sent = fake.last("anthropic").body["messages"]
    assert sent[0]["content"][0]["text"] == "weather?"
    assert any(b.get("type") == "tool_use" and b["id"] == call["call_id"] for b in sent[1]["content"])
    assert sent[2]["content"][0]["type"] == "tool_result" and sent[2]["content"][0]["tool_use_id"] == call["call_id"]


def test_an_unknown_previous_id_is_openais_error_in_band(gw: ServerThread) -> None:
    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with connect(gw) as ws:
            refused = await turn(ws, model="openai-chat--text", input="x", previous_response_id="resp_unknown")
            after = await turn(ws, model="openai-chat--text", input="still there?", store=False)
            return refused, after

    refused, after = run(go())
    assert refused == [
        {
            "type": "error",
            "status": 400,
            "error": {
                "message": "Previous response with id 'resp_unknown' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            },
            "headers": refused[0]["headers"],
        }
    ]
    assert final(after)["status"] == "completed"  # the socket stays usable


def test_a_store_false_turn_is_not_known_to_another_connection(gw: ServerThread) -> None:
    async def go() -> list[dict[str, Any]]:
        async with connect(gw) as ws:
            first = final(await turn(ws, model="gemini--text", input="hi", store=False))
        async with connect(gw) as ws:
            return await turn(ws, model="gemini--text", input="again", previous_response_id=first["id"], store=False)

    refused = run(go())
    assert refused[0]["error"]["code"] == "previous_response_not_found"


def test_a_prewarm_is_answered_without_an_upstream_call(gw: ServerThread, fake: FakeUpstream) -> None:
    async def go() -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
        async with connect(gw) as ws:
            before = len(fake.received)
            warm = await turn(
                ws, model="openai-responses--text", instructions="be brief", input="first", generate=False, store=False
            )
            after_warm = len(fake.received) - before
            answer = final(
                await turn(
                    ws, model="openai-responses--text", previous_response_id=warm[-1]["response"]["id"], input="second"
                )
            )
            return warm, after_warm, answer

    warm, calls, answer = run(go())
    assert calls == 0
    assert [f["type"] for f in warm] == ["response.created", "response.in_progress", "response.completed"]
    assert [f["sequence_number"] for f in warm] == [0, 1, 2]
    done = warm[-1]["response"]
    assert done["status"] == "completed" and done["output"] == [] and done["id"].startswith("resp_")
    assert answer["status"] == "completed"
    sent = fake.last("openai-responses").body
    texts = [part["text"] for item in sent["input"] for part in item["content"]]
    assert texts == ["first", "second"]  # the prewarm's input, then the new item; no empty assistant turn


def test_a_store_true_chain_survives_a_reconnect(gw: ServerThread, fake: FakeUpstream) -> None:
    async def go() -> dict[str, Any]:
        async with connect(gw) as ws:
            first = final(await turn(ws, model="openai-chat--text", input="remember me", store=True))
        async with connect(gw) as ws:  # a new connection: only the store knows the first turn
            return final(await turn(ws, model="openai-chat--text", input="who?", previous_response_id=first["id"]))

    assert run(go())["status"] == "completed"
    sent = fake.last("openai-chat").body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] in ("remember me", [{"type": "text", "text": "remember me"}])


# ------------------------------------------------------------------ errors and hang-ups


def test_an_upstream_429_is_in_band_and_the_socket_stays_usable(gw: ServerThread) -> None:
    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with connect(gw) as ws:
            refused = await turn(ws, model="anthropic--error_429", input="x", store=False)
            after = await turn(ws, model="anthropic--text", input="y", store=False)
            return refused, after

    refused, after = run(go())
    assert len(refused) == 1
    error = refused[0]
    assert error["type"] == "error" and error["status"] == 429
    assert error["error"]["message"] and "type" in error["error"]
    assert error["headers"]["x-request-id"]
    assert final(after)["status"] == "completed"


def test_a_frame_that_is_not_json_is_refused_in_band(gw: ServerThread) -> None:
    async def go() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with connect(gw) as ws:
            await ws.send("not json")
            refused = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
            await ws.send(orjson.dumps({"type": "response.processed", "response_id": "resp_x"}).decode())  # Codex's
            return refused, await turn(ws, model="anthropic--text", input="y", store=False)

    refused, after = run(go())
    assert refused["type"] == "error" and refused["status"] == 400
    assert final(after)["status"] == "completed"


def test_hanging_up_mid_turn_closes_the_upstream_at_once(gw: ServerThread, fake: FakeUpstream) -> None:
    async def go() -> None:
        async with connect(gw) as ws:
            await ws.send(
                orjson.dumps({"type": "response.create", "model": "anthropic--slow_stream", "input": "long"}).decode()
            )
            for _ in range(5):
                await asyncio.wait_for(ws.recv(), 5)

    run(go())
    closed_at = time.monotonic()
    deadline = closed_at + 3
    record = fake.last("anthropic")
    while not record.disconnected and time.monotonic() < deadline:
        time.sleep(0.02)
    assert record.disconnected
    assert record.disconnected_at is not None and record.disconnected_at - closed_at < 1.0


# ------------------------------------------------------------------ the rest of the gateway


def test_one_access_log_line_per_turn_over_websocket(gw: ServerThread, log: Capture) -> None:
    async def go() -> str:
        async with connect(gw) as ws:
            await turn(ws, model="anthropic--text", input="one", store=False)
            await turn(ws, model="anthropic--text", input="two", generate=False, store=False)
            return str(ws.response.headers["x-request-id"])

    conn = run(go())
    first, second = log.line(f"{conn}-1"), log.line(f"{conn}-2")
    assert first["transport"] == "websocket" and first["provider"] == "up-anthropic" and first["status"] == 200
    assert first["output_tokens"]
    assert second["transport"] == "websocket" and second["provider"] is None  # the prewarm: no upstream


def test_the_openai_sdk_connect_runs_a_chain(gw: ServerThread) -> None:
    async def go() -> tuple[str, str]:
        client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=KEY)
        async with client.responses.connect() as conn:
            ids, texts = [], []
            for text, previous in (("hi", None), ("again", "chain")):
                await conn.response.create(
                    model="gemini--text",
                    input=text,
                    store=False,
                    **({"previous_response_id": ids[-1]} if previous else {}),
                )
                async for event in conn:
                    if event.type == "response.completed":
                        ids.append(event.response.id)
                        texts.append(event.response.output_text)
                        break
                    assert event.type != "error", event
        return texts[0], texts[1]

    first, second = run(go())
    assert first and second


# ------------------------------------------------------------------ bounds and configuration


@pytest.fixture(scope="module")
def bounded(fake: FakeUpstream) -> Iterator[ServerThread]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["websocket"] = {"idle_timeout": 0.4, "max_message_bytes": 2000}
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
        yield server


def test_an_idle_connection_is_closed_with_a_close_frame(bounded: ServerThread) -> None:
    async def go() -> Any:
        async with websockets.connect(ws_url(bounded)) as ws:
            with pytest.raises(ConnectionClosed) as caught:
                await asyncio.wait_for(ws.recv(), 5)
            return caught.value.rcvd

    close = run(go())
    assert close is not None and close.code == 1000


def test_a_message_over_the_size_limit_closes_with_1009(bounded: ServerThread) -> None:
    async def go() -> Any:
        async with websockets.connect(ws_url(bounded)) as ws:
            await ws.send(orjson.dumps({"type": "response.create", "model": "x", "input": "a" * 5000}).decode())
            with pytest.raises(ConnectionClosed) as caught:
                await asyncio.wait_for(ws.recv(), 5)
            return caught.value.rcvd

    close = run(go())
    assert close is not None and close.code == 1009


def test_with_websockets_off_the_handshake_is_426(fake: FakeUpstream) -> None:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["websocket"] = {"enabled": False}
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:

        async def go() -> None:
            async with websockets.connect(ws_url(server)):
                pass

        with pytest.raises(InvalidStatus) as caught:
            run(go())
    assert caught.value.response.status_code == 426


def test_shutdown_lets_the_running_turn_finish_then_closes(fake: FakeUpstream) -> None:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    server = ServerThread(create_app(Settings(**config)), **uvicorn_options())
    with server:

        async def go() -> tuple[list[dict[str, Any]], Any]:
            async with websockets.connect(ws_url(server)) as ws:
                await ws.send(
                    orjson.dumps({"type": "response.create", "model": "anthropic--pause", "input": "x"}).decode()
                )
                frames = [orjson.loads(await asyncio.wait_for(ws.recv(), 5))]
                server.server.should_exit = True  # SIGTERM, as uvicorn sees it
                try:
                    while True:
                        frames.append(orjson.loads(await asyncio.wait_for(ws.recv(), 10)))
                except ConnectionClosed as closed:
                    return frames, closed.rcvd

        frames, close = run(go())
    assert frames[-1]["type"] == "response.completed"
    assert close is not None and close.code == 1001


def test_a_connection_past_its_max_seconds_gets_openais_limit_error_then_a_close(fake: FakeUpstream) -> None:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["websocket"] = {"max_seconds": 0.5}
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:

        async def go() -> tuple[list[dict[str, Any]], dict[str, Any], Any]:
            async with websockets.connect(ws_url(server)) as ws:
                answered = await turn(ws, model="anthropic--text", input="in time", store=False)
                limit = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
                with pytest.raises(ConnectionClosed) as caught:
                    await asyncio.wait_for(ws.recv(), 5)
                return answered, limit, caught.value.rcvd

        answered, limit, close = run(go())
    assert final(answered)["status"] == "completed"
    assert limit["type"] == "error" and limit["error"]["code"] == "websocket_connection_limit_reached"
    assert close is not None and close.code == 1000


def test_a_keys_rate_limit_is_a_429_in_band(fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WS_LIMITED_KEY", "gw-limited-secret")
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["keys"] = [{"name": "limited", "key_env": "WS_LIMITED_KEY", "rpm": 1}]
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:

        async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            async with connect(server, key="gw-limited-secret") as ws:
                first = await turn(ws, model="anthropic--text", input="one", store=False)
                second = await turn(ws, model="anthropic--text", input="two", store=False)
                return first, second

        first, second = run(go())
    assert final(first)["status"] == "completed"
    assert second[0]["type"] == "error" and second[0]["status"] == 429
    assert int(second[0]["headers"]["retry-after"]) >= 1


def test_a_store_false_chain_keeps_the_thinking_signature(gw: ServerThread, fake: FakeUpstream) -> None:
    """The connection keeps turns as the gateway's own history, so a signature Anthropic requires
    back comes back even though the caller never asked for ``reasoning.encrypted_content``."""

    async def go() -> None:
        async with connect(gw) as ws:
            first = final(await turn(ws, model="anthropic--thinking", input="think", store=False))
            final(await turn(ws, model="anthropic--text", input="more", previous_response_id=first["id"], store=False))

    run(go())
    assistant = fake.last("anthropic").body["messages"][1]
    thinking = [block for block in assistant["content"] if block["type"] == "thinking"]
    assert thinking and thinking[0]["signature"]
