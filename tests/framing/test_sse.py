"""gateway/framing/sse.py: the WHATWG server-sent-events decoder (and the frame encoder).

Unit tests pin each rule of https://html.spec.whatwg.org/multipage/server-sent-events.html that the
decoder keeps; property tests (hypothesis) check that feeding the same bytes split anywhere yields
the same frames as feeding them whole, and the same as ``reference`` below: a deliberately naive,
whole-input implementation written straight from the spec's prose.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.framing.sse import COMMENT_KEEPALIVE, SSEDecoder, SSEFrame, encode_frame

Frame = tuple[str, str | None, str | None, int | None]

# --------------------------------------------------------------------------------------------
# helpers


def as_tuples(frames: list[SSEFrame]) -> list[Frame]:
    return [(f.data, f.event, f.id, f.retry) for f in frames]


def decode_chunks(chunks: list[bytes]) -> tuple[list[Frame], bool]:
    dec = SSEDecoder()
    frames: list[SSEFrame] = []
    for chunk in chunks:
        frames.extend(dec.feed(chunk))
    return as_tuples(frames), dec.close()


def decode_whole(raw: bytes) -> tuple[list[Frame], bool]:
    return decode_chunks([raw])


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 <= c <= len(raw)})
    out, prev = [], 0
    for p in points:
        out.append(raw[prev:p])  # empty chunks included on purpose: feed(b"") must be harmless
        prev = p
    out.append(raw[prev:])
    return out


_LINE_END = re.compile(r"\r\n|\r|\n")


def reference(raw: bytes) -> tuple[list[Frame], bool]:
    """The spec's algorithm over the whole input at once (no incremental state to get wrong).

    Returns (frames, clean). ``clean`` follows the decoder's documented contract: False when the
    input ended inside a line that is not a comment, or after field lines without the blank line
    that would have ended their event.
    """
    text = raw.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    pieces = _LINE_END.split(text)
    tail = pieces.pop()  # the text after the last line end: an unfinished line ("" if none)
    frames: list[Frame] = []
    data: str | None = None  # the spec's data buffer, with its trailing LFs
    event: str | None = None
    last_id: str | None = None
    retry: int | None = None
    pending = False
    for line in pieces:
        if line == "":
            if data is not None and data != "":
                frames.append((data[:-1] if data.endswith("\n") else data, event, last_id, retry))
            data, event, retry, pending = None, None, None, False
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        pending = True
        if name == "data":
            data = (data or "") + value + "\n"
        elif name == "event":
            event = value
        elif name == "id":
            if "\x00" not in value:
                last_id = value
        elif name == "retry":
            if value and all(c in "0123456789" for c in value):
                retry = int(value)
    clean = not pending and (tail == "" or tail.startswith(":"))
    return frames, clean


def frames(text: str | bytes) -> list[Frame]:
    raw = text.encode() if isinstance(text, str) else text
    got, _ = decode_whole(raw)
    return got


# --------------------------------------------------------------------------------------------
# line ends


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_line_ends(eol: str) -> None:
    text = f"event: a{eol}data: one{eol}{eol}data: two{eol}data: three{eol}{eol}"
    assert frames(text) == [("one", "a", None, None), ("two\nthree", None, None, None)]


def test_mixed_line_ends_in_one_stream() -> None:
    assert frames("data: a\rdata: b\ndata: c\r\n\r\ndata: d\n\r") == [
        ("a\nb\nc", None, None, None),
        ("d", None, None, None),
    ]


def test_cr_cr_is_two_line_ends_not_one() -> None:
    # "\r\r" is two line ends: the second is a blank line that dispatches.
    assert frames("data: x\r\r") == [("x", None, None, None)]
    # "\r\n\r\n" is exactly two line ends too (no extra blank line from the LF).
    assert frames("data: x\r\n\r\ndata: y\r\n\r\n") == [("x", None, None, None), ("y", None, None, None)]


def test_gemini_crlf_crlf_framing() -> None:
    raw = b'data: {"a": 1}\r\n\r\ndata: {"a": 2}\r\n\r\n'
    assert decode_whole(raw) == ([('{"a": 1}', None, None, None), ('{"a": 2}', None, None, None)], True)


# --------------------------------------------------------------------------------------------
# fields


def test_several_data_lines_join_with_lf() -> None:
    assert frames("data: a\ndata: b\ndata: c\n\n") == [("a\nb\nc", None, None, None)]


def test_empty_data_lines_count() -> None:
    # `data` with an empty value still starts an event; two of them give "\n".
    assert frames("data:\n\n") == [("", None, None, None)]
    assert frames("data\n\n") == [("", None, None, None)]
    assert frames("data:\ndata:\n\n") == [("\n", None, None, None)]
    assert frames("data: x\ndata:\n\n") == [("x\n", None, None, None)]


def test_data_with_and_without_space() -> None:
    assert frames("data:x\n\n") == [("x", None, None, None)]
    assert frames("data: x\n\n") == [("x", None, None, None)]
    # only ONE space is removed; the rest belongs to the value
    assert frames("data:  x \n\n") == [(" x ", None, None, None)]
    # a tab is not the optional space
    assert frames("data:\tx\n\n") == [("\tx", None, None, None)]
    # everything after the first colon is the value, colons included
    assert frames('data: {"a":"b:c"}\n\n') == [('{"a":"b:c"}', None, None, None)]


def test_comment_lines_are_ignored() -> None:
    assert frames(": hello\ndata: x\n: mid\n\n") == [("x", None, None, None)]
    assert frames(":\n\n") == []
    assert frames(": keepalive\n\n: again\n\ndata: x\n\n") == [("x", None, None, None)]


def test_comment_only_stream_is_clean() -> None:
    assert decode_whole(COMMENT_KEEPALIVE * 3) == ([], True)


def test_event_field_is_per_frame() -> None:
    assert frames("event: ping\ndata: {}\n\ndata: plain\n\n") == [
        ("{}", "ping", None, None),
        ("plain", None, None, None),
    ]


def test_event_last_one_wins() -> None:
    assert frames("event: a\nevent: b\ndata: x\n\n") == [("x", "b", None, None)]


def test_id_persists_as_last_event_id() -> None:
    text = "id: 1\ndata: a\n\ndata: b\n\nid: 7\ndata: c\n\nid\ndata: d\n\n"
    # id persists to later frames; a bare `id` (empty value) resets it to "".
    assert frames(text) == [
        ("a", None, "1", None),
        ("b", None, "1", None),
        ("c", None, "7", None),
        ("d", None, "", None),
    ]


def test_id_with_nul_is_ignored() -> None:
    assert frames("id: 5\ndata: a\n\nid: 6\x007\ndata: b\n\n") == [("a", None, "5", None), ("b", None, "5", None)]


def test_id_set_on_an_undispatched_frame_still_persists() -> None:
    assert frames("id: 3\n\ndata: a\n\n") == [("a", None, "3", None)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3000", 3000),
        ("0", 0),
        ("007", 7),
        ("", None),
        ("-1", None),
        ("1.5", None),
        (" 10", None),
        ("10 ", None),
        ("1e3", None),
        ("abc", None),
        ("²", None),
        ("١٢", None),
        ("１２", None),
    ],
)
def test_retry_digits_only(value: str, expected: int | None) -> None:
    # ASCII digits only; "²" and Arabic-Indic digits are str.isdigit() but not spec digits
    # (before the fix "retry: ²" raised ValueError from int()).
    assert frames(f"retry: {value}\ndata: x\n\n") == [("x", None, None, expected)]


def test_retry_is_per_frame() -> None:
    assert frames("retry: 10\ndata: a\n\ndata: b\n\n") == [("a", None, None, 10), ("b", None, None, None)]


def test_unknown_fields_and_field_without_colon() -> None:
    # A line without a colon is a field name with an empty value; unknown names are ignored.
    assert frames("foo: bar\nbaz\ndata: x\n\n") == [("x", None, None, None)]
    assert frames("event\ndata: x\n\n") == [("x", "", None, None)]
    # field names are case-sensitive
    assert frames("Data: x\nDATA: y\n\n") == []


def test_field_name_with_space_is_not_data() -> None:
    assert frames("data : x\n\n") == []
    assert frames(" data: x\n\n") == []


# --------------------------------------------------------------------------------------------
# BOM


def test_leading_bom_is_dropped() -> None:
    assert frames(b"\xef\xbb\xbfdata: x\n\n") == [("x", None, None, None)]


def test_only_one_leading_bom_is_dropped() -> None:
    # the second BOM is part of the first line's name, so the line is an unknown field
    assert frames(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []


def test_bom_later_is_content() -> None:
    assert frames("data: \ufeffx\n\n") == [("\ufeffx", None, None, None)]
    assert frames(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == [("a", None, None, None)]


def test_bom_split_across_chunks() -> None:
    assert decode_chunks([b"\xef", b"\xbb", b"\xbfdata: x\n\n"]) == ([("x", None, None, None)], True)


# --------------------------------------------------------------------------------------------
# dispatch and end of input


def test_dispatch_only_on_blank_line() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\n") == []
    assert dec.feed(b"data: y\n") == []
    assert as_tuples(dec.feed(b"\n")) == [("x\ny", None, None, None)]
    assert dec.close() is True


def test_frame_without_data_is_not_dispatched() -> None:
    assert frames("event: ping\n\n") == []
    assert frames("event: a\nid: 1\nretry: 5\n\ndata: x\n\n") == [("x", None, "1", None)]


def test_blank_lines_alone_dispatch_nothing() -> None:
    assert decode_whole(b"\n\n\r\n\r\r\n") == ([], True)


def test_empty_input_is_clean() -> None:
    assert decode_whole(b"") == ([], True)


def test_clean_end_returns_true() -> None:
    assert decode_whole(b"data: a\n\ndata: b\n\n") == ([("a", None, None, None), ("b", None, None, None)], True)


@pytest.mark.parametrize(
    "tail",
    [
        b"data: b",
        b"data: b\n",
        b"data: b\r",
        b"data: b\r\n",
        b"event: x\n",
        b"id: 9\n",
        b"retry: 1\n",
        b"dat",
        b"foo\n",
    ],
)
def test_unterminated_last_event_is_not_dispatched(tail: bytes) -> None:
    got, clean = decode_whole(b"data: a\n\n" + tail)
    assert got == [("a", None, None, None)]
    assert clean is False


def test_unterminated_comment_at_eof_is_clean() -> None:
    assert decode_whole(b"data: a\n\n: bye") == ([("a", None, None, None)], True)


def test_truncated_utf8_at_eof_is_not_clean() -> None:
    got, clean = decode_whole("data: a\n\ndata: €".encode()[:-1])
    assert got == [("a", None, None, None)]
    assert clean is False


def test_close_does_not_dispatch_buffered_event() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n\ndata: b\n") != []
    assert dec.close() is False


# --------------------------------------------------------------------------------------------
# arbitrary splits


def test_split_inside_multibyte_utf8() -> None:
    raw = "data: é€😀\n\n".encode()
    want = ([("é€😀", None, None, None)], True)
    for i in range(len(raw) + 1):
        assert decode_chunks([raw[:i], raw[i:]]) == want
    assert decode_chunks([bytes([b]) for b in raw]) == want


def test_split_between_cr_and_lf() -> None:
    raw = b"data: a\r\n\r\ndata: b\r\n\r\n"
    want = ([("a", None, None, None), ("b", None, None, None)], True)
    for i in range(len(raw) + 1):
        assert decode_chunks([raw[:i], raw[i:]]) == want
    assert decode_chunks([bytes([b]) for b in raw]) == want


def test_cr_then_empty_chunks_then_lf() -> None:
    # the LF that completes a CRLF may arrive after empty chunks and after a partial UTF-8 char
    assert decode_chunks([b"data: a\r", b"", b"\n", b"\r", b"", b"\n"]) == ([("a", None, None, None)], True)
    dec = SSEDecoder()
    out = dec.feed(b"data: a\r") + dec.feed(b"\n\r") + dec.feed(b"\xe2") + dec.feed(b"\x82\xac")
    # "\r" ended the frame; the "€" after it is a new (unfinished) line, not a CRLF's LF
    assert as_tuples(out) == [("a", None, None, None)]
    assert dec.close() is False


def test_lone_cr_at_chunk_end_completes_the_line_at_once() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert as_tuples(dec.feed(b"\r")) == [("a", None, None, None)]  # CR CR: the blank line


def test_byte_by_byte_equals_whole() -> None:
    raw = b"\xef\xbb\xbf: c\r\nid: 1\revent: e\ndata: \xc3\xa9\r\ndata\r\n\r\nretry: 5\ndata: z\n\n"
    assert decode_chunks([bytes([b]) for b in raw]) == decode_whole(raw) == reference(raw)


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert frames(b"data: \xff\xfe\n\n") == [("\ufffd\ufffd", None, None, None)]


# --------------------------------------------------------------------------------------------
# encoder round trip


@pytest.mark.parametrize("data", ["x", "", '{"a": 1}', "line1\nline2", "\n", "tail\n", "é€😀"])
def test_encode_frame_round_trips(data: str) -> None:
    raw = encode_frame(data, event="ev", id="7")
    assert decode_whole(raw) == ([(data, "ev", "7", None)], True)


def test_encode_frame_plain() -> None:
    assert encode_frame(b"[DONE]") == b"data: [DONE]\n\n"
    assert encode_frame("x", event="message_stop") == b"event: message_stop\ndata: x\n\n"


# --------------------------------------------------------------------------------------------
# property tests: generated streams

_TOKENS = [
    "data",
    "data:",
    "data: ",
    "event: ",
    "id: ",
    "id:",
    "retry: ",
    "retry:",
    ":",
    ": c",
    "x",
    "é",
    "€",
    "😀",
    " ",
    "\t",
    "\x00",
    "\ufeff",
    "0",
    "12",
    "²",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "\r\n\r\n",
    "[DONE]",
    '{"a": 1}',
]
sse_text = st.lists(st.sampled_from(_TOKENS), max_size=60).map("".join)
sse_bytes = st.one_of(
    sse_text.map(str.encode),
    sse_text.map(lambda s: b"\xef\xbb\xbf" + s.encode()),
    st.binary(max_size=200),
    st.lists(
        st.sampled_from([b"data: ", b"\r", b"\n", b"\xe2", b"\x82", b"\xac", b"\xff", b"\xef\xbb\xbf", b"a"]),
        max_size=40,
    ).map(b"".join),
)


@given(raw=sse_bytes, cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=20))
@settings(max_examples=400, deadline=None)
def test_generated_streams_split_anywhere(raw: bytes, cuts: list[int]) -> None:
    whole = decode_whole(raw)
    assert whole == reference(raw)
    assert decode_chunks(split_at(raw, cuts)) == whole


@given(raw=sse_bytes)
@settings(max_examples=200, deadline=None)
def test_generated_streams_byte_by_byte(raw: bytes) -> None:
    assert decode_chunks([bytes([b]) for b in raw]) == decode_whole(raw) == reference(raw)


# --------------------------------------------------------------------------------------------
# property tests: every capture file

ROOTS = [
    Path(__file__).resolve().parents[3] / "shared" / "captures-public",
    Path(__file__).resolve().parents[2] / "captures",
]


def capture_files() -> list[Path]:
    found: list[Path] = []
    for root in ROOTS:
        if root.is_dir():
            found.extend(sorted(root.rglob("*.sse")))
    return found


CAPTURES = capture_files()
_ids = [f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in CAPTURES]
_params = CAPTURES or [pytest.param(None, marks=pytest.mark.skip(reason="no capture files found"))]


@pytest.mark.parametrize("path", _params, ids=_ids or None)
def test_capture_whole_matches_reference(path: Path) -> None:
    raw = path.read_bytes()
    got, clean = decode_whole(raw)
    assert (got, clean) == reference(raw)
    if raw.strip():
        assert got, f"{path}: no frames decoded"


@pytest.mark.parametrize("path", _params, ids=_ids or None)
def test_capture_byte_by_byte(path: Path) -> None:
    raw = path.read_bytes()
    assert decode_chunks([raw[i : i + 1] for i in range(len(raw))]) == decode_whole(raw)


@pytest.mark.parametrize("path", _params, ids=_ids or None)
@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_capture_split_anywhere(path: Path, data: st.DataObject) -> None:
    raw = path.read_bytes()
    n = len(raw)
    whole = _whole_capture(path)
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=n), max_size=64), label="cuts")
    assert decode_chunks(split_at(raw, cuts)) == whole
    # fixed-size chunks too, so CR/LF pairs and UTF-8 sequences straddle chunk ends at many offsets
    # (size 1 is test_capture_byte_by_byte; big files get bigger chunks to keep the suite fast)
    size = data.draw(
        st.integers(min_value=2, max_value=17) if n <= 20_000 else st.integers(min_value=61, max_value=4099),
        label="size",
    )
    assert decode_chunks([raw[i : i + size] for i in range(0, n, size)]) == whole


@functools.cache
def _whole_capture(path: Path) -> tuple[list[Frame], bool]:
    return decode_whole(path.read_bytes())


def test_a_line_that_never_ends_is_refused_not_buffered_without_bound() -> None:
    from gateway.framing import sse
    from gateway.framing.base import FramerError

    d = SSEDecoder()
    piece = b"x" * (1 << 20)
    with pytest.raises(FramerError) as info:
        d.feed(b"data: ")
        for _ in range((sse.MAX_EVENT >> 20) + 1):
            d.feed(piece)
    assert info.value.error.kind == "bad_gateway" and info.value.error.status == 502


def test_an_event_of_many_data_lines_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.framing import sse
    from gateway.framing.base import FramerError

    monkeypatch.setattr(sse, "MAX_EVENT", 1000)
    d = SSEDecoder()
    assert d.feed(b"data: ok\n\n")[0].data == "ok"
    with pytest.raises(FramerError):
        for _ in range(200):
            d.feed(b"data: 0123456789\n")


def test_a_long_line_over_many_reads_is_joined_once() -> None:
    """Linear, not quadratic: 8 MiB in 64 KiB reads is one join (was a copy of the whole line per read)."""
    import time

    d = SSEDecoder()
    line = b"x" * (8 << 20)
    started = time.process_time()
    frames = d.feed(b"event: big\ndata: ")
    for i in range(0, len(line), 1 << 16):
        frames += d.feed(line[i : i + (1 << 16)])
    frames += d.feed(b"\n\n")
    assert [(f.event, len(f.data)) for f in frames] == [("big", len(line))]
    assert time.process_time() - started < 2.0  # the quadratic version took ~15 s here
    assert d.close()
