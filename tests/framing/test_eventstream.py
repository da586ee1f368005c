"""The AWS eventstream framer (gateway/framing/eventstream.py): the SSE framer's treatment.

Frames are made by the test encoder (tests/support/bedrock_double.py) and checked to parse the
same with botocore's own parser (``botocore.eventstream.EventStreamBuffer``) and with the
gateway's; then split anywhere, broken CRCs, impossible lengths and truncation at every part.
"""

from __future__ import annotations

import base64
import itertools
import struct
import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.framing.base import FramerError
from gateway.framing.eventstream import EventStreamDecoder, parse_headers, unwrap_invoke
from tests.support.bedrock_double import (
    anthropic_events,
    chunk_message,
    encode_header,
    encode_message,
    event_message,
    exception_message,
)

botocore_eventstream = pytest.importorskip("botocore.eventstream")

STREAM = [chunk_message(e) for e in anthropic_events("tool_call")]
WIRE = b"".join(STREAM)
EXPECTED = [(f.event, f.data) for f in EventStreamDecoder(unwrap_invoke).feed(WIRE)]


def botocore_messages(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = botocore_eventstream.EventStreamBuffer()
    buffer.add_data(data)
    return [(m.headers, m.payload) for m in buffer]


def test_the_captured_stream_unwraps_to_the_anthropic_events() -> None:
    events = anthropic_events("tool_call")
    assert [d for _, d in EXPECTED] == [e.decode() for e in events]
    assert [e for e, _ in EXPECTED] == [orjson.loads(e)["type"] for e in events]


def test_botocore_parses_the_test_frames_as_the_gateway_does() -> None:
    parsed = botocore_messages(WIRE)
    assert len(parsed) == len(STREAM)
    for (headers, payload), (event, data) in zip(parsed, EXPECTED, strict=True):
        assert headers[":event-type"] == "chunk" and headers[":message-type"] == "event"
        inner = base64.b64decode(orjson.loads(payload)["bytes"]).decode()
        assert inner == data and orjson.loads(inner)["type"] == event


def test_every_header_value_type_parses_like_botocore() -> None:
    uid = uuid.UUID("12345678-1234-5678-1234-567812345678").bytes
    block = b"".join(
        [
            encode_header("true", True),
            encode_header("false", False),
            encode_header("byte", -7, 2),
            encode_header("short", -300, 3),
            encode_header("int", 70000, 4),
            encode_header("long", -(2**40), 5),
            encode_header("bytes", b"\x00\xff"),
            encode_header("type", "text ✓"),
            encode_header("ts", 1733112000000, 8),
            encode_header("uuid", uid, 9),
            encode_header(":event-type", "text"),
            encode_header(":message-type", "event"),
        ]
    )
    message = encode_message(block, b'{"type":"text"}')
    ((theirs, payload),) = botocore_messages(message)
    ours = parse_headers(block)
    assert payload == b'{"type":"text"}'
    for name in ("true", "false", "byte", "short", "int", "long", "bytes", "type"):
        assert ours[name] == theirs[name], name
    assert ours["ts"] == 1733112000000 and ours["uuid"] == uid  # botocore turns these into datetime / UUID
    frames = EventStreamDecoder().feed(message)
    assert [(f.event, f.data) for f in frames] == [("text", '{"type":"text"}')]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(WIRE)), max_size=12))
def test_split_anywhere_gives_the_same_frames(cuts: list[int]) -> None:
    decoder = EventStreamDecoder(unwrap_invoke)
    bounds = [0, *sorted(cuts), len(WIRE)]
    frames = []
    for a, b in itertools.pairwise(bounds):
        frames += decoder.feed(WIRE[a:b])
    assert [(f.event, f.data) for f in frames] == EXPECTED
    assert decoder.close() is True


def test_byte_at_a_time() -> None:
    decoder = EventStreamDecoder(unwrap_invoke)
    frames = [f for i in range(len(WIRE)) for f in decoder.feed(WIRE[i : i + 1])]
    assert [(f.event, f.data) for f in frames] == EXPECTED and decoder.close()


def _corrupt(message: bytes, at: int) -> bytes:
    out = bytearray(message)
    out[at] ^= 0x10
    return bytes(out)


