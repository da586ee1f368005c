"""``streamGenerateContent`` without ``alt=sse``: the same chunks as one streamed JSON array.

Google's REST default for streaming is ``application/json`` holding ``[chunk,\\r\\nchunk, …]``,
written element by element as the answer is generated; the SDKs ask for ``alt=sse``, plain REST
callers often do not. This wraps the SSE encoder and reframes its output: each ``data:`` frame
becomes an array element (orjson escapes control characters, so a frame's JSON holds no CR LF
of its own), the array opens with the first element and closes after the end or an error (an
error is the last element, ``{"error": {...}}``). No keepalives: nothing may precede the ``[``.
"""

from __future__ import annotations

from gateway.events import End, Event, StreamError

from .stream_encode import GeminiStreamEncoder

_FRAME_END = b"\r\n\r\n"
_DATA = b"data: "


class JsonArrayStreamEncoder:
    __slots__ = ("_inner", "_opened", "_closed")

    def __init__(self, inner: GeminiStreamEncoder) -> None:
        self._inner = inner
        self._opened = False
        self._closed = False

    def keepalive(self) -> bytes:
        return b""

    def encode(self, event: Event) -> bytes:
        if self._closed:
            return b""
        frames = self._inner.encode(event)
        out = b""
        if frames:
            elements = [f[len(_DATA) :] if f.startswith(_DATA) else f for f in frames.split(_FRAME_END) if f]
            out = (b",\r\n" if self._opened else b"[") + b",\r\n".join(elements)
            self._opened = True
        if type(event) is End or type(event) is StreamError:
            self._closed = True
            out = (out if self._opened else b"[") + b"]"
        return out
