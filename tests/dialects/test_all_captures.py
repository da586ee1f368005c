"""Every codec over every recorded stream of its dialect (``captures/`` and, when present,
``shared/captures-public/``): the decoder keeps the ordering contract of ``gateway/events.py``
(``tests/support/event_contract.py``), gives the same events however the bytes are split, and what
its own dialect's encoder writes decodes back to the same answer.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.dialects.base import EncodeContext
from gateway.dialects.registry import MODULES, codec_for
from gateway.events import End, Event, MessageStart, StreamError
from gateway.framing.sse import SSEDecoder
from gateway.ir import ChatRequest, Thinking
from gateway.reply import fold
from tests.support.captures import sse_files
from tests.support.event_contract import check_events

CASES = [(dialect, path) for dialect in MODULES for path in sse_files(dialect)]
IDS = [f"{dialect}/{path.parent.parent.name}/{path.stem}" for dialect, path in CASES]


@contextmanager
def fixed_ids() -> Iterator[None]:
    """Ids a decoder makes up (a message id the upstream did not send, a Gemini call id) come from a
    counter, so two decodes of one stream can be compared event for event."""
    counter = itertools.count()
    with ExitStack() as stack:
        for package in MODULES.values():
            module = importlib.import_module(f"{package}.stream_decode")
            if hasattr(module, "new_id"):
                stack.enter_context(
                    mock.patch.object(module, "new_id", lambda prefix, nbytes=12: f"{prefix}{next(counter)}")
                )
        yield


def decode(dialect: str, pieces: list[bytes]) -> list[Event]:
    """The events for a body arriving in ``pieces``, as the relay reads it (an SSE frame cut off at
    EOF is a truncation)."""
    with fixed_ids():
        sse, decoder, events = SSEDecoder(), codec_for(dialect).stream_decoder(), []
        for piece in pieces:
            for frame in sse.feed(piece):
                events += decoder.feed(frame)
        clean = sse.close()
        if not clean and not (events and isinstance(events[-1], (End, StreamError))):
            events.append(StreamError("truncated", "cut mid event", 502))
        else:
            events += decoder.close()
    return events


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(body)) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)])]


@pytest.mark.parametrize("dialect,path", CASES, ids=IDS)
def test_contract(dialect: str, path: Path) -> None:
    check_events(decode(dialect, [path.read_bytes()]))


@pytest.mark.parametrize("dialect,path", CASES, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=12), one_byte=st.booleans())
def test_split_anywhere_gives_the_same_events(dialect: str, path: Path, cuts: list[int], one_byte: bool) -> None:
    body = path.read_bytes()
    whole = decode(dialect, [body])
    pieces = (
        [body[i : i + 1] for i in range(len(body))]
        if one_byte and len(body) < 20_000
        else split(body, [c % (len(body) + 1) for c in cuts])
    )
    assert decode(dialect, pieces) == whole


def seen(events: list[Event]) -> tuple[Any, ...]:
    """What a caller of the dialect gets from events: the folded answer. Counts the upstream did not
    state read as 0, as every encoder writes them (a failed stream's are not compared: not every
    dialect's error frame carries usage); a failure is one, whatever its kind (a dialect's
    wire has fewer error types than the gateway, so a truncation may come back as an api_error)."""
    reply = fold(events)
    blocks = [(b.kind, b.text, b.id, b.name, b.signature, b.data or None) for b in reply.blocks]
    usage = reply.usage
    counts = (
        (usage.input or 0, usage.output or 0, usage.cache_read or 0)
        if usage is not None and reply.end is not None
        else None
    )
    # a Chat refusal is streamed back as content with finish_reason "stop": the reason is the raw one
    end = (reply.end.raw_reason, reply.end.stop_sequence) if reply.end is not None else None
    return blocks, end, counts, reply.error is not None


@pytest.mark.parametrize("dialect,path", CASES, ids=IDS)
def test_decode_encode_decode(dialect: str, path: Path) -> None:
    events = decode(dialect, [path.read_bytes()])
    start = events[0]
    model = start.model if isinstance(start, MessageStart) and start.model else "model"
    # a caller that asked for usage and for thought text: what an encoder may leave out otherwise
    request = ChatRequest(model=model, include_usage=True, thinking=Thinking(include_thoughts=True))
    ctx = EncodeContext(model=model, upstream_dialect=dialect, request=request)
    try:
        encoder = codec_for(dialect).stream_encoder(ctx)
    except NotImplementedError:
        pytest.skip(f"{dialect} is an upstream dialect only: no encoder")
    body = b"".join(encoder.encode(event) for event in events)
    again = decode(dialect, [body])
    check_events(again)
    assert seen(again) == seen(events)
