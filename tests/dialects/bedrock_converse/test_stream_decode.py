"""ConverseStream frames → the event union, over recorded-like fixtures, with the ordering contract."""

from __future__ import annotations

import orjson
import pytest

from gateway.dialects.bedrock_converse import CODEC
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
from gateway.framing.sse import SSEFrame
from gateway.reply import fold
from tests.support.event_contract import check_events

from .conftest import STREAMS, decode, frames_of, load


@pytest.mark.parametrize("name", STREAMS)
def test_fixture_keeps_the_contract_and_folds_to_the_answer(name: str) -> None:
    events = decode(frames_of(name))
    check_events(events, usage=True)
    want = load(name)["want"]
    reply = fold(events)
    assert [b.kind for b in reply.blocks] == want["kinds"]
    if "error" in want:
        err = events[-1]
        assert isinstance(err, StreamError)
        assert [err.kind, err.status, err.raw] == want["error"]
        return
    assert reply.text == want["text"]
    assert reply.usage is not None
    assert [reply.usage.input, reply.usage.output, reply.usage.cache_read, reply.usage.cache_write] == want["usage"]
    assert reply.end is not None and [reply.end.reason, reply.end.raw_reason] == want["end"]
    assert reply.end.stop_sequence == want.get("stop_sequence")
    tools = [[b.id, b.name, orjson.loads(b.arguments)] for b in reply.blocks if b.kind == "tool_call"]
    assert tools == want.get("tools", [])
    if "thinking" in want:
        thinking = next(b for b in reply.blocks if b.kind == "thinking")
        assert thinking.text == want["thinking"] and thinking.signature == want["signature"]
        assert [b.data for b in reply.blocks if b.kind == "redacted_thinking"] == [want["redacted"]]


def test_text_without_content_block_start_opens_on_its_first_delta() -> None:
    events = decode(frames_of("text"))
    assert isinstance(events[0], MessageStart)
    assert events[1] == BlockStart(0, "text")
    assert events[2] == TextDelta(0, "Hello")
    assert events[-3:] == [BlockStop(0), Usage(14, 9, None, None), End("stop", "end_turn", None)]


