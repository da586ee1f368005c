"""Event sources: where the relay pulls decoded events from, one batch per upstream read.

``HttpEventSource`` wraps a streamed upstream ``httpx.Response``: bytes, one socket read's worth per item of
its ``aiter_raw()`` on the gateway's transport → ``SSEDecoder`` → the upstream dialect's ``StreamDecoder`` → events. A body that ends mid-event, a connection reset, or a clean
close without the dialect's terminator all become a trailing ``StreamError`` — never a silent end.
A JSON body (an upstream that ignored the stream switch) is decoded whole.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable
from typing import Any, Protocol, cast

import orjson

from gateway.dialects.base import Codec, Resumable
from gateway.dialects.common import UPSTREAM
from gateway.events import (
    End,
    Event,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.base import FramerError
from gateway.framing.sse import SSEFrame
from gateway.http import client as http_client
from gateway.http.client import Response
from gateway.upstream.providers import Provider

MAX_WHOLE_REPLY = 64 << 20  # a whole JSON reply; streamed ones are read as they come

# Where a first batch may stop: the first token (or the end) has been decoded.
_FIRST_CONTENT = (TextDelta, ThinkingDelta, ToolArgsDelta, End, StreamError)


class EventSource(abc.ABC):
    """Base: ``done`` turns True once the final batch (ending in End or StreamError) was returned."""

    done: bool = False

    @abc.abstractmethod
    async def next_batch(self, until_content: bool = False) -> list[Event]:
        """The next non-empty batch of events (one upstream read's worth).

        ``until_content``: stop after the frame that brought the first token (the rest of that
        read waits for the next call), so the caller's first token does not wait for a burst."""

    async def aclose(self) -> None:
        return None

    def usage_so_far(self) -> Usage | None:
        """What the upstream reported about usage so far, whether or not it was emitted as a
        ``Usage`` event yet (``None``: nothing). The relay reads it once, when the request ends."""
        return None


class HttpEventSource(EventSource):
    """Events from a streamed upstream response.

    With ``keep_frames`` (the same-dialect fast path) it also keeps each SSE frame with the events
    it produced, for ``take_frames``; ``synthetic`` tells that the last ``StreamError`` was made
    here (a cut or a missing terminator) rather than sent by the upstream in a frame.
    """

    def __init__(self, provider: Provider, response: Response, codec: Codec) -> None:
        self._provider = provider
        self._response = response
        self._codec = codec
        self._closed = False
        content_type, encoding = _type_and_encoding(response)
        self._reads = _body_reads(response, encoding)
        self.is_json = "application/json" in content_type
        self._sse = provider.platform.framer(provider.settings)  # SSE, or the platform's (Bedrock: eventstream)
        self._decoder = codec.stream_decoder()
        self.keep_frames = False
        self._resumes = 0
        self._frames: list[tuple[SSEFrame, list[Event]]] = []
        self._held: list[SSEFrame] = []  # frames of a read not yet decoded (after until_content)
        self.synthetic = False

    def take_frames(self) -> list[tuple[SSEFrame, list[Event]]]:
        frames, self._frames = self._frames, []
        return frames

    async def next_batch(self, until_content: bool = False) -> list[Event]:
        token = UPSTREAM.set(self._provider.name)  # a decoder's warnings name the provider
        try:
            return await self._next_batch(until_content)
        finally:
            UPSTREAM.reset(token)

    async def _next_batch(self, until_content: bool) -> list[Event]:
        if self.is_json:
            return await self._whole()
        feed = self._decoder.feed
        keep = self.keep_frames
        while True:
            if self._held:
                frames, self._held = self._held, []
            else:
                try:
                    chunk = await self._reads.__anext__()  # everything one socket read brought
                except StopAsyncIteration:
                    chunk = b""
                except http_client.HTTPError as exc:
                    if await self._resume():
                        continue
                    self.done = self.synthetic = True
                    return [
                        StreamError("bad_gateway", f"upstream connection failed mid-stream: {type(exc).__name__}", 502)
                    ]
                if not chunk:
                    if not self._ended() and await self._resume():
                        continue
                    return self._finish()
                try:
                    frames = self._sse.feed(chunk)
                except FramerError as exc:  # a platform's exception frame, a bad checksum
                    self.done = self.synthetic = True  # no frame of the upstream carries this error
                    before: list[Event] = []
                    for frame in exc.frames:  # completed in the same read, before the failure
                        produced = feed(frame)
                        if keep:
                            self._frames.append((frame, produced))
                        before += produced
                    return [*before, exc.error]
            events: list[Event] = []
            if until_content:
                for i, frame in enumerate(frames):
                    produced = feed(frame)
                    if keep:
                        self._frames.append((frame, produced))
                    events += produced
                    if any(type(e) in _FIRST_CONTENT for e in produced):
                        self._held = frames[i + 1 :]
                        break
            elif keep:
                for frame in frames:
                    produced = feed(frame)
                    self._frames.append((frame, produced))
                    events += produced
            else:
                for frame in frames:
                    events += feed(frame)
            if events:
                if isinstance(events[-1], (End, StreamError)):
                    self.done = True
                return events

    def usage_so_far(self) -> Usage | None:
        return self._decoder.usage_so_far()

    def _ended(self) -> bool:
        """Whether the decoder already saw the dialect's end (then EOF is simply the end)."""
        return isinstance(self._codec, Resumable) and self._codec.stream_ended(self._decoder)

    async def _resume(self) -> bool:
        """A dialect that can resume a dropped stream (Interactions: GET with last_event_id) gets
        two tries; the events after the last one seen continue into the same decoder."""
        codec = self._codec
        call = codec.resume_call(self._decoder) if isinstance(codec, Resumable) and self._resumes < 2 else None
        if call is None:
            return False
        call = self._provider.platform.adapt(
            call, "", self._provider.settings
        )  # the platform's path (Vertex: /v1beta1/projects/…)
        self._resumes += 1
        await self._reads.aclose()
        await self._provider.close_response(self._response)
        self._closed = True
        try:
            response = await self._provider.send(call)
        except http_client.HTTPError:
            return False
        self._response, self._closed = response, False
        self._reads = _body_reads(response, _type_and_encoding(response)[1])
        if response.status_code >= 400:
            return False
        self._sse = self._provider.platform.framer(
            self._provider.settings
        )  # a half-received frame is dropped: it is replayed after last_event_id
        return True

    def _finish(self) -> list[Event]:
        self.done = True
        if not self._sse.close():
            self.synthetic = True
            return [StreamError("truncated", "upstream stream ended in the middle of an event", 502)]
        events = self._decoder.close()
        if not events or not isinstance(events[-1], (End, StreamError)):
            events.append(StreamError("truncated", "upstream stream ended without its terminator", 502))
        if isinstance(events[-1], StreamError):
            self.synthetic = True
        return events

    async def _whole(self) -> list[Event]:
        self.done = True
        try:
            body = await self._read_whole(MAX_WHOLE_REPLY + 1)
        except http_client.HTTPError as exc:
            return [StreamError("bad_gateway", f"upstream connection failed: {type(exc).__name__}", 502)]
        if len(body) > MAX_WHOLE_REPLY:  # a runaway or hostile upstream must not take the gateway's memory
            return [StreamError("bad_gateway", f"upstream reply is larger than {MAX_WHOLE_REPLY >> 20} MiB", 502)]
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, list) and obj and all(isinstance(chunk, dict) for chunk in obj):
            return self._array_of_chunks(obj)
        if not isinstance(obj, dict):
            return [StreamError("bad_gateway", "upstream sent a reply that is not a JSON object", 502)]
        return self._codec.decode_whole(obj)

    async def _read_whole(self, limit: int) -> bytes:
        """The body through the same reads as a stream's (``_body_reads``: the transport's own
        stream when not compressed), about its first ``limit`` bytes at most."""
        parts = []
        size = 0
        async for chunk in self._reads:
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _array_of_chunks(self, chunks: list[dict[str, Any]]) -> list[Event]:
        """A JSON array of stream chunks (Gemini's streamed REST default, from an upstream that
        ignored ``alt=sse``): each element goes through the stream decoder as if it were a frame."""
        events: list[Event] = []
        for chunk in chunks:
            events += self._decoder.feed(SSEFrame(orjson.dumps(chunk).decode()))
        if not events or not isinstance(events[-1], (End, StreamError)):
            events += self._decoder.close()
        if not events or not isinstance(events[-1], (End, StreamError)):
            events.append(StreamError("truncated", "upstream stream ended without its terminator", 502))
        return events

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.done and not self.synthetic and not self.is_json:
                await self._drain()
        finally:
            await self._reads.aclose()
            await self._provider.close_response(self._response)

    async def _drain(self) -> None:
        """Read the rest of a finished body so the connection goes back to the pool.

        The dialect's terminator usually arrives just before the body's end; closing before
        reading that end would throw the connection away (a new TCP + TLS handshake next time).
        Bounded: a body that goes on after its terminator is cut after 64 KiB or 200 ms.
        """
        budget = 65536
        try:
            async with asyncio.timeout(0.2):
                async for chunk in self._reads:
                    budget -= len(chunk)
                    if budget < 0:
                        return
        except (TimeoutError, http_client.HTTPError):
            return


