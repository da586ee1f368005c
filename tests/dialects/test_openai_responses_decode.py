"""Stream/whole decoding of Responses bodies: the real public recordings and our own captures."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.dialects.openai_responses import CODEC
from gateway.events import End, MessageStart, SignatureDelta, StreamError, ThinkingDelta, Usage
from gateway.framing.sse import SSEDecoder
from gateway.reply import fold
from tests.support.event_contract import check_events

REPO = Path(__file__).resolve().parents[2]
OWN = REPO / "captures" / "openai-responses"
PUBLIC = REPO.parent / "shared" / "captures-public" / "openai-responses"


def decode_bytes(data: bytes, chunk: int = 0) -> tuple[list, bool]:
    """Events for a body; also whether the SSE framing ended cleanly."""
    sse, dec, events = SSEDecoder(), CODEC.stream_decoder(), []
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)] if chunk else [data]
    for piece in pieces:
        for frame in sse.feed(piece):
            events += dec.feed(frame)
    clean = sse.close()
    events += dec.close()
    return events, clean


PUBLIC_FILES = sorted(PUBLIC.glob("*.sse")) if PUBLIC.exists() else []


@pytest.mark.skipif(not PUBLIC_FILES, reason="captures-public not available")
@pytest.mark.parametrize("path", PUBLIC_FILES, ids=lambda p: p.stem)
def test_public_capture_decodes(path: Path) -> None:
    data = path.read_bytes()
    events, clean = decode_bytes(data)
    assert clean
    check_events(events)
    # splitting the body anywhere gives the same events
    assert decode_bytes(data, chunk=7)[0][1:] == events[1:]


@pytest.mark.skipif(not PUBLIC_FILES, reason="captures-public not available")
def test_public_details() -> None:
    r = fold(decode_bytes((PUBLIC / "text.sse").read_bytes())[0])
    assert r.text == "Dummy PDF file" and r.end.reason == "stop"
    assert (r.usage.input, r.usage.cache_read, r.usage.output, r.usage.reasoning) == (44, 0, 4, 0)

    events = decode_bytes((PUBLIC / "reasoning-summary-function-call.sse").read_bytes())[0]
    r = fold(events)
    assert [b.kind for b in r.blocks] == ["thinking", "tool_call"]
    raw = (PUBLIC / "reasoning-summary-function-call.sse").read_text()
    final = orjson.loads(next(ln for ln in raw.splitlines() if '"response.completed"' in ln)[6:])
    assert r.blocks[0].text == final["response"]["output"][0]["summary"][0]["text"]
    done = orjson.loads(next(ln for ln in raw.splitlines() if '"response.output_item.done"' in ln)[6:])
    # encrypted_content is re-encrypted on every serialization: the item's done value is kept
    assert r.blocks[0].signature == done["item"]["encrypted_content"]
    assert sum(isinstance(e, SignatureDelta) for e in events) == 1
    assert r.blocks[1].name == "calculator" and r.blocks[1].id == "call_AB6AaRZ1FYZB2RwS6A5vbdqn"
    assert r.blocks[1].text == '{"a":12,"b":7,"op":"add"}'
    assert r.end.reason == "tool_use"

    r = fold(decode_bytes((PUBLIC / "function-call-encrypted-reasoning.sse").read_bytes())[0])
    assert r.blocks[0].kind == "thinking" and r.blocks[0].text == "" and r.blocks[0].signature
    assert r.usage.reasoning == 15

    r = fold(decode_bytes((PUBLIC / "two-messages-phase.sse").read_bytes())[0])
    assert [b.kind for b in r.blocks] == ["text", "text"]
    assert r.blocks[0].text.startswith("Got it — I’ll quickly check") and r.usage.cache_read == 3072

    r = fold(decode_bytes((PUBLIC / "web-search-citations.sse").read_bytes())[0])
    # the web_search_call items are kept whole (verbatim for a Responses caller), then the answer's text
    assert [b.kind for b in r.blocks] == ["opaque"] * 6 + ["text"] and r.usage.cache_read == 3712
    assert all(b.item is not None and b.item["type"] == "web_search_call" for b in r.blocks[:6])

    events = decode_bytes((PUBLIC / "error-failed.sse").read_bytes())[0]
    errors = [e for e in events if isinstance(e, StreamError)]
    assert len(errors) == 1 and errors[0].raw == "insufficient_quota" and errors[0].status == 429
    assert errors[0].message.startswith("You exceeded your current quota")


TEXT = "Hello from the gateway. 你好 — ok!"


def own(name: str) -> list:
    path = OWN / f"{name}.sse"
    return decode_bytes(path.read_bytes())[0]


def usage_of(events: list) -> tuple:
    u = [e for e in events if isinstance(e, Usage)][-1]
    return (u.input, u.cache_read, u.output, u.reasoning)


def test_own_text() -> None:
    events = own("text")
    check_events(events)
    r = fold(events)
    assert r.text == TEXT and len([e for e in events if type(e).__name__ == "TextDelta"]) >= 3
    assert r.end == End("stop", "completed") and usage_of(events) == (30, 10, 12, 0)


def test_own_tool_call() -> None:
    events = own("tool_call")
    check_events(events)
    r = fold(events)
    assert [b.kind for b in r.blocks] == ["text", "tool_call"] and r.blocks[0].text == "Let me check."
    call = r.blocks[1]
    assert (call.id, call.name, call.text) == ("call_weather_1", "get_weather", '{"city": "Paris", "unit": "celsius"}')
    assert r.end.reason == "tool_use" and usage_of(events) == (50, 0, 20, 0)


def test_own_parallel() -> None:
    events = own("parallel_tool_calls")
    check_events(events)
    r = fold(events)
    assert [(b.id, b.name, orjson.loads(b.text)) for b in r.blocks] == [
        ("call_p1", "get_weather", {"city": "Paris"}),
        ("call_p2", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert r.text == "" and r.end.reason == "tool_use" and usage_of(events) == (60, 0, 30, 0)


def test_own_tool_result_turn_and_long() -> None:
    r = fold(own("tool_result_turn"))
    assert r.text == "It is 18°C in Paris." and r.end.reason == "stop"
    events = own("long_500")
    check_events(events)
    assert fold(events).text == "".join(f"w{i} " for i in range(500)) and usage_of(events) == (30, 0, 500, 0)


def test_own_thinking() -> None:
    events = own("thinking")
    check_events(events)
    r = fold(events)
    assert [b.kind for b in r.blocks] == ["thinking", "text"]
    assert r.blocks[0].text == "The user wants a greeting. I will say hi."
    assert sum(isinstance(e, ThinkingDelta) for e in events) >= 2
    assert r.blocks[0].signature == "c2lnLWFiYzEyMw==" and r.text == "Hi there!"
    assert usage_of(events) == (30, 0, 40, 25)


def test_own_max_tokens() -> None:
    events = own("max_tokens")
    check_events(events)
    r = fold(events)
    assert (
        r.text == "The answer is cut"
        and r.end == End("length", "max_output_tokens")
        and usage_of(events) == (30, 0, 16, 0)
    )


def test_own_error_mid_stream() -> None:
    events = own("error_mid_stream")
    check_events(events)
    assert fold(events).text == "Partial"
    err = events[-1]
    assert isinstance(err, StreamError) and err.raw == "server_error" and err.kind == "api_error"
    assert err.message == "The server had an error while processing your request."


def test_own_truncations() -> None:
    events, clean = decode_bytes((OWN / "cut_mid_event.sse").read_bytes())
    assert not clean and fold(events).text == "Partial"
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"
    events, clean = decode_bytes((OWN / "no_terminator.sse").read_bytes())
    assert clean and fold(events).text == TEXT
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"
    assert not any(isinstance(e, End) for e in events)


def test_error_jsons() -> None:
    err = CODEC.decode_error(429, (OWN / "error_429.json").read_bytes())
    assert err.kind == "rate_limit" and err.status == 429 and err.raw == "rate_limit_exceeded"
    err = CODEC.decode_error(500, (OWN / "error_500.json").read_bytes())
    assert err.kind == "api_error" and err.raw == "server_error" and err.message.startswith("The server had an error")
    err = CODEC.decode_error(502, b"<html>bad gateway</html>")
    assert err.kind == "api_error" and "bad gateway" in err.message


def test_malformed_json_and_unknown_events() -> None:
    from gateway.framing.sse import SSEFrame

    dec = CODEC.stream_decoder()
    out = dec.feed(
        SSEFrame(
            '{"type":"response.created","response":{"id":"resp_1","model":"m"},"sequence_number":0}', "response.created"
        )
    )
    assert out == [MessageStart("resp_1", "m")]
    assert (
        dec.feed(SSEFrame('{"type":"response.brand_new_event","sequence_number":1}', "response.brand_new_event")) == []
    )
    out = dec.feed(SSEFrame("{not json", "response.output_text.delta"))
    assert isinstance(out[-1], StreamError) and out[-1].kind == "bad_gateway"
    assert dec.close() == []


def test_incomplete_content_filter_and_namespace_call() -> None:
    from gateway.framing.sse import SSEFrame

    dec = CODEC.stream_decoder()
    frames = [
        {"type": "response.created", "response": {"id": "resp_2", "model": "m"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "c1",
                "name": "exec",
                "namespace": "shell",
                "arguments": "",
            },
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "c1",
                "name": "exec",
                "namespace": "shell",
                "arguments": '{"cmd":"ls"}',
            },
        },
        {
            "type": "response.incomplete",
            "response": {"id": "resp_2", "incomplete_details": {"reason": "content_filter"}, "usage": None},
        },
    ]
    events = []
    for f in frames:
        events += dec.feed(SSEFrame(orjson.dumps(f).decode(), f["type"]))
    r = fold(events)
    # the namespace stays beside the name: a caller of another dialect declared "exec"
    assert r.blocks[0].name == "exec" and r.blocks[0].namespace == "shell" and r.blocks[0].text == '{"cmd":"ls"}'
    assert r.end == End("content_filter", "content_filter")


def test_decode_whole() -> None:
    raw = (OWN / "thinking.sse").read_text()
    final = orjson.loads(next(ln for ln in raw.splitlines() if '"response.completed"' in ln)[6:])["response"]
    events = CODEC.decode_whole(final)
    check_events(events)
    r = fold(events)
    assert [b.kind for b in r.blocks] == ["thinking", "text"] and r.blocks[0].signature == "c2lnLWFiYzEyMw=="
    assert r.text == "Hi there!" and r.end.reason == "stop" and r.usage.reasoning == 25
    failed = CODEC.decode_whole(
        {"id": "resp_x", "status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}
    )
    assert isinstance(failed[-1], StreamError) and failed[-1].raw == "server_error"


def _feed_all(frames: list[dict]) -> list:
    from gateway.framing.sse import SSEFrame

    dec, events = CODEC.stream_decoder(), []
    for f in frames:
        events += dec.feed(SSEFrame(orjson.dumps(f).decode(), f["type"]))
    return events + dec.close()


def test_multi_summary_parts_refusal_and_reasoning_text() -> None:
    events = _feed_all(
        [
            {"type": "response.created", "response": {"id": "resp_3", "model": "o3"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "rs_1", "type": "reasoning", "summary": []},
            },
            {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0, "summary_index": 0},
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "delta": "one",
            },
            {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0, "summary_index": 1},
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 1,
                "delta": "two",
            },
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "E"},
            },
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"id": "rs_2", "type": "reasoning", "summary": []},
            },
            {
                "type": "response.reasoning_text.delta",
                "item_id": "rs_2",
                "output_index": 1,
                "content_index": 0,
                "delta": "raw thought",
            },
            {
                "type": "response.output_item.done",
                "output_index": 1,
                "item": {"id": "rs_2", "type": "reasoning", "summary": []},
            },
            {
                "type": "response.output_item.added",
                "output_index": 2,
                "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
            },
            {
                "type": "response.content_part.added",
                "item_id": "msg_1",
                "output_index": 2,
                "content_index": 0,
                "part": {"type": "refusal", "refusal": ""},
            },
            {
                "type": "response.refusal.delta",
                "item_id": "msg_1",
                "output_index": 2,
                "content_index": 0,
                "delta": "I can't",
            },
            {
                "type": "response.refusal.done",
                "item_id": "msg_1",
                "output_index": 2,
                "content_index": 0,
                "refusal": "I can't help.",
            },
            {
                "type": "response.output_item.done",
                "output_index": 2,
                "item": {"id": "msg_1", "type": "message", "content": []},
            },
            {
                "type": "response.completed",
                "response": {"id": "resp_3", "usage": {"input_tokens": 1, "output_tokens": 2}},
            },
        ]
    )
    check_events(events)
    r = fold(events)
    assert [(b.kind, b.text, b.signature) for b in r.blocks] == [
        ("thinking", "one\n\ntwo", "E"),
        ("thinking", "raw thought", None),
        ("text", "I can't help.", None),
    ]
    assert r.usage == Usage(1, 2, None, None, None) and r.end.reason == "stop"


def test_error_event_then_failed_gives_one_error() -> None:
    events = _feed_all(
        [
            {"type": "response.created", "response": {"id": "r", "model": "m"}},
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None},
            {
                "type": "response.failed",
                "response": {
                    "id": "r",
                    "status": "failed",
                    "error": {"code": "rate_limit_exceeded", "message": "slow"},
                },
            },
        ]
    )
    assert sum(isinstance(e, StreamError) for e in events) == 1
    assert events[-1] == StreamError("rate_limit", "slow", 429, "rate_limit_exceeded")
