"""openai-chat encoding, checked with the official openai SDK reading our bytes (httpx.MockTransport)."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from gateway.dialects.base import EncodeContext
from gateway.dialects.openai_chat import CODEC
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
from gateway.ir import ChatRequest, ThinkingPart, ToolCallPart
from gateway.reply import fold

from .test_openai_chat_decode import CAPTURES, decode_bytes, decode_file

MSGS = [{"role": "user", "content": "hi"}]


def ctx(include_usage: bool = True, upstream: str = "anthropic") -> EncodeContext:
    return EncodeContext(
        model="smart", upstream_dialect=upstream, request=ChatRequest(model="smart", include_usage=include_usage)
    )


def encode(events, c: EncodeContext) -> bytes:
    enc = CODEC.stream_encoder(c)
    return b"".join(enc.encode(e) for e in events)


def client_for(body: bytes, status: int = 200, content_type: str = "text/event-stream") -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type}, content=body)

    return openai.OpenAI(
        base_url="http://gw.test/v1",
        api_key="x",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


TOOL_EVENTS = [
    MessageStart("msg_1", "claude"),
    BlockStart(0, "thinking"),
    ThinkingDelta(0, "Let me "),
    ThinkingDelta(0, "think."),
    SignatureDelta(0, "c2lnLWFiYzEyMw=="),
    BlockStop(0),
    BlockStart(1, "text"),
    TextDelta(1, "Checking"),
    TextDelta(1, " now."),
    BlockStop(1),
    BlockStart(2, "tool_call", id="toolu_1", name="get_weather"),
    ToolArgsDelta(2, '{"city":'),
    ToolArgsDelta(2, ' "Paris"}'),
    BlockStop(2),
    BlockStart(3, "tool_call", id="toolu_2", name="get_time"),
    ToolArgsDelta(3, '{"tz": "CET"}'),
    BlockStop(3),
    Usage(input=30, output=40, cache_read=10, reasoning=25),
    End("tool_use", "tool_use"),
]


def test_sdk_stream_iteration_with_usage() -> None:
    body = encode(TOOL_EVENTS, ctx())
    assert body.endswith(b"data: [DONE]\n\n")
    chunks = list(client_for(body).chat.completions.create(model="smart", messages=MSGS, stream=True))
    assert all(c.model == "smart" and c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    assert all(c.usage is None for c in chunks[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage.prompt_tokens == 30 and last.usage.completion_tokens == 40
    assert last.usage.total_tokens == 70
    assert last.usage.prompt_tokens_details.cached_tokens == 10
    assert last.usage.completion_tokens_details.reasoning_tokens == 25
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Checking now."
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content", "") for c in chunks if c.choices
    )
    assert reasoning == "Let me think."
    # exactly one usage chunk
    assert sum(1 for c in chunks if c.usage is not None) == 1


def test_sdk_stream_helper_final_completion() -> None:
    body = encode(TOOL_EVENTS, ctx())
    with client_for(body).chat.completions.stream(model="smart", messages=MSGS) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_completion()
    assert "content.done" in kinds and "tool_calls.function.arguments.done" in kinds
    msg = final.choices[0].message
    assert msg.content == "Checking now."
    assert [t.function.name for t in msg.tool_calls] == ["get_weather", "get_time"]
    assert orjson.loads(msg.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert orjson.loads(msg.tool_calls[1].function.arguments) == {"tz": "CET"}
    # the thinking signature rides on the next tool call id; the second id is plain
    assert msg.tool_calls[0].id == "toolu_1~gw~anthropic~c2lnLWFiYzEyMw=="
    assert msg.tool_calls[1].id == "toolu_2"
    assert final.choices[0].finish_reason == "tool_calls" and final.usage.completion_tokens == 40


def test_signature_round_trip_through_parser() -> None:
    body = encode(TOOL_EVENTS, ctx(upstream="gemini"))
    with client_for(body).chat.completions.stream(model="smart", messages=MSGS) as stream:
        final = stream.get_final_completion()
    msg = final.choices[0].message
    req = CODEC.parse_request(
        {
            "model": "smart",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [t.model_dump() for t in msg.tool_calls]},
                {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "18C"},
                {"role": "tool", "tool_call_id": msg.tool_calls[1].id, "content": "12:00"},
            ],
        },
        None,  # type: ignore[arg-type]
    )
    parts = req.messages[1].content
    assert parts[0] == ThinkingPart(signature="c2lnLWFiYzEyMw==", origin="gemini")
    assert parts[1] == ToolCallPart("toolu_1", "get_weather", '{"city": "Paris"}')
    assert parts[2] == ToolCallPart("toolu_2", "get_time", '{"tz": "CET"}')
    results = req.messages[2].content
    assert [r.tool_call_id for r in results] == ["toolu_1", "toolu_2"]
    assert [r.name for r in results] == ["get_weather", "get_time"]


def test_gemini_signature_on_the_tool_block_itself() -> None:
    events = [
        MessageStart("r", "gemini-2.5-flash"),
        BlockStart(0, "tool_call", id="fc_1", name="f"),
        ToolArgsDelta(0, '{"a": 1}'),
        SignatureDelta(0, "GEMSIG"),
        BlockStop(0),
        Usage(input=1, output=2),
        End("tool_use", "STOP"),
    ]
    body = encode(events, ctx(upstream="gemini"))
    chunks = list(client_for(body).chat.completions.create(model="smart", messages=MSGS, stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].id == "fc_1~gw~gemini~GEMSIG" and calls[0].function.name == "f"
    assert "".join(tc.function.arguments or "" for tc in calls) == '{"a": 1}'


def test_no_include_usage_has_no_usage_key() -> None:
    body = encode(
        [MessageStart("m", "x"), BlockStart(0, "text"), TextDelta(0, "hi"), BlockStop(0), Usage(1, 2), End("stop")],
        ctx(include_usage=False),
    )
    assert b'"usage"' not in body
    chunks = list(client_for(body).chat.completions.create(model="smart", messages=MSGS, stream=True))
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_sdk_raises_on_in_stream_error() -> None:
    events = [
        MessageStart("m", "x"),
        BlockStart(0, "text"),
        TextDelta(0, "Partial"),
        StreamError("overloaded", "Overloaded", 529, raw="overloaded_error"),
    ]
    body = encode(events, ctx(upstream="anthropic"))
    assert b"[DONE]" not in body
    seen = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client_for(body).chat.completions.create(model="smart", messages=MSGS, stream=True):
            seen.append(chunk)
    assert info.value.message == "Overloaded"
    assert info.value.body["type"] == "server_error" and info.value.body["code"] == "service_unavailable"
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "Partial"


def test_same_dialect_error_keeps_raw_type() -> None:
    events = decode_file(CAPTURES / "error_mid_stream.sse")
    body = encode(events, ctx(upstream="openai-chat"))
    frame = body.rstrip().rsplit(b"\n\n", 1)[-1]
    assert orjson.loads(frame[6:]) == {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


@pytest.mark.parametrize(
    "name", ["text", "tool_call", "parallel_tool_calls", "thinking", "max_tokens", "long_500", "tool_result_turn"]
)
def test_capture_reencode_round_trip(name: str) -> None:
    """capture → events → our bytes → our decoder: the same answer; and the SDK accepts the bytes."""
    events = decode_file(CAPTURES / f"{name}.sse")
    body = encode(events, ctx(upstream="openai-chat"))
    again = fold(decode_bytes(body))
    orig = fold(events)
    assert [(b.kind, b.text, b.id, b.name) for b in again.blocks] == [
        (b.kind, b.text, b.id, b.name) for b in orig.blocks
    ]
    assert again.end.raw_reason == orig.end.raw_reason and again.usage.output == orig.usage.output
    with client_for(body).chat.completions.stream(model="smart", messages=MSGS) as stream:
        if orig.end.raw_reason == "length":  # the SDK's helper refuses to parse a cut answer
            with pytest.raises(openai.LengthFinishReasonError):
                stream.get_final_completion()
            return
        final = stream.get_final_completion()
    assert (final.choices[0].message.content or "") == orig.text
    assert final.choices[0].finish_reason == orig.end.raw_reason


def test_pause_maps_to_stop_a_refusal_to_content_filter_and_keepalive() -> None:
    body = encode([MessageStart("m", "x"), End("pause", None)], ctx(upstream="anthropic"))
    assert b'"finish_reason":"stop"' in body
    # another dialect's refusal is never a clean stop: content_filter, and the message's refusal says so
    body = encode([MessageStart("m", "x"), End("refusal", "refusal")], ctx(upstream="anthropic"))
    assert b'"finish_reason":"content_filter"' in body and b'"delta":{"refusal":"' in body
    assert CODEC.stream_encoder(ctx()).keepalive() == b": keepalive\n\n"


# -- whole replies --------------------------------------------------------------------------


def test_encode_whole_through_sdk() -> None:
    reply = fold(TOOL_EVENTS)
    body = CODEC.encode_whole(reply, ctx(upstream="gemini"))
    client = client_for(orjson.dumps(body), content_type="application/json")
    completion = client.chat.completions.create(model="smart", messages=MSGS)
    msg = completion.choices[0].message
    assert completion.model == "smart" and completion.object == "chat.completion"
    assert msg.content == "Checking now." and msg.refusal is None
    assert msg.tool_calls[0].id == "toolu_1~gw~gemini~c2lnLWFiYzEyMw=="
    assert (msg.model_extra or {}).get("reasoning_content") == "Let me think."
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.prompt_tokens_details.cached_tokens == 10
    assert completion.usage.completion_tokens_details.reasoning_tokens == 25
    # and decode_whole reads our own object back
    back = fold(CODEC.decode_whole(body))
    assert [b.kind for b in back.blocks] == ["thinking", "text", "tool_call", "tool_call"]


def test_encode_whole_text_only() -> None:
    reply = fold(decode_file(CAPTURES / "text.sse"))
    body = CODEC.encode_whole(reply, ctx(upstream="openai-chat"))
    completion = client_for(orjson.dumps(body), content_type="application/json").chat.completions.create(
        model="smart", messages=MSGS
    )
    assert completion.choices[0].message.content == "Hello from the gateway. 你好 — ok!"
    assert completion.choices[0].message.tool_calls is None
    assert completion.usage.prompt_tokens == 30 and completion.usage.total_tokens == 42


# -- error bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "exc", "etype", "code"),
    [
        ("invalid_request", 400, openai.BadRequestError, "invalid_request_error", None),
        ("authentication", 401, openai.AuthenticationError, "invalid_request_error", "invalid_api_key"),
        ("permission", 403, openai.PermissionDeniedError, "permission_error", None),
        ("not_found", 404, openai.NotFoundError, "invalid_request_error", "model_not_found"),
        ("rate_limit", 429, openai.RateLimitError, "requests", "rate_limit_exceeded"),
        ("api_error", 500, openai.InternalServerError, "server_error", None),
        ("overloaded", 503, openai.InternalServerError, "server_error", "service_unavailable"),
    ],
)
def test_render_error_through_sdk(kind, status, exc, etype, code) -> None:
    rstatus, body = CODEC.render_error(GatewayError(kind, "boom", param="model" if kind == "invalid_request" else None))
    assert rstatus == status
    assert body == {
        "error": {
            "message": "boom",
            "type": etype,
            "param": "model" if kind == "invalid_request" else None,
            "code": code,
        }
    }
    with pytest.raises(exc) as info:
        client_for(orjson.dumps(body), status=rstatus, content_type="application/json").chat.completions.create(
            model="smart", messages=MSGS
        )
    assert info.value.message.endswith("boom") or "boom" in str(info.value)
    assert info.value.code == code and info.value.type == etype


def test_anthropic_signature_rejoins_its_thinking_text() -> None:
    body = encode(TOOL_EVENTS, ctx(upstream="anthropic"))
    with client_for(body).chat.completions.stream(model="smart", messages=MSGS) as stream:
        final = stream.get_final_completion()
    msg = final.choices[0].message.model_dump(exclude_none=True)
    msg.pop("parsed", None)
    for call in msg["tool_calls"]:
        call["function"].pop("parsed_arguments", None)
    req = CODEC.parse_request({"model": "smart", "messages": [{"role": "user", "content": "q"}, msg]}, None)  # type: ignore[arg-type]
    parts = req.messages[1].content
    assert parts[0] == ThinkingPart(text="Let me think.", signature="c2lnLWFiYzEyMw==", origin="anthropic")
    assert [type(p).__name__ for p in parts] == ["ThinkingPart", "TextPart", "ToolCallPart", "ToolCallPart"]
    assert parts[2].id == "toolu_1"


def test_latest_thinking_signature_wins() -> None:
    events = [
        MessageStart("m", "x"),
        BlockStart(0, "thinking"), SignatureDelta(0, "AAA"), BlockStop(0),
        BlockStart(1, "thinking"), SignatureDelta(1, "BB"), SignatureDelta(1, "B"), BlockStop(1),
        BlockStart(2, "tool_call", id="t", name="f"), BlockStop(2),
        End("tool_use"),
    ]  # fmt: skip
    body = encode(events, ctx(upstream="anthropic"))
    assert b'"id":"t~gw~anthropic~BBB"' in body
