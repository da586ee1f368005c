"""Anthropic stream/whole encoding, checked by feeding the bytes to the official ``anthropic`` SDK."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx2 as httpx  # this anthropic SDK build is on httpx2 (same API as httpx)
import orjson
import pytest

from gateway.dialects.anthropic import CODEC
from gateway.dialects.base import EncodeContext
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
from gateway.framing.sse import SSEDecoder
from gateway.ir import ChatRequest
from gateway.reply import fold

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "captures" / "anthropic"
MODEL = "caller-model"


def ctx(upstream: str = "anthropic") -> EncodeContext:
    return EncodeContext(model=MODEL, upstream_dialect=upstream, request=ChatRequest(model=MODEL, dialect="anthropic"))


def encode(events: list, upstream: str = "anthropic") -> bytes:
    encoder = CODEC.stream_encoder(ctx(upstream))
    return b"".join(encoder.encode(e) for e in events)


def decode_capture(name: str) -> list:
    sse, decoder, events = SSEDecoder(), CODEC.stream_decoder(), []
    for frame in sse.feed((OURS / f"{name}.sse").read_bytes()):
        events.extend(decoder.feed(frame))
    return events + decoder.close()


def client_for(body: bytes, content_type: str = "text/event-stream", status: int = 200) -> anthropic.Anthropic:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type}, content=body)

    return anthropic.Anthropic(
        api_key="k",
        base_url="http://gateway.test",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def final_message(body: bytes) -> anthropic.types.Message:
    with client_for(body).messages.stream(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        return stream.get_final_message()


def raw_events(body: bytes) -> list:
    return list(
        client_for(body).messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )


def wire_events(body: bytes) -> list[tuple[str | None, dict]]:
    sse = SSEDecoder()
    return [(f.event, orjson.loads(f.data)) for f in sse.feed(body)]


def check_wire(body: bytes) -> None:
    """Anthropic's framing rules: one open block at a time, contiguous indices, delta after start."""
    frames = wire_events(body)
    assert frames[0][0] == "message_start" and "usage" in frames[0][1]["message"]
    open_index, next_index = None, 0
    for event, data in frames:
        assert event == data["type"]
        if event == "content_block_start":
            assert open_index is None and data["index"] == next_index
            open_index, next_index = data["index"], next_index + 1
        elif event == "content_block_delta":
            assert data["index"] == open_index
        elif event == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
        elif event in ("message_delta", "message_stop"):
            assert open_index is None
    if frames[-1][0] != "error":
        assert [e for e, _ in frames[-2:]] == ["message_delta", "message_stop"]


# -- round trips through the SDK ----------------------------------------------------------------


def test_text_round_trip_sdk() -> None:
    body = encode(decode_capture("text"))
    check_wire(body)
    msg = final_message(body)
    assert msg.model == MODEL
    assert msg.content[0].type == "text" and msg.content[0].text == "Hello from the gateway. 你好 — ok!"
    assert msg.stop_reason == "end_turn"
    assert (
        msg.usage.input_tokens,
        msg.usage.cache_read_input_tokens,
        msg.usage.cache_creation_input_tokens,
        msg.usage.output_tokens,
    ) == (20, 10, 0, 12)
    assert msg.id == "msg_01GwText0000000000000001"  # same dialect: the upstream id is kept
    first = wire_events(body)[0][1]["message"]["usage"]
    assert first["input_tokens"] == 20 and first["cache_read_input_tokens"] == 10  # known up front


def test_tool_call_round_trip_sdk() -> None:
    body = encode(decode_capture("tool_call"))
    check_wire(body)
    msg = final_message(body)
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    tool = msg.content[1]
    assert (tool.id, tool.name, tool.input) == ("call_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"})
    assert msg.stop_reason == "tool_use"


def test_parallel_thinking_max_tokens_long_sdk() -> None:
    msg = final_message(encode(decode_capture("parallel_tool_calls")))
    assert [(b.id, b.input) for b in msg.content] == [
        ("call_p1", {"city": "Paris"}),
        ("call_p2", {"timezone": "Europe/Paris"}),
    ]
    msg = final_message(encode(decode_capture("thinking")))
    assert msg.content[0].type == "thinking"
    assert (
        msg.content[0].thinking == "The user wants a greeting. I will say hi."
        and msg.content[0].signature == "c2lnLWFiYzEyMw=="
    )
    assert msg.content[1].text == "Hi there!"
    msg = final_message(encode(decode_capture("max_tokens")))
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 16
    msg = final_message(encode(decode_capture("long_500")))
    assert msg.content[0].text == "".join(f"w{i} " for i in range(500))