class _BodyReads(Protocol):
    """The body's reads as ``HttpEventSource`` pulls them: an async iterator it can close early."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    def __anext__(self) -> Awaitable[bytes]: ...

    async def aclose(self) -> None: ...


def _type_and_encoding(response: Response) -> tuple[str, str | None]:
    """The response's content-type ("" when none) and content-encoding, in one pass over its raw
    headers (each ``Headers.get`` normalises the name and scans them all)."""
    types: list[str] = []
    encodings: list[str] = []
    for name, value in response.headers.raw:
        lower = name.lower()
        if lower == b"content-type":
            types.append(value.decode("latin-1"))
        elif lower == b"content-encoding":
            encodings.append(value.decode("latin-1"))
    return ", ".join(types), (", ".join(encodings) if encodings else None)  # joined as httpx's get joins them


def _body_reads(response: Response, encoding: str | None) -> _BodyReads:
    """The body as it arrives. Not compressed: the response's stream itself, one item per socket
    read on the gateway's transport (``aiter_raw`` would add a generator, a chunker and a context
    manager per read for nothing); compressed: ``aiter_bytes`` (httpx inflates it)."""
    if encoding is None or encoding == "identity":
        return _Raw(cast("AsyncIterable[bytes]", response.stream))  # an async client's: never the sync kind
    return cast(_BodyReads, response.aiter_bytes())  # an async generator (httpx annotates it an AsyncIterator)


class _Raw:
    """``response.stream`` as an iterator (the response itself is closed by ``Provider.close_response``)."""

    __slots__ = ("_iterator", "_next")

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._iterator = stream.__aiter__()
        self._next = self._iterator.__anext__

    def __aiter__(self) -> _Raw:
        return self

    def __anext__(self) -> Awaitable[bytes]:
        return self._next()

    async def aclose(self) -> None:
        close = getattr(self._iterator, "aclose", None)  # an async generator left mid-body
        if close is not None:
            await close()
