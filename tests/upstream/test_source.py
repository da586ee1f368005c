"""The event source (gateway/upstream/source.py): an upstream response → framer → dialect decoder → batches.

Every test streams a real HTTP/1.1 response from a loopback server that runs in the test's own
event loop (tests/support/scripted_upstream.py: each reply a script of body writes, pauses and
resets), through a real started ``Provider`` and its transport. Nothing in the unit is
mocked: what a test asserts is what the relay would get from ``next_batch`` and ``aclose``.
"""

from __future__ import annotations

import asyncio
import gzip
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from pydantic import SecretStr

from gateway.dialects.base import UpstreamCall
from gateway.dialects.registry import codec_for
from gateway.events import End, Event, StreamError, TextDelta, Usage
from gateway.framing.sse import SSEDecoder, SSEFrame
from gateway.settings import ProviderSettings
from gateway.upstream.providers import Provider
from gateway.upstream.source import MAX_WHOLE_REPLY, HttpEventSource
from tests.support.bedrock_double import anthropic_events, assemble, chunk_message, exception_message
from tests.support.scripted_upstream import Flood, Part, Pause, Reply, Request, Reset, Upstream, Wait, replying

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
TEXT = (CAPTURES / "anthropic" / "text.sse").read_bytes()


def capture(dialect: str, scenario: str = "text") -> bytes:
    return (CAPTURES / dialect / f"{scenario}.sse").read_bytes()


# --------------------------------------------------------------------------- the unit's callers


def provider_for(dialect: str, url: str, **settings: object) -> Provider:
    provider = Provider(
        ProviderSettings(name="up", dialect=dialect, base_url=url, api_key=SecretStr("sk-upstream-secret"), **settings)
    )
    provider.start()
    return provider


async def open_source(provider: Provider, path: str = "/v1/messages") -> HttpEventSource:
    response = await provider.send(UpstreamCall(path=path, body={"model": "text", "stream": True}))
    return HttpEventSource(provider, response, codec_for(provider.dialect))


async def read_all(source: HttpEventSource) -> list[Event]:
    events: list[Event] = []
    while not source.done:
        batch = await asyncio.wait_for(source.next_batch(), 5)
        assert batch, "a batch is never empty"
        events += batch
    return events


async def stream(dialect: str, *parts: Part, **reply: object) -> tuple[list[Event], HttpEventSource, Upstream]:
    """The events of one reply made of ``parts``; the source is closed, its gauge back at zero."""
    async with Upstream(replying(*parts, **reply)) as upstream:
        provider = provider_for(dialect, upstream.url)
        source = await open_source(provider)
        events = await read_all(source)
        await source.aclose()
        assert provider.gauge.open == 0
        await provider.close()
    return events, source, upstream


def last_error(events: list[Event]) -> StreamError:
    assert isinstance(events[-1], StreamError), events[-1:]
    return events[-1]


# --------------------------------------------------------------------------- clean streams


