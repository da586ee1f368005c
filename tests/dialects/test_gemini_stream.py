"""Gemini stream/whole decode + encode, checked against captures and the official google-genai SDK."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from gateway.dialects.base import EncodeContext
from gateway.dialects.gemini import CODEC
from gateway.dialects.gemini.sigs import from_caller, to_caller
from gateway.dialects.gemini.stream_decode import GeminiStreamDecoder
from gateway.dialects.signatures import pack
from gateway.errors import GatewayError
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    MessageStart,
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.sse import SSEDecoder, SSEFrame
from gateway.ir import ChatRequest, Thinking
from gateway.reply import fold, unfold
from tests.support.event_contract import check_events

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures" / "gemini"
PUBLIC = ROOT.parent / "shared" / "captures-public" / "gemini"


def decode_bytes(data: bytes, split: int | None = None):
    sse = SSEDecoder()
    dec = CODEC.stream_decoder()
    events = []
    pieces = [data] if not split else [data[i : i + split] for i in range(0, len(data), split)]
    for piece in pieces:
        for frame in sse.feed(piece):
            events.extend(dec.feed(frame))
    sse.close()
    events.extend(dec.close())
    return events


def decode_file(path: Path, split: int | None = None):
    return decode_bytes(path.read_bytes(), split)


# -- captures-public (real recordings) ---------------------------------------------------------

public_files = sorted(PUBLIC.glob("*.sse")) if PUBLIC.is_dir() else []


@pytest.mark.skipif(not public_files, reason="captures-public/gemini not available")
@pytest.mark.parametrize("path", public_files, ids=lambda p: p.name)
def test_public_capture_decodes(path):
    events = decode_file(path)
    check_events(events)
    assert isinstance(events[-1], End)
    again = decode_file(path, split=7)  # byte-split anywhere: same events (generated ids aside)
    assert [type(e) for e in again] == [type(e) for e in events]
    assert fold(again).text == fold(events).text and fold(again).usage == fold(events).usage


def _public(name):
    path = PUBLIC / name
    if not path.exists():
        pytest.skip("captures-public/gemini not available")
    return fold(decode_file(path))


def test_public_text_signature_and_usage_last_wins():
    reply = _public("text.sse")
    assert reply.text == 'There are **3** "r"s in strawberry.\n\nst**r**awbe**rr**y'
    assert [b.kind for b in reply.blocks] == ["text", "thinking"]
    assert reply.blocks[1].signature.startswith("EqsFCqgFAb4")
    # 3 chunks each with usage: the last chunk's numbers, not summed
    assert (reply.usage.input, reply.usage.output, reply.usage.reasoning) == (9, 23 + 185, 185)
    assert reply.end.reason == "stop" and reply.end.raw_reason == "STOP"


def test_public_tool_call_gets_signed_thinking_first():
    reply = _public("tool-call.sse")
    assert [b.kind for b in reply.blocks] == ["thinking", "tool_call"]
    assert reply.blocks[0].signature.startswith("EqUCCqICAb4")
    assert reply.blocks[1].name == "weather" and orjson.loads(reply.blocks[1].arguments) == {
        "location": "San Francisco"
    }
    assert reply.blocks[1].id.startswith("call_")
    assert reply.end.reason == "tool_use" and reply.end.raw_reason == "STOP"


def test_public_text_then_tool_call_keeps_id():
    reply = _public("text-then-tool-call.sse")
    assert [b.kind for b in reply.blocks] == ["text", "thinking", "tool_call"]
    assert reply.blocks[2].id == "g1bmv6il"


def test_public_vertex_streamed_args():
    reply = _public("vertex-parallel-calls-streamed-args.sse")
    calls = [b for b in reply.blocks if b.kind == "tool_call"]
    assert [orjson.loads(c.arguments) for c in calls] == [{"location": "Boston"}, {"location": "San Francisco"}]
    assert calls[0].id != calls[1].id
    assert reply.usage.input == 26 and reply.usage.output == 23 + 132
    assert reply.end.reason == "tool_use"


def test_public_thought_parts_and_max_tokens():
    reply = _public("thought-parts.sse")
    assert [b.kind for b in reply.blocks] == ["thinking", "text"]
    assert reply.blocks[1].text == "hello"
    reply = _public("thinking-max-tokens.sse")
    assert reply.end.reason == "length" and reply.usage.output == 59 and reply.usage.reasoning == 59


def test_public_filters_and_malformed():
    assert _public("safety-finish.sse").end.reason == "content_filter"
    blocked = _public("prompt-blocked.sse")
    assert blocked.end.reason == "content_filter" and blocked.blocks == []
    bad = _public("malformed-function-call.sse")
    assert bad.end.reason == "error" and bad.end.raw_reason == "MALFORMED_FUNCTION_CALL"


# -- our captures (SCENARIOS.md answers) --------------------------------------------------------


def cap(name):
    return fold(decode_file(CAPTURES / name))


def usage_tuple(u):
    return (u.input, u.cache_read, u.output, u.reasoning)


def test_capture_text():
    r = cap("text.sse")
    assert r.text == "Hello from the gateway. 你好 — ok!"
    assert r.end.reason == "stop" and usage_tuple(r.usage) == (30, 10, 12, None)
    assert r.model == "gemini-2.5-flash"


def test_capture_tool_call():
    r = cap("tool_call.sse")
    assert [b.kind for b in r.blocks] == ["text", "tool_call"]
    assert r.text == "Let me check."
    call = r.blocks[1]
    assert (call.id, call.name, orjson.loads(call.arguments)) == (
        "call_weather_1",
        "get_weather",
        {"city": "Paris", "unit": "celsius"},
    )
    assert r.end.reason == "tool_use" and usage_tuple(r.usage) == (50, None, 20, None)


def test_capture_parallel():
    r = cap("parallel_tool_calls.sse")
    assert [(b.id, b.name, orjson.loads(b.arguments)) for b in r.blocks] == [
        ("call_p1", "get_weather", {"city": "Paris"}),
        ("call_p2", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert r.end.reason == "tool_use" and usage_tuple(r.usage) == (60, None, 30, None)


def test_capture_tool_result_turn_and_max_tokens():
    r = cap("tool_result_turn.sse")
    assert r.text == "It is 18°C in Paris." and r.end.reason == "stop" and usage_tuple(r.usage) == (80, None, 10, None)
    r = cap("max_tokens.sse")
    assert r.text == "The answer is cut" and r.end.reason == "length" and r.end.raw_reason == "MAX_TOKENS"
    assert usage_tuple(r.usage) == (30, None, 16, None)


def test_capture_thinking():
    r = cap("thinking.sse")
    assert [b.kind for b in r.blocks] == ["thinking", "text"]
    assert r.blocks[0].text == "The user wants a greeting. I will say hi."
    assert r.blocks[0].signature == "c2lnLWFiYzEyMw=="
    assert r.text == "Hi there!" and usage_tuple(r.usage) == (30, None, 40, 25)


def test_capture_long_500_usage_not_summed():
    events = decode_file(CAPTURES / "long_500.sse")
    r = fold(events)
    assert r.text == "".join(f"w{i} " for i in range(500))
    assert usage_tuple(r.usage) == (30, None, 500, None)  # 500 chunks each carry usage: last wins
    usages = [e for e in events if isinstance(e, Usage)]
    assert len(usages) == 2  # the prompt's count at once, the final counts before End: never one per chunk
    assert usages[0] == Usage(input=30) and events.index(usages[0]) < next(
        i for i, e in enumerate(events) if isinstance(e, BlockStart)
    )


def test_prompt_tokens_go_out_with_the_first_chunk():
    """The first chunk's ``promptTokenCount`` is emitted before that chunk's blocks (the final usage
    still comes before End), so an encoder writing its start can show the input tokens."""
    decoder = GeminiStreamDecoder()
    first = decoder.feed(
        SSEFrame(
            orjson.dumps(
                {
                    "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}}],
                    "usageMetadata": {"promptTokenCount": 7, "cachedContentTokenCount": 3, "candidatesTokenCount": 1},
                    "modelVersion": "m",
                }
            ).decode()
        )
    )
    assert [type(e).__name__ for e in first] == ["MessageStart", "Usage", "BlockStart", "TextDelta"]
    assert first[1] == Usage(input=7, cache_read=3)
    assert not any(
        isinstance(e, Usage)
        for e in decoder.feed(
            SSEFrame(
                orjson.dumps(
                    {
                        "candidates": [
                            {"content": {"parts": [{"text": "!"}], "role": "model"}, "finishReason": "STOP"}
                        ],
                        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2},
                    }
                ).decode()
            )
        )
    )
    last = decoder.close()
    assert [e for e in last if isinstance(e, Usage)] == [Usage(input=7, output=2)]


def test_capture_error_mid_stream():
    events = decode_file(CAPTURES / "error_mid_stream.sse")
    check_events(events)
    err = events[-1]
    assert isinstance(err, StreamError)
    assert (err.kind, err.status, err.raw, err.message) == (
        "overloaded",
        503,
        "UNAVAILABLE",
        "The model is overloaded.",
    )
    assert fold(events).text == "Partial"


@pytest.mark.parametrize("name", ["cut_mid_event.sse", "no_terminator.sse"])
def test_capture_truncations(name):
    events = decode_file(CAPTURES / name)
    check_events(events)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"


def test_http_errors():
    e429 = CODEC.decode_error(429, (CAPTURES / "error_429.json").read_bytes())
    assert (e429.kind, e429.status, e429.raw, e429.origin) == ("rate_limit", 429, "RESOURCE_EXHAUSTED", "gemini")
    e500 = CODEC.decode_error(500, (CAPTURES / "error_500.json").read_bytes())
    assert (e500.kind, e500.raw) == ("api_error", "INTERNAL")
    assert CODEC.render_error(e429) == (
        429,
        {"error": {"code": 429, "message": e429.message, "status": "RESOURCE_EXHAUSTED"}},
    )
    status, body = CODEC.render_error(
        GatewayError("overloaded", "busy", 529, raw="overloaded_error", origin="anthropic")
    )
    assert status == 503 and body["error"]["status"] == "UNAVAILABLE"
    retry = CODEC.decode_error(
        429,
        b'[{"error":{"code":429,"message":"q","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}]',
    )
    assert retry.retry_after == 26.0 and retry.kind == "rate_limit"
    assert CODEC.decode_error(502, b"<html>bad</html>").kind == "api_error"


def test_malformed_json_frame_is_bad_gateway():
    events = decode_bytes(b'data: {"candidates": [\r\n\r\n')
    assert isinstance(events[-1], StreamError) and events[-1].kind == "bad_gateway"


# -- whole bodies ----------------------------------------------------------------------------


def test_decode_whole_and_array_body():
    body = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "hi"},
                        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "c2ln"},
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3, "totalTokenCount": 8},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    r = fold(CODEC.decode_whole(body))
    assert [b.kind for b in r.blocks] == ["text", "thinking", "tool_call"] and r.end.reason == "tool_use"
    assert r.id == "r1" and r.usage.output == 3
    r2 = fold(
        CODEC.decode_whole(
            [
                {"candidates": [{"content": {"parts": [{"text": "a"}]}}]},
                {"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "STOP"}]},
            ]
        )
    )
    assert r2.text == "ab" and r2.end.reason == "stop"


# -- encoder → official SDK --------------------------------------------------------------------


def ctx(upstream="anthropic", include_thoughts=True):
    thinking = Thinking(include_thoughts=True) if include_thoughts else None
    return EncodeContext(
        model="my-gemini", upstream_dialect=upstream, request=ChatRequest(model="my-gemini", thinking=thinking)
    )


def encode(events, upstream="anthropic"):
    enc = CODEC.stream_encoder(ctx(upstream))
    return b"".join(enc.encode(e) for e in events)


def sdk_client(body: bytes, content_type="text/event-stream", status=200):
    from google import genai
    from google.genai import types

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": content_type})

    transport = httpx.MockTransport(handler)
    opts = types.HttpOptions(
        base_url="http://gateway.test",
        httpx_client=httpx.Client(transport=transport),
        httpx_async_client=httpx.AsyncClient(transport=transport),
    )
    return genai.Client(api_key="x", http_options=opts)


SAMPLE = [
    MessageStart("msg_1", "claude-x"),
    BlockStart(0, "thinking"),
    ThinkingDelta(0, "Let me think."),
    SignatureDelta(0, "sigA"),
    BlockStop(0),
    BlockStart(1, "text"),
    TextDelta(1, "Hello "),
    TextDelta(1, "wörld"),
    BlockStop(1),
    BlockStart(2, "tool_call", "toolu_1", "get_weather"),
    ToolArgsDelta(2, '{"city": '),
    ToolArgsDelta(2, '"Paris"}'),
    BlockStop(2),
    Usage(input=30, output=40, cache_read=10, reasoning=25),
    End("tool_use", "tool_use"),
]


def test_sdk_parses_encoded_stream():
    data = encode(SAMPLE)
    assert data.endswith(b"}\r\n\r\n") and b"\r\n\r\ndata: " in data
    client = sdk_client(data)
    chunks = list(client.models.generate_content_stream(model="my-gemini", contents="hi"))
    parts = [p for c in chunks for p in (c.candidates[0].content.parts or [])]
    thought = [p for p in parts if p.thought]
    assert thought[0].text == "Let me think."
    text_parts = [p for p in parts if p.text and not p.thought]
    assert "".join(p.text for p in text_parts) == "Hello wörld"
    # the SDK holds base64-decoded bytes: our packed form survives its validation
    assert text_parts[0].thought_signature == pack("anthropic", "sigA").encode()
    calls = [p.function_call for p in parts if p.function_call]
    assert [(c.id, c.name, c.args) for c in calls] == [("toolu_1", "get_weather", {"city": "Paris"})]
    last = chunks[-1]
    assert last.candidates[0].finish_reason.value == "STOP"
    u = last.usage_metadata
    assert (
        u.prompt_token_count,
        u.candidates_token_count,
        u.thoughts_token_count,
        u.cached_content_token_count,
        u.total_token_count,
    ) == (30, 15, 25, 10, 70)
    assert last.model_version == "my-gemini" and last.response_id == "msg_1"
    # what we encode decodes back to the same answer (and the signature unpacks for its origin)
    back = fold(decode_bytes(data))
    assert from_caller(back.blocks[0].signature) == ("anthropic", "sigA") and back.blocks[2].name == "get_weather"
    assert back.text == "Hello wörld" and back.end.reason == "tool_use"


async def test_sdk_async_stream_and_error_raises():
    from google.genai import errors

    data = encode(
        [
            MessageStart("m", "x"),
            BlockStart(0, "text"),
            TextDelta(0, "Partial"),
            StreamError("overloaded", "Overloaded", 503, "overloaded_error"),
        ]
    )
    assert data.endswith(b'data: {"error":{"code":503,"message":"Overloaded","status":"UNAVAILABLE"}}\r\n\r\n')
    client = sdk_client(data)
    got = []
    with pytest.raises(errors.APIError) as info:
        async for chunk in await client.aio.models.generate_content_stream(model="m", contents="hi"):
            got.append(chunk.text)
    assert got == ["Partial"] and info.value.code == 503
    with pytest.raises(errors.APIError):
        list(sdk_client(data).models.generate_content_stream(model="m", contents="hi"))


def test_error_keeps_gemini_status_for_gemini_upstream():
    data = encode(
        [MessageStart("m", "x"), StreamError("rate_limit", "quota", 429, "RESOURCE_EXHAUSTED")], upstream="gemini"
    )
    assert orjson.loads(data[6:]) == {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}


def test_raw_finish_reason_kept_for_gemini_upstream():
    events = decode_file(CAPTURES / "max_tokens.sse")
    data = encode(events, upstream="gemini")
    chunks = list(sdk_client(data).models.generate_content_stream(model="m", contents="hi"))
    assert chunks[-1].candidates[0].finish_reason.value == "MAX_TOKENS"
    assert "".join(c.text or "" for c in chunks) == "The answer is cut"
    assert chunks[-1].usage_metadata.candidates_token_count == 16


@pytest.mark.parametrize(
    "name", ["text.sse", "tool_call.sse", "parallel_tool_calls.sse", "thinking.sse", "long_500.sse"]
)
def test_capture_reencode_roundtrip(name):
    events = decode_file(CAPTURES / name)
    again = fold(decode_bytes(encode(events, upstream="gemini")))
    first = fold(events)
    assert [(b.kind, b.text, b.name, b.signature) for b in again.blocks] == [
        (b.kind, b.text, b.name, b.signature) for b in first.blocks
    ]
    assert usage_tuple(again.usage) == usage_tuple(first.usage) or (again.usage.output == first.usage.output)
    assert again.end.reason == first.end.reason


def test_keepalive_is_empty():
    assert CODEC.stream_encoder(ctx()).keepalive() == b""


def test_sdk_parses_encode_whole():
    reply = fold(SAMPLE)
    body = CODEC.encode_whole(reply, ctx())
    resp = sdk_client(orjson.dumps(body), "application/json").models.generate_content(model="my-gemini", contents="hi")
    assert resp.text == "Hello wörld"
    assert resp.function_calls[0].name == "get_weather" and resp.function_calls[0].args == {"city": "Paris"}
    assert resp.candidates[0].finish_reason.value == "STOP"
    assert resp.usage_metadata.total_token_count == 70
    # and it decodes back into the same reply
    back = fold(CODEC.decode_whole(body))
    assert [b.kind for b in back.blocks] == ["thinking", "text", "tool_call"]
    assert from_caller(back.blocks[0].signature) == ("anthropic", "sigA")


def test_unfold_of_whole_equals_stream_fold():
    reply = fold(decode_file(CAPTURES / "thinking.sse"))
    again = fold(unfold(reply))
    assert again.blocks == reply.blocks


def test_signature_survives_sdk_roundtrip():
    """The SDK re-sends bytes URL-safe encoded; the parser must still find the origin."""
    import base64

    packed = to_caller("anthropic", "EqA+/sig==")
    urlsafe = base64.urlsafe_b64encode(base64.b64decode(packed)).decode()
    assert from_caller(packed) == from_caller(urlsafe) == ("anthropic", "EqA+/sig==")
    assert from_caller("gw~openai-responses~abc") == ("openai-responses", "abc")
    assert from_caller("EqsFCqgFAb4-9vvt_A") == ("gemini", "EqsFCqgFAb4-9vvt_A")
    assert to_caller("gemini", "EqsF") == "EqsF"


def test_partial_args_paths():
    from gateway.dialects.gemini.stream_decode import _apply_partial

    args: dict = {}
    _apply_partial(
        args,
        [
            {"jsonPath": "$.q", "stringValue": "hel"},
            {"jsonPath": "$.q", "stringValue": "lo"},
            {"jsonPath": "$.opts.n", "numberValue": 3},
            {"jsonPath": "$.tags[1]", "stringValue": "b"},
            {"jsonPath": "$.tags[0]", "stringValue": "a"},
            {"jsonPath": "$.flag", "boolValue": True},
            {"jsonPath": "$['odd key']", "nullValue": None},
        ],
    )
    assert args == {"q": "hello", "opts": {"n": 3}, "tags": ["a", "b"], "flag": True, "odd key": None}


def test_signature_only_block_goes_back_on_the_function_call():
    events = [
        MessageStart("r", "m"),
        BlockStart(0, "thinking"),
        SignatureDelta(0, "EqSIG"),
        BlockStop(0),
        BlockStart(1, "tool_call", "c1", "f"),
        ToolArgsDelta(1, "{}"),
        BlockStop(1),
        End("tool_use", "STOP"),
    ]
    data = encode(events, upstream="gemini")
    first = orjson.loads(data.split(b"\r\n\r\n")[0][6:])
    assert first["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": "EqSIG"}
    ]
    last = orjson.loads(data.split(b"\r\n\r\n")[-2][6:])
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0}


def test_thought_text_only_for_include_thoughts():
    # Gemini returns thought parts only when thinkingConfig.includeThoughts is true; the
    # signature still reaches the caller, on the next part.
    assert b"Let me think." in b"".join(
        CODEC.stream_encoder(ctx(include_thoughts=False)).encode(e) for e in SAMPLE
    )  # Anthropic: kept
    enc = CODEC.stream_encoder(ctx("gemini", include_thoughts=False))
    data = b"".join(enc.encode(e) for e in SAMPLE)
    assert b"Let me think." not in data and b'"thought":true' not in data
    parts = [
        p
        for line in data.split(b"\r\n\r\n")
        if line
        for p in orjson.loads(line[6:])["candidates"][0]["content"]["parts"]
    ]
    assert parts[0]["text"] == "Hello " and parts[0]["thoughtSignature"]
    from gateway.dialects.gemini.whole import encode_whole
    from gateway.reply import fold

    whole = encode_whole(fold(SAMPLE), ctx("openai-responses", include_thoughts=False))
    assert [p.get("thought") for p in whole["candidates"][0]["content"]["parts"]] == [None, None]