def test_tool_input_fragments_pass_unchanged_in_order() -> None:
    events = decode(frames_of("tool_call"))
    fragments = [e.fragment for e in events if isinstance(e, ToolArgsDelta)]
    assert fragments == ['{"city": "Pa', 'ris", "unit"', ': "celsius"}']  # the empty first fragment is no event
    assert [e for e in events if isinstance(e, BlockStart)][1:] == [
        BlockStart(1, "tool_call", "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "type"),
        BlockStart(2, "tool_call", "tooluse_Q0pv2uDkQeW3XTx8yq1hRg", "text"),
    ]


def test_reasoning_signature_and_redacted_blocks() -> None:
    events = decode(frames_of("reasoning"))
    assert [e for e in events if isinstance(e, (BlockStart, SignatureDelta))] == [
        BlockStart(0, "thinking"),
        SignatureDelta(0, "EqoBCkgIBxABGAIiQLqU5ddj0uDGmWwYrMnq8e9mM3A6bkJ1xq0gm5dH0Rr1"),
        BlockStart(1, "redacted_thinking", data="RXFvQkNrZ0lCeEFCR0FJaVFMcVU1ZGRq"),
        BlockStart(2, "text"),
    ]


def test_a_new_kind_at_an_open_index_is_a_new_block() -> None:
    # exception_mid_stream: reasoning then text at contentBlockIndex 0 (no contentBlockStop between)
    events = decode(frames_of("exception_mid_stream"))
    assert [e for e in events if not isinstance(e, MessageStart)][:5] == [
        BlockStart(0, "thinking"),
        ThinkingDelta(0, "Okay, let me think"),
        BlockStop(0),
        BlockStart(1, "text"),
        TextDelta(1, "The answer"),
    ]
    assert events[-1] == StreamError(
        "bad_gateway",
        "Model stream error: the model returned an invalid response. (upstream model failure)",
        502,
        raw="ModelStreamErrorException",
    )


@pytest.mark.parametrize(
    ("exception", "kind", "status"),
    [
        ("throttlingException", "rate_limit", 429),
        ("validationException", "invalid_request", 400),
        ("internalServerException", "api_error", 500),
        ("serviceUnavailableException", "overloaded", 503),
        ("modelStreamErrorException", "bad_gateway", 502),
        ("modelTimeoutException", "timeout", 504),
        ("ThrottlingException", "rate_limit", 429),  # however the framer spells it
        ("somethingNewException", "bad_gateway", 502),
    ],
)
def test_exception_frames(exception: str, kind: str, status: int) -> None:
    events = decode([*frames_of("text")[:2], SSEFrame('{"message":"went wrong"}', event=exception)])
    check_events(events, usage=True)
    err = events[-1]
    assert isinstance(err, StreamError) and (err.kind, err.status, err.message) == (kind, status, "went wrong")
    assert err.raw == exception[0].upper() + exception[1:]


def test_nothing_follows_the_end_or_an_error() -> None:
    decoder = CODEC.stream_decoder()
    for frame in frames_of("text"):
        decoder.feed(frame)
    assert decoder.feed(SSEFrame('{"contentBlockIndex":0,"delta":{"text":"late"}}', event="contentBlockDelta")) == []
    assert decoder.close() == []


@pytest.mark.parametrize("cut", [1, 3, 5, 6])
def test_eof_before_metadata_is_truncation(cut: int) -> None:
    """Cut after messageStart, mid-text, after contentBlockStop, and after messageStop (usage lost)."""
    events = decode(frames_of("text")[:cut])
    check_events(events, usage=True)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"


def test_usage_so_far() -> None:
    decoder = CODEC.stream_decoder()
    frames = frames_of("cache_usage")
    for frame in frames[:-1]:
        decoder.feed(frame)
    assert decoder.usage_so_far() is None  # Converse states usage once, at the end
    decoder.feed(frames[-1])
    assert decoder.usage_so_far() == Usage(input=19842, output=2, cache_read=1200, cache_write=18639)


def test_usage_before_message_stop_does_not_end_the_stream() -> None:
    frames = frames_of("text")
    events = decode([*frames[:5], frames[6], frames[5]])  # metadata ahead of messageStop
    assert isinstance(events[-1], StreamError) and events[-1].kind == "truncated"
    assert any(isinstance(e, Usage) for e in events)


def test_unknown_events_and_blocks_are_skipped() -> None:
    frames = frames_of("text")
    extra = [
        SSEFrame('{"contentBlockIndex":7,"start":{"image":{"format":"png"}}}', event="contentBlockStart"),
        SSEFrame('{"contentBlockIndex":7,"delta":{"image":{}}}', event="contentBlockDelta"),
        SSEFrame('{"contentBlockIndex":7}', event="contentBlockStop"),
        SSEFrame('{"contentBlockIndex":0,"delta":{"citation":{"title":"t"}}}', event="contentBlockDelta"),
        SSEFrame('{"whatever":1}', event="someNewEvent"),
    ]
    events = decode([*frames[:2], *extra, *frames[2:]])
    check_events(events, usage=True)
    assert fold(events).text == "Hello! 你好 — text"


def test_malformed_payload_is_a_bad_gateway_error() -> None:
    events = decode([frames_of("text")[0], SSEFrame("{not json", event="contentBlockDelta")])
    assert isinstance(events[-1], StreamError) and events[-1].kind == "bad_gateway"
    check_events(events, usage=True)


def test_an_empty_content_block_start_leaves_the_block_to_its_deltas() -> None:
    frames = frames_of("text")
    events = decode([frames[0], SSEFrame('{"contentBlockIndex":0,"start":{}}', event="contentBlockStart"), *frames[1:]])
    check_events(events, usage=True)
    assert fold(events).text == "Hello! 你好 — text"
