"""Anthropic stream/whole/error decoding: every public capture, every authored capture, errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.dialects.anthropic import CODEC
from gateway.errors import GatewayError
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    MessageStart,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.sse import SSEDecoder, SSEFrame
from gateway.reply import fold
from tests.support.event_contract import check_events

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT.parent / "shared" / "captures-public" / "anthropic"
OURS = ROOT / "captures" / "anthropic"


def decode_bytes(data: bytes, chunk: int | None = None) -> tuple[list, bool]:
    sse = SSEDecoder()
    decoder = CODEC.stream_decoder()
    events: list = []
    pieces = [data] if chunk is None else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    for piece in pieces:
        for frame in sse.feed(piece):
            events.extend(decoder.feed(frame))
    clean = sse.close()
    events.extend(decoder.close())
    return events, clean


public_files = sorted(PUBLIC.glob("*.sse")) if PUBLIC.is_dir() else []


@pytest.mark.skipif(not public_files, reason="captures-public not present")
@pytest.mark.parametrize("path", public_files, ids=lambda p: p.stem)
def test_public_capture_decodes(path: Path) -> None:
    events, _ = decode_bytes(path.read_bytes())
    check_events(events, usage=True)
    events_split, _ = decode_bytes(path.read_bytes(), chunk=7)
    assert events_split[1:] == events[1:]  # byte-split anywhere: same events (ids of synthesized starts aside)


def _public(name: str) -> list:
    path = PUBLIC / f"{name}.sse"
    if not path.exists():
        pytest.skip("captures-public not present")
    return decode_bytes(path.read_bytes())[0]


def test_public_text() -> None:
    events = _public("text")
    reply = fold(events)
    assert (
        reply.text
        == "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?"
    )
    assert reply.model == "claude-sonnet-4-5-20250929"
    assert reply.usage == Usage(input=12, output=30, cache_read=0, cache_write=0)
    assert reply.end == End("stop", "end_turn", None)


def test_public_thinking_signature() -> None:
    reply = fold(_public("thinking"))
    assert [b.kind for b in reply.blocks] == ["thinking", "text"]
    assert reply.blocks[0].text.startswith("The previous result was 925.")
    assert reply.blocks[0].signature and reply.blocks[0].signature.startswith("EvQBCkYICxgCKkAx")
    assert reply.text == "925 ÷ 5 = 185"


def test_public_tool_use_no_args_is_empty_object() -> None:
    reply = fold(_public("tool-use-no-args"))
    tool = next(b for b in reply.blocks if b.kind == "tool_call")
    assert tool.arguments == "{}"
    assert reply.end is not None and reply.end.reason == "tool_use"


def test_public_parallel_and_cache_usage() -> None:
    reply = fold(_public("parallel-tool-use"))
    assert [orjson.loads(b.arguments)["query"] for b in reply.blocks] == ["alpha", "beta", "gamma"]
    write = fold(_public("cache-write-max-tokens"))
    assert write.usage == Usage(input=3 + 18639, output=1, cache_read=0, cache_write=18639)
    assert write.end is not None and write.end.reason == "length"
    read = fold(_public("cache-read-max-tokens"))
    assert read.usage.cache_read == 18639 and read.usage.input == 18642


def test_public_redacted_thinking_passes_data() -> None:
    events = _public("redacted-thinking")
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.kind for s in starts[:5]] == ["redacted_thinking"] * 5
    assert starts[0].data and starts[0].data.startswith("EvEBCoYBGAIiQAqN")
    assert isinstance(events[-1], End)


def test_public_web_search_keeps_server_blocks_whole() -> None:
    events = _public("web-search-citations")
    starts = [e for e in events if isinstance(e, BlockStart)]
    # the server tool's blocks are kept whole (opaque, verbatim for an Anthropic caller), in order
    kept = [s for s in starts if s.kind == "opaque"]
    assert [s.item["type"] for s in kept if s.item] == ["server_tool_use", "web_search_tool_result"]
    assert all(s.kind in ("text", "opaque") for s in starts) and starts[0].kind == "opaque"
    assert [s.index for s in starts] == list(range(len(starts)))
    reply = fold(events)
    assert reply.usage.input == 15665  # message_delta's late input count wins


def test_public_max_tokens_mid_tool_closes_block() -> None:
    events = _public("max-tokens-mid-tool-input")
    assert events[-2] == BlockStop(1)
    assert events[-1] == End("length", "max_tokens", None)


def test_public_error_overloaded() -> None:
    events = _public("error-overloaded")
    assert events[-1] == StreamError("overloaded", "Overloaded", 529, "overloaded_error")


# -- authored captures (captures/SCENARIOS.md) ----------------------------------------------------

ANSWERS = {
    "text": dict(text="Hello from the gateway. 你好 — ok!", end=("stop", "end_turn"), usage=Usage(30, 12, 10, 0)),
    "tool_call": dict(
        text="Let me check.",
        tools=[("call_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"})],
        end=("tool_use", "tool_use"),
        usage=Usage(50, 20, 0, 0),
    ),
    "parallel_tool_calls": dict(
        text="",
        tools=[("call_p1", "get_weather", {"city": "Paris"}), ("call_p2", "get_time", {"timezone": "Europe/Paris"})],
        end=("tool_use", "tool_use"),
        usage=Usage(60, 30, 0, 0),
    ),
    "tool_result_turn": dict(text="It is 18°C in Paris.", end=("stop", "end_turn"), usage=Usage(80, 10, 0, 0)),
    "thinking": dict(
        text="Hi there!",
        thinking="The user wants a greeting. I will say hi.",
        signature="c2lnLWFiYzEyMw==",
        end=("stop", "end_turn"),
        usage=Usage(30, 40, 0, 0),
    ),
    "max_tokens": dict(text="The answer is cut", end=("length", "max_tokens"), usage=Usage(30, 16, 0, 0)),
    "long_500": dict(text="".join(f"w{i} " for i in range(500)), end=("stop", "end_turn"), usage=Usage(30, 500, 0, 0)),
}


@pytest.mark.parametrize("scenario", list(ANSWERS))
def test_authored_capture(scenario: str) -> None:
    events, clean = decode_bytes((OURS / f"{scenario}.sse").read_bytes())
    assert clean
    check_events(events, usage=True)
    want = ANSWERS[scenario]
    reply = fold(events)
    assert reply.text == want["text"]
    assert reply.model == "claude-sonnet-4-5-20250929"
    tools = [(b.id, b.name, orjson.loads(b.arguments)) for b in reply.blocks if b.kind == "tool_call"]
    assert tools == want.get("tools", [])
    thinking = [b for b in reply.blocks if b.kind == "thinking"]
    if "thinking" in want:
        assert thinking[0].text == want["thinking"] and thinking[0].signature == want["signature"]
    else:
        assert not thinking
    assert reply.end is not None and (reply.end.reason, reply.end.raw_reason) == want["end"]
    assert reply.usage == want["usage"]
    if scenario in ("text", "thinking", "tool_call"):
        assert sum(isinstance(e, (TextDelta, ToolArgsDelta, ThinkingDelta)) for e in events) >= 3


def test_authored_error_mid_stream() -> None:
    events, clean = decode_bytes((OURS / "error_mid_stream.sse").read_bytes())
    assert clean
    assert fold(events).text == "Partial"
    assert events[-1] == StreamError("overloaded", "Overloaded", 529, "overloaded_error")


def test_authored_cut_mid_event() -> None:
    events, clean = decode_bytes((OURS / "cut_mid_event.sse").read_bytes())
    assert not clean  # the SSE layer sees the half event
    assert fold(events).text == "Partial"
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"


def test_authored_no_terminator() -> None:
    events, clean = decode_bytes((OURS / "no_terminator.sse").read_bytes())
    assert clean
    assert not any(isinstance(e, End) for e in events)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"
    assert fold(events).text == "Hello from the gateway. 你好 — ok!"


@pytest.mark.parametrize(
    "name,status,kind,raw",
    [("error_429", 429, "rate_limit", "rate_limit_error"), ("error_500", 500, "api_error", "api_error")],
)
def test_authored_http_errors(name: str, status: int, kind: str, raw: str) -> None:
    body = (OURS / f"{name}.json").read_bytes()
    err = CODEC.decode_error(status, body)
    assert (err.kind, err.status, err.raw, err.origin) == (kind, status, raw, "anthropic")
    assert err.message == orjson.loads(body)["error"]["message"]
    rendered_status, rendered = CODEC.render_error(err)
    assert rendered_status == status
    assert rendered == {"type": "error", "error": {"type": raw, "message": err.message}}


# -- decoder edge cases ---------------------------------------------------------------------------


def feed_all(frames: list[tuple[str | None, str]]) -> list:
    decoder = CODEC.stream_decoder()
    events: list = []
    for event, data in frames:
        events.extend(decoder.feed(SSEFrame(data, event)))
    return events + decoder.close()


def test_malformed_json_is_bad_gateway() -> None:
    events = feed_all(
        [
            ("message_start", '{"type":"message_start","message":{"id":"m","model":"x","usage":{"input_tokens":1}}}'),
            ("content_block_delta", "{nope"),
        ]
    )
    assert isinstance(events[-1], StreamError) and events[-1].kind == "bad_gateway"


def test_unknown_events_and_deltas_are_ignored() -> None:
    events = feed_all(
        [
            (
                None,
                '{"type":"message_start","message":{"id":"m","model":"x","usage":{"input_tokens":5,"output_tokens":1}}}',
            ),
            (None, '{"type":"brand_new_event"}'),
            (None, '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
            (None, '{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}'),
            (None, '{"type":"content_block_delta","index":0,"delta":{"type":"future_delta","x":1}}'),
            (None, '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}'),
            (None, '{"type":"content_block_stop","index":0}'),
            (
                None,
                '{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"output_tokens":3}}',
            ),
            (None, '{"type":"message_stop"}'),
        ]
    )
    assert fold(events).text == "ok"
    assert events[-1] == End("stop", "stop_sequence", "END")
    assert events[-2] == Usage(input=5, output=3)


@pytest.mark.parametrize(
    "etype,kind,status",
    [
        ("overloaded_error", "overloaded", 529),
        ("api_error", "api_error", 500),
        ("rate_limit_error", "rate_limit", 429),
        ("invalid_request_error", "invalid_request", 400),
        ("weird", "api_error", 500),
    ],
)
def test_in_stream_error_kinds(etype: str, kind: str, status: int) -> None:
    events = feed_all(
        [("error", orjson.dumps({"type": "error", "error": {"type": etype, "message": "boom"}}).decode())]
    )
    assert isinstance(events[0], MessageStart)
    assert events[-1] == StreamError(kind, "boom", status, etype)


@pytest.mark.parametrize(
    "raw,reason",
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_use"),
        ("pause_turn", "pause"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "length"),
    ],
)
def test_stop_reasons(raw: str, reason: str) -> None:
    events = feed_all(
        [
            (None, f'{{"type":"message_delta","delta":{{"stop_reason":"{raw}"}},"usage":{{"output_tokens":1}}}}'),
            (None, '{"type":"message_stop"}'),
        ]
    )
    assert events[-1] == End(reason, raw, None)  # type: ignore[arg-type]


def test_decode_whole_message() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Hi"},
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 2,
            "output_tokens": 7,
        },
    }
    reply = fold(CODEC.decode_whole(body))
    assert [b.kind for b in reply.blocks] == ["thinking", "redacted_thinking", "text", "opaque", "tool_call"]
    assert reply.blocks[0].signature == "sig" and reply.blocks[1].data == "opaque"
    # a server tool's block is kept whole, for an Anthropic caller (gateway/dialects/items.py)
    assert reply.blocks[3].item == body["content"][3] and reply.blocks[3].origin == "anthropic"
    assert orjson.loads(reply.blocks[4].arguments) == {"a": 1}
    assert reply.usage == Usage(input=17, output=7, cache_read=5, cache_write=2)
    assert reply.end == End("tool_use", "tool_use", None)
    error_events = CODEC.decode_whole({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert error_events[-1] == StreamError("overloaded", "Overloaded", 529, "overloaded_error")


def test_decode_error_fallbacks() -> None:
    err = CODEC.decode_error(529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    assert (err.kind, err.status, err.raw) == ("overloaded", 529, "overloaded_error")
    assert CODEC.render_error(err) == (
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    text = CODEC.decode_error(502, b"<html>bad gateway</html>")
    assert (text.kind, text.status, text.message, text.raw) == ("api_error", 502, "<html>bad gateway</html>", None)
    empty = CODEC.decode_error(503, b"")
    assert empty.kind == "overloaded" and "503" in empty.message


@pytest.mark.parametrize(
    "err,status,etype",
    [
        (GatewayError("invalid_request", "bad"), 400, "invalid_request_error"),
        (GatewayError("authentication", "no"), 401, "authentication_error"),
        (GatewayError("permission", "no"), 403, "permission_error"),
        (GatewayError("not_found", "no"), 404, "not_found_error"),
        (GatewayError("request_too_large", "big"), 413, "request_too_large"),
        (GatewayError("rate_limit", "slow"), 429, "rate_limit_error"),
        (GatewayError("api_error", "oops"), 500, "api_error"),
        (GatewayError("bad_gateway", "oops"), 502, "api_error"),
        (GatewayError("overloaded", "busy", 503, origin="openai-chat"), 503, "overloaded_error"),
        (GatewayError("timeout", "slow"), 504, "timeout_error"),
        (
            GatewayError("not_found", "no", 404, raw="invalid_request_error", origin="openai-chat"),
            404,
            "not_found_error",
        ),
    ],
)
def test_render_error(err: GatewayError, status: int, etype: str) -> None:
    assert CODEC.render_error(err) == (status, {"type": "error", "error": {"type": etype, "message": err.message}})