def test_create_stream_true_yields_typed_events() -> None:
    events = raw_events(encode(decode_capture("tool_call")))
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert events[-2].type == "message_delta" and events[-2].delta.stop_reason == "tool_use"
    assert events[-2].usage.output_tokens == 20


def test_in_stream_error_raises_in_sdk() -> None:
    body = encode(decode_capture("error_mid_stream"))
    check_wire(body)
    assert wire_events(body)[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    with pytest.raises(anthropic.APIStatusError) as info:
        final_message(body)
    assert "overloaded_error" in str(info.value)
    with pytest.raises(anthropic.APIStatusError):
        raw_events(body)


def test_truncation_from_other_dialect_is_error_frame() -> None:
    events = [
        MessageStart("x", "gpt"),
        BlockStart(0, "text"),
        TextDelta(0, "Par"),
        StreamError("truncated", "cut", 502),
    ]
    body = encode(events, upstream="openai-chat")
    frames = wire_events(body)
    assert frames[-1] == ("error", {"type": "error", "error": {"type": "api_error", "message": "cut"}})
    with pytest.raises(anthropic.APIStatusError):
        final_message(body)


def test_foreign_raw_error_type_not_leaked() -> None:
    body = encode(
        [MessageStart("x", "m"), StreamError("rate_limit", "slow down", 429, raw="rate_limit_exceeded")],
        upstream="openai-chat",
    )
    assert wire_events(body)[-1][1]["error"]["type"] == "rate_limit_error"


# -- other dialects' shapes ----------------------------------------------------------------------


def test_interleaved_tool_calls_are_buffered_not_split() -> None:
    events = [
        MessageStart("chatcmpl-1", "gpt-4.1"),
        BlockStart(0, "text"),
        TextDelta(0, "Checking"),
        BlockStart(3, "tool_call", "call_a", "get_weather"),
        BlockStart(7, "tool_call", "call_b", "get_time"),
        ToolArgsDelta(3, '{"city"'),
        ToolArgsDelta(7, '{"timezone"'),
        TextDelta(0, " both."),
        ToolArgsDelta(3, ': "Paris"}'),
        BlockStop(0),
        ToolArgsDelta(7, ': "UTC"}'),
        BlockStop(7),
        BlockStop(3),
        Usage(input=40, output=9, cache_read=8),
        End("tool_use", "tool_calls"),
    ]
    body = encode(events, upstream="openai-chat")
    check_wire(body)
    msg = final_message(body)
    assert msg.content[0].text == "Checking both."
    assert [(b.id, b.name, b.input) for b in msg.content[1:]] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_time", {"timezone": "UTC"}),
    ]
    assert msg.stop_reason == "tool_use"  # never the foreign raw value
    assert (msg.usage.input_tokens, msg.usage.cache_read_input_tokens, msg.usage.output_tokens) == (32, 8, 9)
    assert msg.id.startswith("msg_") and msg.id != "chatcmpl-1"
    assert wire_events(body)[0][1]["message"]["usage"]["input_tokens"] == 0  # unknown at start: zeros


def test_blocks_never_stopped_are_flushed_at_end() -> None:
    events = [
        MessageStart("r", "m"),
        BlockStart(0, "tool_call", "c1", "f"),
        BlockStart(1, "tool_call", "c2", "g"),
        ToolArgsDelta(1, '{"x": 1}'),
        Usage(output=3),
        End("tool_use"),
    ]
    body = encode(events, upstream="openai-responses")
    check_wire(body)
    msg = final_message(body)
    assert [(b.id, b.input) for b in msg.content] == [("c1", {}), ("c2", {"x": 1})]


def test_foreign_signature_is_packed_and_emitted_once() -> None:
    events = [
        MessageStart("g", "gemini-2.5"),
        BlockStart(0, "thinking"),
        ThinkingDelta(0, "think"),
        SignatureDelta(0, "AAA"),
        SignatureDelta(0, "BBB"),
        BlockStop(0),
        BlockStart(1, "tool_call", "call_1", "f"),
        ToolArgsDelta(1, "{}"),
        BlockStop(1),
        Usage(input=5, output=6, reasoning=2),
        End("tool_use", "STOP"),
    ]
    body = encode(events, upstream="gemini")
    sigs = [d for e, d in wire_events(body) if e == "content_block_delta" and d["delta"]["type"] == "signature_delta"]
    assert len(sigs) == 1
    msg = final_message(body)
    assert msg.content[0].signature == "gw~gemini~AAABBB"
    assert msg.stop_reason == "tool_use"