@pytest.mark.parametrize("where", ["prelude_length", "prelude_crc", "headers", "payload", "message_crc"])
def test_a_bad_crc_is_an_error_never_garbage(where: str) -> None:
    message = STREAM[1]
    at = {
        "prelude_length": 2,
        "prelude_crc": 9,
        "headers": 14,
        "payload": len(message) - 10,
        "message_crc": len(message) - 1,
    }[where]
    decoder = EventStreamDecoder(unwrap_invoke)
    with pytest.raises(FramerError) as caught:
        decoder.feed(STREAM[0] + _corrupt(message, at) + STREAM[2])
    assert caught.value.error.kind == "bad_gateway" and caught.value.error.status == 502
    assert "CRC" in caught.value.error.message or "length" in caught.value.error.message
    assert [f.event for f in caught.value.frames] == ["message_start"]  # what came before is kept


def test_impossible_lengths_are_refused_before_waiting_for_them() -> None:
    prelude = struct.pack(">II", 8, 0)  # shorter than a message can be
    with pytest.raises(FramerError, match="impossible lengths"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", __import__("zlib").crc32(prelude)))
    prelude = struct.pack(">II", 1 << 30, 0)  # a gigabyte payload: not buffered, refused
    with pytest.raises(FramerError, match="impossible lengths"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", __import__("zlib").crc32(prelude)))


@pytest.mark.parametrize("cut", [5, 12, 20, -8, -2])  # mid-prelude, after it, mid-headers, mid-payload, mid-CRC
def test_truncation_is_reported(cut: int) -> None:
    decoder = EventStreamDecoder(unwrap_invoke)
    frames = decoder.feed(STREAM[0] + STREAM[1][:cut])
    assert [f.event for f in frames] == ["message_start"]
    assert decoder.close() is False


def test_clean_end_between_messages() -> None:
    decoder = EventStreamDecoder(unwrap_invoke)
    decoder.feed(STREAM[0])
    assert decoder.close() is True


@pytest.mark.parametrize(
    ("exception", "kind", "status"),
    [
        ("throttlingException", "rate_limit", 429),
        ("modelStreamErrorException", "bad_gateway", 502),
        ("internalServerException", "api_error", 500),
        ("serviceUnavailableException", "overloaded", 503),
        ("validationException", "invalid_request", 400),
        ("modelTimeoutException", "timeout", 504),
        ("somethingNewException", "bad_gateway", 502),
    ],
)
def test_exception_frames_keep_their_kind(exception: str, kind: str, status: int) -> None:
    wire = STREAM[0] + STREAM[1] + exception_message(exception, "Too many tokens, please wait.")
    with pytest.raises(FramerError) as caught:
        EventStreamDecoder(unwrap_invoke).feed(wire)
    error = caught.value.error
    assert (error.kind, error.status, error.raw) == (kind, status, exception)
    assert "Too many tokens, please wait." in error.message and exception in error.message
    assert [f.event for f in caught.value.frames] == ["message_start", "content_block_start"]


def test_error_messages_with_code_and_message_headers() -> None:
    wire = encode_message(
        {":message-type": "error", ":error-code": "ThrottlingException", ":error-message": "slow down"}, b""
    )
    with pytest.raises(FramerError) as caught:
        EventStreamDecoder().feed(wire)
    assert (caught.value.error.kind, caught.value.error.status) == ("rate_limit", 429)
    assert "slow down" in caught.value.error.message


def test_converse_events_pass_as_they_are() -> None:
    payload = b'{"contentBlockIndex":0,"delta":{"text":"type"},"p":"abc"}'
    (frame,) = EventStreamDecoder().feed(event_message("contentBlockDelta", payload))
    assert (frame.event, frame.data) == ("contentBlockDelta", payload.decode())


def test_a_chunk_without_bytes_is_an_error() -> None:
    with pytest.raises(FramerError, match="base64"):
        EventStreamDecoder(unwrap_invoke).feed(event_message("chunk", b'{"bytes":"!!not base64!!"}'))


def test_an_inner_event_with_type_not_first_is_still_named() -> None:
    (frame,) = EventStreamDecoder(unwrap_invoke).feed(chunk_message(b'{"index":0, "type": "ping"}'))
    assert frame.event == "ping"
