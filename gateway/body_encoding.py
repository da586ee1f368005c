"""Compressed request bodies (``Content-Encoding``): inflated as they arrive, bounded by the limit.

``gzip`` (and its alias ``x-gzip``) and ``deflate`` (zlib-wrapped as HTTP defines it, or raw, as
some clients send it) are inflated piece by piece with ``zlib``; ``max_body_bytes`` applies to the
*inflated* size, and inflating stops one byte past it, so a compression bomb is a 413 after at most
``limit + 1`` bytes of output, never inflated whole. ``br``, ``zstd`` or any other coding is a 415,
and a body that does not inflate (or ends mid-stream) a 400: a compressed body is never parsed as
if it were plain. ``identity`` is no coding.
"""

from __future__ import annotations

import zlib

from gateway.errors import GatewayError

SUPPORTED = "gzip, deflate or no Content-Encoding"


def _too_large(limit: int) -> GatewayError:
    return GatewayError("request_too_large", f"request body is larger than {limit} bytes once inflated", 413)


class Inflater:
    """One request body's decoder: ``feed`` each received piece, then ``finish``."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit
        self.size = 0
        self.started = False
        self._d = zlib.decompressobj(31 if coding == "gzip" else 15)

    def _bad(self) -> GatewayError:
        return GatewayError(
            "invalid_request", f"request body does not inflate as {self.coding} (Content-Encoding: {self.coding})", 400
        )

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        while data:
            try:
                piece = self._d.decompress(data, self.limit - self.size + 1)
            except zlib.error:
                if self.coding == "deflate" and not self.started:  # raw deflate, without the zlib header
                    self._d, self.started = zlib.decompressobj(-15), True
                    continue
                raise self._bad() from None
            self.started = True
            self.size += len(piece)
            if self.size > self.limit:
                raise _too_large(self.limit)
            out.append(piece)
            if self._d.eof:
                if self._d.unused_data.strip():
                    raise self._bad()  # bytes after the end of the compressed stream
                break
            data = self._d.unconsumed_tail
        return b"".join(out)

    def finish(self) -> bytes:
        if not self._d.eof:
            raise self._bad()  # the compressed stream was cut short
        return b""


def inflater_for(content_encoding: str | None, limit: int) -> Inflater | None:
    """The decoder for this ``Content-Encoding`` header, None for a plain body, or a 415."""
    if not content_encoding:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return Inflater("deflate" if codings[0] == "deflate" else "gzip", limit)
    raise GatewayError(
        "unsupported_media_type", f"Content-Encoding {content_encoding!r} is not supported: send {SUPPORTED}", 415
    )