def test_stop_sequence_and_refusal_mapping() -> None:
    body = encode(
        [MessageStart("a", "b"), BlockStart(0, "text"), TextDelta(0, "x"), BlockStop(0), End("stop", "stop", "###")],
        upstream="openai-chat",
    )
    msg = final_message(body)
    assert (msg.stop_reason, msg.stop_sequence) == ("stop_sequence", "###")
    body = encode([MessageStart("a", "b"), End("content_filter", "SAFETY")], upstream="gemini")
    assert final_message(body).stop_reason == "refusal"
    body = encode([MessageStart("a", "b"), End("length", "model_context_window_exceeded")], upstream="anthropic")
    assert final_message(body).stop_reason == "model_context_window_exceeded"


def test_keepalive_is_ping_and_sdk_ignores_it() -> None:
    encoder = CODEC.stream_encoder(ctx())
    ping = encoder.keepalive()
    assert ping == b'event: ping\ndata: {"type": "ping"}\n\n'
    body = b"".join(
        [
            encoder.encode(MessageStart("m", "x")),
            ping,
            encoder.encode(BlockStart(0, "text")),
            ping,
            encoder.encode(TextDelta(0, "a")),
            encoder.encode(BlockStop(0)),
            ping,
            encoder.encode(End("stop", "end_turn")),
        ]
    )
    assert final_message(body).content[0].text == "a"


def test_nothing_after_end() -> None:
    encoder = CODEC.stream_encoder(ctx())
    encoder.encode(MessageStart("m", "x"))
    assert encoder.encode(End("stop")).endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert encoder.encode(TextDelta(0, "late")) == b""
    assert encoder.encode(StreamError("api_error", "late")) == b""


# -- whole replies -------------------------------------------------------------------------------


def whole_via_sdk(obj: dict) -> anthropic.types.Message:
    return client_for(orjson.dumps(obj), "application/json").messages.create(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )


@pytest.mark.parametrize("scenario", ["text", "tool_call", "parallel_tool_calls", "thinking", "max_tokens"])
def test_encode_whole_parses_in_sdk(scenario: str) -> None:
    reply = fold(decode_capture(scenario))
    obj = CODEC.encode_whole(reply, ctx())
    msg = whole_via_sdk(obj)
    assert msg.model == MODEL and msg.type == "message" and msg.role == "assistant"
    streamed = final_message(encode(decode_capture(scenario)))
    assert [b.to_dict() for b in msg.content] == [b.to_dict() for b in streamed.content]
    assert msg.stop_reason == streamed.stop_reason
    assert msg.usage.to_dict() | {"cache_creation": None, "service_tier": None} == streamed.usage.to_dict() | {
        "cache_creation": None,
        "service_tier": None,
    }
    # decode_whole(encode_whole(x)) folds to the same reply
    again = fold(CODEC.decode_whole(obj))
    assert [(b.kind, b.text, b.id, b.signature) for b in again.blocks] == [
        (
            b.kind,
            b.text if b.kind != "tool_call" else orjson.dumps(orjson.loads(b.arguments)).decode(),
            b.id,
            b.signature,
        )
        for b in reply.blocks
    ]


def test_encode_whole_empty_tool_args_and_foreign_signature() -> None:
    events = [
        MessageStart("x", "m"),
        BlockStart(0, "thinking"),
        ThinkingDelta(0, "t"),
        SignatureDelta(0, "enc"),
        BlockStop(0),
        BlockStart(1, "tool_call", "c", "f"),
        BlockStop(1),
        Usage(input=3, output=4),
        End("tool_use", "completed"),
    ]
    obj = CODEC.encode_whole(fold(events), ctx("openai-responses"))
    assert obj["content"][0] == {"type": "thinking", "thinking": "t", "signature": "gw~openai-responses~enc"}
    assert obj["content"][1] == {"type": "tool_use", "id": "c", "name": "f", "input": {}}
    assert obj["stop_reason"] == "tool_use"
    assert obj["usage"] == {
        "input_tokens": 3,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 4,
    }
    whole_via_sdk(obj)


def test_rendered_errors_raise_right_sdk_class() -> None:
    from gateway.errors import GatewayError

    cases = [
        (GatewayError("rate_limit", "slow"), anthropic.RateLimitError),
        (GatewayError("invalid_request", "bad"), anthropic.BadRequestError),
        (
            GatewayError("overloaded", "busy", 529, raw="overloaded_error", origin="anthropic"),
            anthropic.InternalServerError,
        ),
    ]
    for err, cls in cases:
        status, obj = CODEC.render_error(err)
        with pytest.raises(cls) as info:
            client_for(orjson.dumps(obj), "application/json", status).messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        assert info.value.status_code == status
        assert info.value.body == obj
