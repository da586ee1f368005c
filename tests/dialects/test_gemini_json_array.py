"""Gemini ``streamGenerateContent`` without ``alt=sse``: a streamed JSON array, through the gateway."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from gateway.dialects.base import EncodeContext
from gateway.dialects.gemini import CODEC
from gateway.events import BlockStart, End, MessageStart, StreamError, TextDelta, Usage
from gateway.ir import ChatRequest

HELLO = "Hello from the gateway. 你好 — ok!"
BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def stream_array(url: str, model: str, alt: str | None) -> httpx.Response:
    query = f"?alt={alt}" if alt else ""
    return httpx.post(f"{url}/v1beta/models/{model}:streamGenerateContent{query}", json=BODY, timeout=10)


@pytest.mark.parametrize("upstream", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_text_as_a_json_array(gateway: Any, upstream: str) -> None:
    r = stream_array(gateway.url, f"{upstream}--text", None)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    chunks = orjson.loads(r.content)
    assert isinstance(chunks, list) and len(chunks) >= 2
    text = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    assert text == HELLO
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] > 0


def test_tool_call_and_mid_stream_error(gateway: Any) -> None:
    chunks = orjson.loads(stream_array(gateway.url, "openai-chat--tool_call", None).content)
    calls = [p["functionCall"] for c in chunks for p in c["candidates"][0]["content"]["parts"] if "functionCall" in p]
    assert calls == [{"id": "call_weather_1", "name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}]
    chunks = orjson.loads(stream_array(gateway.url, "anthropic--error_mid_stream", None).content)
    assert "error" in chunks[-1] and chunks[-1]["error"]["code"] >= 500


def test_alt_sse_still_gets_sse(gateway: Any) -> None:
    r = stream_array(gateway.url, "gemini--text", "sse")
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.text.startswith("data: ")


def test_encoder_closes_the_array_even_with_nothing_in_it() -> None:
    req = ChatRequest(model="m", stream=True, stream_framing="json-array")
    enc = CODEC.stream_encoder(EncodeContext(model="m", upstream_dialect="anthropic", request=req))
    assert enc.keepalive() == b""
    out = enc.encode(StreamError("overloaded", "busy", 529))
    assert orjson.loads(out) == [{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}]
    enc = CODEC.stream_encoder(EncodeContext(model="m", upstream_dialect="anthropic", request=req))
    out = b"".join(
        enc.encode(e)
        for e in [
            MessageStart("r1", "m"),
            BlockStart(0, "text"),
            TextDelta(0, "a"),
            TextDelta(0, "b"),
            Usage(3, 2),
            End("stop"),
        ]
    )
    parsed = orjson.loads(out)
    assert [p["text"] for c in parsed for p in c["candidates"][0]["content"]["parts"]] == ["a", "b", ""]
    assert enc.encode(End("stop")) == b""


def test_an_upstream_answering_a_json_array_is_understood() -> None:
    # A Gemini upstream (or fake) that ignores alt=sse and answers the REST default: one JSON array.
    import asyncio
    import socket
    import threading
    from pathlib import Path

    from gateway.server.app import create_app
    from gateway.settings import Settings
    from tests.support.callers import openai_client
    from tests.support.fake_upstream import ServerThread

    capture = Path(__file__).resolve().parents[2] / "captures" / "gemini" / "text.sse"
    chunks = [orjson.loads(line[6:]) for line in capture.read_text().splitlines() if line.startswith("data: ")]
    payload = b"[" + b",\r\n".join(orjson.dumps(c) for c in chunks) + b"]"

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length:"))
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=UTF-8\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (len(payload), payload)
        )
        await writer.drain()
        writer.close()

    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(asyncio.start_server(serve, sock=sock))
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    settings = Settings(
        server={"access_log": False},
        auth={"keys_env": ""},
        store={"url": "sqlite://:memory:"},
        providers=[
            {"name": "g", "dialect": "gemini", "base_url": f"http://127.0.0.1:{port}", "api_key": "k", "max_retries": 0}
        ],
        routes=[{"model": "*", "provider": "g"}],
    )
    try:
        with ServerThread(create_app(settings)) as server:
            stream = openai_client(server.url).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            parts = list(stream)
            assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == HELLO
            assert [p.choices[0].finish_reason for p in parts if p.choices and p.choices[0].finish_reason] == ["stop"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
