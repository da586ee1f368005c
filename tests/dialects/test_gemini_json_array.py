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
    out = b"".join(enc.encode(e) for e in [MessageStart("r1", "m"), BlockStart(0, "text"), TextDelta(0, "a"), TextDelta(0, "b"), Usage(3, 2), End("stop")])
    parsed = orjson.loads(out)
    assert [p["text"] for c in parsed for p in c["candidates"][0]["content"]["parts"]] == ["a", "b", ""]
    assert enc.encode(End("stop")) == b""
