"""What a framer is: bytes off the socket cut into ``SSEFrame``s, whatever the body's framing.

Two framers exist: ``gateway.framing.sse.SSEDecoder`` (server-sent events, every provider's own API) and
``gateway.framing.eventstream.EventStreamDecoder`` (AWS eventstream binary framing, Bedrock). The
platform picks one per provider (gateway/platforms/); the event source (gateway/upstream/source.py) feeds
it and hands the frames to the dialect's decoder, which never knows which framing carried them.
This module sits below all of them so none imports another's layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gateway.events import StreamError


@dataclass(slots=True)
class SSEFrame:
    """One frame, whatever framing carried it: ``data`` (text) and the SSE fields beside it."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class Framer(Protocol):
    """Bytes off the socket → frames. ``gateway.framing.sse.SSEDecoder`` is the model."""

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        """The frames completed by ``chunk`` (split anywhere). May raise ``FramerError``."""

    def close(self) -> bool:
        """End of input: True when the body ended cleanly between frames (else: truncation)."""


class FramerError(Exception):
    """Raised by ``Framer.feed`` for what ends the stream in the framing itself: a platform's
    exception frame after the 200 (Bedrock ``throttlingException``), a bad checksum. The event
    source ends the stream with ``error`` (never garbage, never a silent end). ``frames``: those
    the same ``feed`` completed before it, decoded first (a read may bring both)."""

    def __init__(self, error: StreamError, frames: list[SSEFrame] | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.frames = frames or []