async def test_a_stream_split_at_every_byte_boundary_gives_the_events_of_one_read() -> None:
    whole, source, _ = await stream("anthropic", TEXT)
    assert isinstance(whole[-1], End) and not source.synthetic
    assert "".join(e.text for e in whole if isinstance(e, TextDelta)) == "Hello from the gateway. 你好 — ok!"
    async with Upstream(
        lambda r: Reply([TEXT[: int(r.target.rsplit("=", 1)[1])], TEXT[int(r.target.rsplit("=", 1)[1]) :]])
    ) as upstream:
        provider = provider_for("anthropic", upstream.url)
        for cut in range(1, len(TEXT)):  # every boundary, inside a UTF-8 character too
            response = await provider.send(UpstreamCall(path="/v1/messages", body={}, params={"cut": str(cut)}))
            source = HttpEventSource(provider, response, codec_for("anthropic"))
            assert await read_all(source) == whole, cut
            await source.aclose()
        assert upstream.connections == 1  # each finished body drained: one connection for them all
        await provider.close()


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_every_dialect_streams_its_capture_to_a_finished_answer(dialect: str) -> None:
    data = capture(dialect)
    events, source, _ = await stream(dialect, data[: len(data) // 3], data[len(data) // 3 :])
    assert isinstance(events[-1], End) and source.done and not source.synthetic
    assert any(isinstance(e, TextDelta) for e in events)


async def test_a_gzip_body_is_inflated_and_decodes_the_same() -> None:
    plain, _, _ = await stream("anthropic", TEXT)
    packed = gzip.compress(TEXT)
    events, _, _ = await stream("anthropic", packed[:100], packed[100:], headers={"content-encoding": "gzip"})
    assert events == plain


# --------------------------------------------------------------------------- endings that are not the end


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    ("scenario", "kind", "synthetic"),
    [
        ("cut_mid_event", "truncated", True),  # the body ends in the middle of an event
        ("no_terminator", "truncated", True),  # a clean close without the dialect's terminator
    ],
)
async def test_a_stream_that_ends_early_ends_in_a_synthetic_error(
    dialect: str, scenario: str, kind: str, synthetic: bool
) -> None:
    events, source, _ = await stream(dialect, capture(dialect, scenario))
    err = last_error(events)
    assert (err.kind, err.status, source.synthetic, source.done) == (kind, 502, synthetic, True)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_an_error_the_upstream_sent_is_not_synthetic(dialect: str) -> None:
    events, source, _ = await stream(dialect, capture(dialect, "error_mid_stream"))
    last_error(events)
    assert not source.synthetic


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_reset_mid_stream_is_a_bad_gateway(dialect: str) -> None:
    data = capture(dialect)
    events, source, upstream = await stream(dialect, data[: len(data) // 2], Reset())
    err = last_error(events)
    assert (err.kind, err.status, source.synthetic) == ("bad_gateway", 502, True)
    assert "mid-stream" in err.message
    assert not any(isinstance(e, End) for e in events)
    if dialect == "gemini-interactions":  # it tried to resume; the upstream knew no such interaction
        assert [r.method for r in upstream.requests] == ["POST", "GET"]


# --------------------------------------------------------------------------- whole JSON bodies


WHOLE = assemble(anthropic_events("text"))


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (orjson.dumps(WHOLE), "decode_whole"),
        (b'["text"]', "not a JSON object"),
        (b"[]", "not a JSON object"),
        (b"text", "not a JSON object"),
        (b'"message"', "not a JSON object"),
    ],
    ids=["message", "array-of-words", "empty-array", "not-json", "a-string"],
)
async def test_a_json_body_is_decoded_whole(body: bytes, expect: str) -> None:
    events, source, _ = await stream("anthropic", body[:7], body[7:], content_type="application/json")
    assert source.is_json and source.done
    if expect == "decode_whole":
        assert events == codec_for("anthropic").decode_whole(WHOLE) and isinstance(events[-1], End)
    else:
        err = last_error(events)
        assert (err.kind, err.status) == ("bad_gateway", 502) and expect in err.message


async def test_a_json_body_cut_by_a_reset_is_a_bad_gateway() -> None:
    body = orjson.dumps(WHOLE)
    events, _, _ = await stream("anthropic", body[:40], Reset(), content_type="application/json", length=len(body))
    err = last_error(events)
    assert (err.kind, err.status) == ("bad_gateway", 502) and "connection failed" in err.message


async def test_a_gzip_stream_cut_inside_the_compression_is_an_error_not_an_answer() -> None:
    packed = gzip.compress(TEXT)
    events, source, _ = await stream("anthropic", packed[: len(packed) // 2], headers={"content-encoding": "gzip"})
    assert last_error(events).status == 502 and source.synthetic and not any(isinstance(e, End) for e in events)


@pytest.mark.parametrize(("scenario", "ending"), [("text", End), ("no_terminator", StreamError)])
async def test_a_json_array_of_gemini_chunks_decodes_as_the_stream_would(scenario: str, ending: type) -> None:
    sse = capture("gemini", scenario)
    array = b"[" + b",".join(f.data.encode() for f in SSEDecoder().feed(sse)) + b"]"
    streamed, _, _ = await stream("gemini", sse)
    events, _, _ = await stream("gemini", array, content_type="application/json; charset=UTF-8")
    assert events == streamed and isinstance(events[-1], ending)


async def test_a_json_body_over_the_limit_is_a_bad_gateway_read_no_further() -> None:
    total = 4 * MAX_WHOLE_REPLY
    events, _, upstream = await stream("anthropic", Flood(total), content_type="application/json", length=total)
    err = last_error(events)
    assert (err.kind, err.status) == ("bad_gateway", 502) and "larger than 64 MiB" in err.message
    assert MAX_WHOLE_REPLY <= upstream.sent < MAX_WHOLE_REPLY + (32 << 20)  # the limit plus socket buffers


# --------------------------------------------------------------------------- batching and the fast path


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_until_content_stops_after_the_first_token_and_holds_the_rest_of_that_read(dialect: str) -> None:
    data = capture(dialect)
    whole, _, _ = await stream(dialect, data)
    release = asyncio.Event()
    async with Upstream(replying(data, Wait(release))) as upstream:
        provider = provider_for(dialect, upstream.url)
        source = await open_source(provider)
        first = await asyncio.wait_for(source.next_batch(until_content=True), 5)
        assert isinstance(first[-1], TextDelta) and not source.done
        assert sum(isinstance(e, TextDelta) for e in first) == 1
        held = await asyncio.wait_for(source.next_batch(), 1)  # while the body has not ended yet
        texts = [e for e in whole if isinstance(e, TextDelta)]
        assert (
            first + held == whole[: len(first) + len(held)]
            and [e for e in held if isinstance(e, TextDelta)] == texts[1:]
        )
        release.set()  # (Gemini's end is the body's end)
        assert first + held + await read_all(source) == whole
        await source.aclose()
        await provider.close()


@pytest.mark.parametrize("until_content", [False, True])
async def test_keep_frames_pairs_each_frame_with_the_events_it_made(until_content: bool) -> None:
    async with Upstream(replying(TEXT[:500], TEXT[500:])) as upstream:
        provider = provider_for("anthropic", upstream.url)
        source = await open_source(provider)
        source.keep_frames = True
        events: list[Event] = []
        pairs: list[tuple[SSEFrame, list[Event]]] = []
        while not source.done:
            events += await asyncio.wait_for(source.next_batch(until_content), 5)
            pairs += source.take_frames()
            assert source.take_frames() == []
        await source.aclose()
        await provider.close()
    assert [frame for frame, _ in pairs] == SSEDecoder().feed(TEXT)  # ping included: the fast path forwards it
    assert [e for _, produced in pairs for e in produced] == events


async def test_usage_so_far_follows_the_stream() -> None:
    async with Upstream(replying(TEXT)) as upstream:
        provider = provider_for("anthropic", upstream.url)
        source = await open_source(provider)
        assert source.usage_so_far() is None
        await source.next_batch(until_content=True)
        early = source.usage_so_far()
        assert early is not None and early.input == 30 and early.cache_read == 10  # input counts the cached tokens too
        events = await read_all(source)
        usage = source.usage_so_far()
        assert usage is not None and usage.output == 12 and usage.input == 30
        reported = [e for e in events if isinstance(e, Usage)]
        assert reported and reported[-1] == usage  # the last Usage event said it too
        await source.aclose()
        await provider.close()


# --------------------------------------------------------------------------- closing: the connection's fate


@pytest.mark.parametrize(
    ("tail", "reused"),
    [
        ([Pause(0.03)], True),  # the body's end arrives just after the terminator: drained
        ([], True),
        ([Pause(0.6)], False),  # later than the 200 ms bound: not waited for
        ([b": pad\n\n" * 15000, Pause(0.3)], False),  # more than 64 KiB after the terminator
    ],
    ids=["end-soon", "end-at-once", "end-late", "over-64k"],
)
async def test_aclose_drains_a_finished_body_so_the_connection_is_reused(tail: list[Part], reused: bool) -> None:
    async with Upstream(replying(TEXT, *tail)) as upstream:
        provider = provider_for("anthropic", upstream.url)
        source = await open_source(provider)
        assert isinstance((await read_all(source))[-1], End)
        started = time.monotonic()
        await source.aclose()
        assert time.monotonic() - started < 0.45
        assert provider.pool is not None and provider.pool.open_connections == (1 if reused else 0)
        source = await open_source(provider)  # the next request: on the same connection, or a new one
        await read_all(source)
        await source.aclose()
        assert upstream.connections == (1 if reused else 2)
        await provider.close()


async def test_aclose_of_a_truncated_stream_does_not_wait_for_the_body() -> None:
    async with Upstream(replying(capture("anthropic", "no_terminator"), Pause(2))) as upstream:
        provider = provider_for("anthropic", upstream.url)
        source = await open_source(provider)
        first = await asyncio.wait_for(source.next_batch(), 5)
        assert first
        started = time.monotonic()
        await source.aclose()  # not done: closed at once, never drained
        assert time.monotonic() - started < 0.1 and provider.gauge.open == 0
        await provider.close()


# --------------------------------------------------------------------------- Interactions: resume


INTERACTION = [f + b"\n\n" for f in capture("gemini-interactions").split(b"\n\n") if f.strip()]
INTERACTION_ID = orjson.loads(INTERACTION[0].split(b"data: ", 1)[1])["interaction"]["id"]


def event_id(frame: bytes) -> str | None:
    data = frame.split(b"data: ", 1)[1]
    return None if data.startswith(b"[DONE]") else str(orjson.loads(data)["event_id"])


@pytest.mark.parametrize("drop", [Reset(), None], ids=["reset", "clean-close"])
@pytest.mark.parametrize("drops", [1, 2, 3])
async def test_a_dropped_interactions_stream_resumes_after_the_last_event(drop: Reset | None, drops: int) -> None:
    """Each answer (the POST, then each GET) drops after half of what is left; two resumes are tried."""
    whole, _, _ = await stream("gemini-interactions", b"".join(INTERACTION))
    left = list(INTERACTION)

    def answer(request: Request) -> Reply:
        nonlocal left
        if request.method == "GET":
            last = parse_qs(urlsplit(request.target).query)["last_event_id"][0]
            left = left[[event_id(f) for f in left].index(last) + 1 :]
        if len(upstream.requests) > drops:
            return Reply(list(left))
        half = len(left) // 2
        return Reply([b"".join(left[:half]) + left[half][:25], *([drop] if drop else [])])

    async with Upstream(answer) as upstream:
        provider = provider_for("gemini-interactions", upstream.url)
        source = await open_source(provider, "/v1beta/interactions")
        source.keep_frames = True
        events = await read_all(source)
        kept = [frame.data for frame, _ in source.take_frames()]
        await source.aclose()
        assert provider.gauge.open == 0
        await provider.close()
    gets = [urlsplit(r.target) for r in upstream.requests[1:]]
    assert [r.method for r in upstream.requests] == ["POST"] + ["GET"] * min(drops, 2)
    assert all(
        g.path == f"/v1beta/interactions/{INTERACTION_ID}" and parse_qs(g.query)["stream"] == ["true"] for g in gets
    )
    if drops <= 2:
        assert events == whole and not source.synthetic  # continued, nothing twice
        assert kept == [f.data for f in SSEDecoder().feed(b"".join(INTERACTION))]  # the cut frame is not kept half
    else:
        assert events[:-1] == whole[: len(events) - 1]  # what came is the stream's beginning, then the error
        assert last_error(events).status == 502 and source.synthetic


async def test_a_resume_whose_connection_fails_ends_in_a_bad_gateway() -> None:
    half = len(INTERACTION) // 2
    async with Upstream(
        lambda r: None if r.method == "GET" else Reply([b"".join(INTERACTION[:half]), Reset()])
    ) as upstream:
        provider = provider_for("gemini-interactions", upstream.url)
        source = await open_source(provider, "/v1beta/interactions")
        events = await read_all(source)
        await source.aclose()
        assert provider.gauge.open == 0
        await provider.close()
    assert [r.method for r in upstream.requests] == ["POST", "GET"]
    assert (last_error(events).kind, last_error(events).status, source.synthetic) == ("bad_gateway", 502, True)


# --------------------------------------------------------------------------- Bedrock: eventstream


BEDROCK_EVENTS = anthropic_events("text")


def anthropic_events_of(raw: list[bytes]) -> list[Event]:
    decoder = codec_for("anthropic").stream_decoder()
    return [e for data in raw for e in decoder.feed(SSEFrame(data.decode(), orjson.loads(data)["type"]))]


def bad_crc(message: bytes) -> bytes:
    return message[:-1] + bytes([message[-1] ^ 0xFF])


@pytest.mark.parametrize("same_read", [True, False], ids=["same-read", "next-read"])
@pytest.mark.parametrize(
    ("tail", "kind", "status", "says"),
    [
        (
            exception_message("modelStreamErrorException", "the model stumbled on text"),
            "bad_gateway",
            502,
            "the model stumbled on text",
        ),
        (exception_message("throttlingException", "Too many tokens"), "rate_limit", 429, "Too many tokens"),
        (bad_crc(chunk_message(BEDROCK_EVENTS[5])), "bad_gateway", 502, "eventstream"),
    ],
    ids=["model-error", "throttle", "bad-crc"],
)
async def test_a_bedrock_exception_frame_ends_the_stream_after_the_chunks_before_it(
    same_read: bool, tail: bytes, kind: str, status: int, says: str
) -> None:
    before = b"".join(chunk_message(e) for e in BEDROCK_EVENTS[:5])  # up to two text deltas
    parts: list[Part] = [before + tail] if same_read else [before, tail]
    async with Upstream(replying(*parts, content_type="application/vnd.amazon.eventstream")) as upstream:
        provider = provider_for("anthropic", "", platform="bedrock", region="us-east-1", endpoint_url=upstream.url)
        source = await open_source(provider, "/model/text/invoke-with-response-stream")
        source.keep_frames = True  # the fast path: the frames before the failure are forwarded too
        events = await read_all(source)
        kept = source.take_frames()
        await source.aclose()
        assert provider.gauge.open == 0
        await provider.close()
    err = last_error(events)
    assert events[:-1] == anthropic_events_of(BEDROCK_EVENTS[:5])
    assert [f.data for f, _ in kept] == [e.decode() for e in BEDROCK_EVENTS[:5]] and [
        e for _, p in kept for e in p
    ] == events[:-1]
    assert any(isinstance(e, TextDelta) for e in events)
    assert (err.kind, err.status, source.synthetic) == (kind, status, True) and says in err.message


async def test_a_bedrock_stream_decodes_like_the_anthropic_one() -> None:
    wire = b"".join(chunk_message(e) for e in BEDROCK_EVENTS)
    async with Upstream(
        replying(wire[:333], wire[333:], content_type="application/vnd.amazon.eventstream")
    ) as upstream:
        provider = provider_for("anthropic", "", platform="bedrock", region="us-east-1", endpoint_url=upstream.url)
        source = await open_source(provider, "/model/text/invoke-with-response-stream")
        events = await read_all(source)
        await source.aclose()
        await provider.close()
    plain, _, _ = await stream("anthropic", TEXT)
    assert events == plain and not source.synthetic
