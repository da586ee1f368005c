"""gateway/dialects/kit.py: the frame parser and its one bad-frame rule (held by all five
decoders), token counts, block numbering, and the one name per mapping in every dialect."""

from __future__ import annotations

import importlib
import inspect

import pytest

from gateway.dialects.kit import Blocks, bad_frame, count, frame_array, frame_object, prompt_side
from gateway.dialects.registry import MODULES, codec_for
from gateway.events import BlockStart, BlockStop, Event, MessageStart, StreamError, Usage
from gateway.framing.sse import SSEFrame
from tests.support.event_contract import check_events

# A first frame each decoder accepts, so the bad frame comes mid-stream.
FIRST = {
    "anthropic": SSEFrame(
        '{"type":"message_start","message":{"id":"m","model":"text","usage":{"input_tokens":1}}}', "message_start"
    ),
    "openai-chat": SSEFrame('{"id":"c","model":"text","choices":[{"index":0,"delta":{"content":"Hi"}}]}'),
    "openai-responses": SSEFrame(
        '{"type":"response.created","response":{"id":"resp_1","model":"text"}}', "response.created"
    ),
    "gemini": SSEFrame('{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}],"responseId":"r"}'),
    "gemini-interactions": SSEFrame(
        '{"event_type":"interaction.created","interaction":{"id":"v1_x","status":"in_progress"}}', "interaction.created"
    ),
    "bedrock-converse": SSEFrame('{"role":"assistant"}', "messageStart"),
}
BAD = ["{not json", "", "42", '"type"', "null", "true"]


@pytest.mark.parametrize("data", BAD)
@pytest.mark.parametrize("dialect", list(MODULES))
def test_a_frame_that_is_not_a_json_object_ends_every_stream_as_bad_gateway(dialect: str, data: str) -> None:
    decoder = codec_for(dialect).stream_decoder()
    events: list[Event] = list(decoder.feed(FIRST[dialect]))
    events += decoder.feed(SSEFrame(data, "type"))
    check_events(events)
    err = events[-1]
    assert isinstance(err, StreamError) and (err.kind, err.status) == ("bad_gateway", 502)
    assert dialect in err.message and "'type' frame" in err.message
    assert decoder.feed(FIRST[dialect]) == [] and decoder.close() == []  # nothing after the end


@pytest.mark.parametrize("dialect", list(MODULES))
def test_a_bad_first_frame_is_a_leading_failure(dialect: str) -> None:
    events = codec_for(dialect).stream_decoder().feed(SSEFrame("<html>502 Bad Gateway</html>"))
    check_events(events)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "bad_gateway"


def test_frame_parsing() -> None:
    assert frame_object(SSEFrame('{"a":1}')) == {"a": 1}
    assert frame_object(SSEFrame("[1]")) is None and frame_array(SSEFrame("[1]")) == [1]
    assert frame_array(SSEFrame("{}")) is None and frame_array(SSEFrame("nope")) is None
    assert "is not JSON" in bad_frame(SSEFrame("nope"), "x").message
    assert "is not a JSON object" in bad_frame(SSEFrame("[]"), "x").message
    long = bad_frame(SSEFrame("x" * 5000), "x").message
    assert len(long) < 300  # quotes the start of the frame, not all of it


def test_gemini_array_frames() -> None:
    decoder = codec_for("gemini").stream_decoder()
    events = decoder.feed(
        SSEFrame(
            '[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}]}]'
        )
    )
    events += decoder.close()
    check_events(events)
    bad = codec_for("gemini").stream_decoder().feed(SSEFrame('[{"candidates":[]}, 7]'))
    assert isinstance(bad[-1], StreamError) and "array item" in bad[-1].message


@pytest.mark.parametrize(
    "value,want",
    [
        (12, 12),
        (0, 0),
        (12.0, 12),
        ("12", 12),
        (None, None),
        (True, None),
        (False, None),
        (12.5, None),
        ("n/a", None),
        ("-3", None),
        ("１２", None),
        (float("inf"), None),
        (float("nan"), None),
        ([1], None),
        ({}, None),
    ],
)
def test_count(value: object, want: int | None) -> None:
    got = count(value)
    assert got == want and (got is None or type(got) is int)


def test_prompt_side_keeps_only_the_prompt() -> None:
    assert prompt_side(Usage(10, 5, 3, 2, 1)) == Usage(input=10, cache_read=3)


def test_blocks_number_and_close_in_order() -> None:
    blocks, out = Blocks(), []  # type: ignore[var-annotated]
    a = blocks.start("text", out, key="a")
    b = blocks.start("tool_call", out, key=7, id="call_1", name="type")
    assert (a, b, blocks.started) == (0, 1, 2)
    assert blocks.live == {"a": 0, 7: 1}
    blocks.stop("a", out)
    blocks.stop("a", out)  # stops once
    blocks.stop("never", out)
    c = blocks.start("thinking", out)  # keyed by its own index
    blocks.stop_all(out)
    assert out == [
        BlockStart(0, "text"),
        BlockStart(1, "tool_call", "call_1", "type"),
        BlockStop(0),
        BlockStart(2, "thinking"),
        BlockStop(1),
        BlockStop(2),
    ]
    assert c == 2 and blocks.live == {}


def test_blocks_one_open_block_per_key() -> None:
    blocks, out = Blocks(), []  # type: ignore[var-annotated]
    blocks.start("text", out, key=0)
    blocks.start("text", out, key=0)
    assert out == [BlockStart(0, "text"), BlockStop(0), BlockStart(1, "text")] and blocks.live == {0: 1}


@pytest.mark.parametrize("dialect", list(MODULES))
def test_one_name_per_mapping(dialect: str) -> None:
    """Every dialect package says the same verbs, with the same parameters (gateway/dialects/kit.py)."""
    usage = importlib.import_module(f"{MODULES[dialect]}.usage")
    stops = importlib.import_module(f"{MODULES[dialect]}.stop_reasons")
    assert len(inspect.signature(usage.convert_usage).parameters) == 1
    assert list(inspect.signature(stops.map_stop_reason).parameters) == ["raw", "tool_called", "refusal"]
    if not hasattr(stops, "render_stop_reason") and not hasattr(usage, "render_usage"):
        return  # an upstream-only dialect (bedrock-converse): no caller, nothing to render
    assert len(inspect.signature(usage.render_usage).parameters) == 1
    assert list(inspect.signature(stops.render_stop_reason).parameters) == ["end", "same_dialect"]


def test_decoders_emit_message_start_once() -> None:
    for dialect in MODULES:
        decoder = codec_for(dialect).stream_decoder()
        events = decoder.feed(FIRST[dialect]) + decoder.feed(FIRST[dialect])
        assert sum(isinstance(e, MessageStart) for e in events) == 1, dialect
