"""openai-chat stream decoding: every public recording and every authored capture."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.dialects.openai_chat import CODEC
from gateway.errors import GatewayError
from gateway.events import BlockStart, BlockStop, End, MessageStart, StreamError, TextDelta, ToolArgsDelta, Usage
from gateway.framing.sse import SSEDecoder, SSEFrame
from gateway.reply import fold
from tests.support.event_contract import check_events

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures" / "openai-chat"
PUBLIC = ROOT.parent / "shared" / "captures-public" / "openai-chat"


def decode_bytes(body: bytes, split: int | None = None):
    sse = SSEDecoder()
    dec = CODEC.stream_decoder()
    events = []
    pieces = [body] if split is None else [body[i : i + split] for i in range(0, len(body), split)]
    for piece in pieces:
        for frame in sse.feed(piece):
            events += dec.feed(frame)
    if not sse.close():
        events.append(StreamError("truncated", "cut mid event", 502))
    else:
        events += dec.close()
    return events


def decode_file(path: Path, split: int | None = None):
    return decode_bytes(path.read_bytes(), split)


public_files = sorted(PUBLIC.glob("*.sse")) if PUBLIC.is_dir() else []


@pytest.mark.skipif(not public_files, reason="captures-public not present")
@pytest.mark.parametrize("path", public_files, ids=lambda p: p.stem)
def test_public_capture_decodes(path: Path) -> None:
    events = decode_file(path)
    check_events(events)
    assert isinstance(events[-1], End)
    # splitting the bytes anywhere gives the same events
    assert decode_file(path, split=7) == events


def _public(name: str):
    path = PUBLIC / f"{name}.sse"
    if not path.exists():
        pytest.skip("captures-public not present")
    return decode_file(path)


def test_public_text_no_usage() -> None:
    events = _public("text")
    reply = fold(events)
    assert reply.text.startswith("Hi there!")
    assert "’" in reply.text or reply.text
    assert reply.end.reason == "stop" and reply.end.raw_reason == "stop"
    assert reply.usage == Usage()  # no include_usage: nothing known, nothing zeroed


def test_public_tool_call() -> None:
    reply = fold(_public("tool-call"))
    assert [b.kind for b in reply.blocks] == ["tool_call"]
    b = reply.blocks[0]
    assert b.id == "call_CTf1nWJLqSeRgDqaCG27xZ74" and b.name == "get_weather"
    assert orjson.loads(b.text) == {"city": "San Francisco", "state": "CA"}
    assert reply.end.reason == "tool_use" and reply.end.raw_reason == "tool_calls"
    assert reply.usage.input == 48 and reply.usage.output == 19 and reply.usage.reasoning == 0


def test_public_parallel_tool_calls() -> None:
    events = _public("parallel-tool-calls")
    reply = fold(events)
    assert [b.kind for b in reply.blocks] == ["tool_call", "tool_call"]
    assert reply.blocks[1].name == "get_stock_price"
    for b in reply.blocks:
        orjson.loads(b.text)
    # the first tool block is closed before the second opens
    stops = [i for i, e in enumerate(events) if isinstance(e, BlockStop) and e.index == 0]
    starts = [i for i, e in enumerate(events) if isinstance(e, BlockStart) and e.index == 1]
    assert stops[0] < starts[0]


def test_public_refusal_and_length() -> None:
    reply = fold(_public("refusal"))
    assert reply.text == "I'm sorry, I can't assist with that request."
    assert reply.end.reason == "refusal" and reply.end.raw_reason == "stop"
    reply = fold(_public("length"))
    assert reply.text == '{"' and reply.end.reason == "length"


def test_public_reasoning_tokens_and_azure() -> None:
    reply = fold(_public("length-reasoning-exhausted"))
    assert reply.blocks == [] and reply.usage.reasoning == 100 and reply.usage.output == 100
    reply = fold(_public("azure-content-filter"))
    assert reply.id == "chatcmpl-8JCbt5d4luUIhYCI7YH4dQK7hnHx2" and reply.model == "gpt-35-turbo"
    assert reply.text == "Hey Jude, better" and reply.end.reason == "content_filter"
    reply = fold(_public("azure-filter-annotations-include-usage"))
    assert reply.text == "Capital of Denmark." and reply.usage.input == 15 and reply.usage.cache_read == 0


def test_public_n3_only_first_choice() -> None:
    reply = fold(_public("multiple-choices-n3"))
    assert len(reply.blocks) == 1 and reply.end.reason == "stop"
    assert reply.usage.output == 42


# -- authored captures: SCENARIOS.md answers ------------------------------------------------


def _mine(name: str):
    return decode_file(CAPTURES / f"{name}.sse")


def test_capture_text() -> None:
    events = _mine("text")
    check_events(events)
    assert sum(isinstance(e, TextDelta) for e in events) >= 3
    reply = fold(events)
    assert reply.text == "Hello from the gateway. 你好 — ok!"
    assert reply.end.reason == "stop"
    assert reply.usage == Usage(input=30, output=12, cache_read=10, cache_write=None, reasoning=0)


def test_capture_tool_call() -> None:
    events = _mine("tool_call")
    check_events(events)
    assert sum(isinstance(e, ToolArgsDelta) for e in events) >= 3
    reply = fold(events)
    assert [b.kind for b in reply.blocks] == ["text", "tool_call"]
    assert reply.blocks[0].text == "Let me check."
    tool = reply.blocks[1]
    assert (tool.id, tool.name) == ("call_weather_1", "get_weather")
    assert orjson.loads(tool.text) == {"city": "Paris", "unit": "celsius"}
    assert reply.end.reason == "tool_use"
    assert (reply.usage.input, reply.usage.cache_read, reply.usage.output) == (50, 0, 20)


def test_capture_parallel() -> None:
    reply = fold(_mine("parallel_tool_calls"))
    assert [(b.id, b.name, orjson.loads(b.text)) for b in reply.blocks] == [
        ("call_p1", "get_weather", {"city": "Paris"}),
        ("call_p2", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert reply.end.reason == "tool_use" and (reply.usage.input, reply.usage.output) == (60, 30)


def test_capture_tool_result_thinking_max_long() -> None:
    reply = fold(_mine("tool_result_turn"))
    assert reply.text == "It is 18°C in Paris." and (reply.usage.input, reply.usage.output) == (80, 10)
    reply = fold(_mine("thinking"))
    assert [b.kind for b in reply.blocks] == ["thinking", "text"]
    assert reply.blocks[0].text == "The user wants a greeting. I will say hi."
    assert reply.blocks[1].text == "Hi there!"
    assert (reply.usage.input, reply.usage.output, reply.usage.reasoning) == (30, 40, 25)
    reply = fold(_mine("max_tokens"))
    assert reply.text == "The answer is cut" and reply.end.reason == "length" and reply.usage.output == 16
    events = _mine("long_500")
    assert sum(isinstance(e, TextDelta) for e in events) == 500
    assert fold(events).text == "".join(f"w{i} " for i in range(500))


def test_capture_error_mid_stream() -> None:
    events = _mine("error_mid_stream")
    check_events(events)
    err = events[-1]
    assert isinstance(err, StreamError)
    assert err.kind == "api_error" and err.raw == "server_error" and err.status == 500
    assert err.message == "The server had an error while processing your request."
    assert fold(events).text == "Partial"


@pytest.mark.parametrize("name", ["cut_mid_event", "no_terminator"])
def test_capture_truncation(name: str) -> None:
    events = _mine(name)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"
    assert not any(isinstance(e, End) for e in events)


def test_no_done_after_finish_reason_is_truncated() -> None:
    dec = CODEC.stream_decoder()
    out = dec.feed(
        SSEFrame('{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}')
    )
    assert not any(isinstance(e, End) for e in out)
    assert isinstance(dec.close()[0], StreamError)


def test_malformed_json_and_unknown_fields() -> None:
    dec = CODEC.stream_decoder()
    events = dec.feed(
        SSEFrame('{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"x","weird":1}}],"new_field":2}')
    )
    assert isinstance(events[0], MessageStart)
    bad = dec.feed(SSEFrame("{not json"))
    assert isinstance(bad[0], StreamError) and bad[0].kind == "bad_gateway"
    assert dec.feed(SSEFrame("[DONE]")) == [] and dec.close() == []


def test_reasoning_alias_and_missing_tool_index() -> None:
    dec = CODEC.stream_decoder()
    events = []
    for data in [
        '{"id":"c","model":"m","choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}',
        '{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\\"x\\":1}"}}]}}]}',
        '{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        "[DONE]",
    ]:
        events += dec.feed(SSEFrame(data))
    check_events(events)
    reply = fold(events)
    assert [(b.kind, b.id, b.text) for b in reply.blocks] == [
        ("thinking", None, "hmm"),
        ("tool_call", "a", "{}"),
        ("tool_call", "b", '{"x":1}'),
    ]


# -- whole bodies and HTTP errors -------------------------------------------------------------


def test_decode_whole() -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "ok",
                    "reasoning_content": "think",
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 7,
            "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    }
    events = CODEC.decode_whole(body)
    check_events(events)
    reply = fold(events)
    assert [b.kind for b in reply.blocks] == ["thinking", "text", "tool_call"]
    assert reply.end.reason == "tool_use" and reply.usage.cache_read == 2 and reply.usage.reasoning is None


@pytest.mark.parametrize(
    ("status", "file", "kind", "raw"),
    [(429, "error_429.json", "rate_limit", "requests"), (500, "error_500.json", "api_error", "server_error")],
)
def test_decode_error_files(status: int, file: str, kind: str, raw: str) -> None:
    err = CODEC.decode_error(status, (CAPTURES / file).read_bytes())
    assert isinstance(err, GatewayError)
    assert (err.kind, err.status, err.raw, err.origin) == (kind, status, raw, "openai-chat")
    body = orjson.loads((CAPTURES / file).read_bytes())
    assert err.message == body["error"]["message"]
    # rendered back to an openai-chat caller: identical type
    rstatus, rbody = CODEC.render_error(err)
    assert rstatus == status and rbody["error"]["type"] == body["error"]["type"]


def test_decode_error_text_body() -> None:
    err = CODEC.decode_error(502, b"<html>Bad Gateway</html>")
    assert err.kind == "api_error" and err.status == 502 and "Bad Gateway" in err.message


def test_usage_on_content_chunks_states_the_prompt_early():
    """vLLM's ``continuous_usage_stats`` puts usage on every chunk: the prompt's count goes out
    with the first one (before its deltas), the final usage still right before End."""

    def chunk(content, usage, finish=None):
        return orjson.dumps(
            {
                "id": "c1",
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
                "usage": usage,
            }
        )

    body = (
        b"".join(
            b"data: " + c + b"\n\n"
            for c in (
                chunk("Hel", {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}),
                chunk("lo", {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}, "stop"),
            )
        )
        + b"data: [DONE]\n\n"
    )
    events = decode_bytes(body)
    check_events(events)
    usages = [(i, e) for i, e in enumerate(events) if isinstance(e, Usage)]
    assert [u for _, u in usages] == [Usage(input=9), Usage(input=9, output=2)]
    assert usages[0][0] < next(i for i, e in enumerate(events) if isinstance(e, BlockStart))
    assert isinstance(events[-1], End) and usages[-1][0] == len(events) - 2
