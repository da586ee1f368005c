"""AWS eventstream binary framing (``application/vnd.amazon.eventstream``), beside ``gateway.framing.sse``.

Bedrock's streaming answers (InvokeModelWithResponseStream, ConverseStream) are not SSE but a
sequence of binary messages::

    prelude:  total length (u32) | headers length (u32) | CRC32 of those 8 bytes (u32)
    headers:  [name length (u8) | name | type (u8) | value]*
    payload:  total length - headers length - 16 bytes
    trailer:  CRC32 of everything before it (u32)

all integers big-endian. ``EventStreamDecoder`` is incremental like ``SSEDecoder``: bytes split
anywhere, frames out as they complete. Both CRCs are checked before a byte of the message is
used: a bad CRC, an impossible length or a malformed header ends the stream with a
``FramerError`` (a 502), never garbage. ``close()`` is False when a message was cut.

Each event message becomes ``SSEFrame(data=<payload text>, event=<:event-type>)``, so a dialect's
decoder never knows the framing. An ``exception`` message (``:exception-type``
``throttlingException`` …) or an ``error`` message (``:error-code``) after the 200 raises
``FramerError`` carrying the frames completed before it and a ``StreamError`` whose kind follows
the exception: a throttle keeps 429 semantics, so before the first block it is retried like an
HTTP 429.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Callable

import orjson

from gateway.events import StreamError
from gateway.framing.base import FramerError
from gateway.framing.sse import SSEFrame

PRELUDE = 12  # total length, headers length, prelude CRC
MIN_MESSAGE = 16  # prelude + message CRC
MAX_HEADERS = 128 * 1024  # the spec's limits (botocore's too)
MAX_PAYLOAD = 24 * 1024 * 1024

_U32x3 = struct.Struct(">III")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")

# header value type -> fixed value size (None: u16 length-prefixed); the spec's ten types
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_PREFIXED = {6, 7}
_SIGNED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}

HeaderValue = bool | int | bytes | str

# Bedrock's exception types (after the 200) -> (kind, status); others are a 502.
EXCEPTIONS: dict[str, tuple[str, int]] = {
    "throttlingexception": ("rate_limit", 429),
    "servicequotaexceededexception": ("rate_limit", 429),
    "modelnotreadyexception": ("rate_limit", 429),
    "modelstreamerrorexception": ("bad_gateway", 502),
    "modelerrorexception": ("bad_gateway", 502),
    "internalserverexception": ("api_error", 500),
    "serviceunavailableexception": ("overloaded", 503),
    "validationexception": ("invalid_request", 400),
    "modeltimeoutexception": ("timeout", 504),
    "accessdeniedexception": ("permission", 403),
    "resourcenotfoundexception": ("not_found", 404),
}


def parse_headers(raw: bytes | memoryview) -> dict[str, HeaderValue]:
    """The header block of one message (every value type of the spec). ``ValueError`` if malformed."""
    out: dict[str, HeaderValue] = {}
    pos, end = 0, len(raw)
    while pos < end:
        n = raw[pos]
        pos += 1
        if pos + n + 1 > end:
            raise ValueError("header name runs past the header block")
        name = bytes(raw[pos : pos + n]).decode("utf-8")
        pos += n
        kind = raw[pos]
        pos += 1
        value: HeaderValue
        if kind in _PREFIXED:
            if pos + 2 > end:
                raise ValueError("header value length runs past the header block")
            (size,) = _U16.unpack_from(raw, pos)
            pos += 2
            if pos + size > end:
                raise ValueError("header value runs past the header block")
            blob = bytes(raw[pos : pos + size])
            value = blob.decode("utf-8") if kind == 7 else blob
            pos += size
        elif kind in _FIXED:
            size = _FIXED[kind]
            if pos + size > end:
                raise ValueError("header value runs past the header block")
            if kind in (0, 1):
                value = kind == 0
            elif kind == 9:
                value = bytes(raw[pos : pos + 16])
            else:
                (value,) = struct.unpack_from(_SIGNED[kind], raw, pos)
            pos += size
        else:
            raise ValueError(f"unknown header value type {kind}")
        out[name] = value
    return out


def _bad(message: str) -> FramerError:
    return FramerError(StreamError("bad_gateway", f"upstream eventstream: {message}", 502))


def exception_error(headers: dict[str, HeaderValue], payload: bytes) -> StreamError:
    """An ``exception`` / ``error`` message as the ``StreamError`` it stands for."""
    if headers.get(":message-type") == "error":
        code = str(headers.get(":error-code") or "error")
        message = str(headers.get(":error-message") or "")
    else:
        code = str(headers.get(":exception-type") or "exception")
        message = ""
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            found = obj.get("message") or obj.get("Message")
            message = found if isinstance(found, str) else ""
        elif payload:
            message = payload[:2000].decode("utf-8", "replace")
    kind, status = EXCEPTIONS.get(code.lower(), ("bad_gateway", 502))
    return StreamError(kind, f"upstream {code}: {message or 'no message'}", status, raw=code)


Unwrap = Callable[[str, bytes], SSEFrame]


def as_frame(event: str, payload: bytes) -> SSEFrame:
    """An event as it is (Converse): ``event`` = ``:event-type``, ``data`` = the payload."""
    return SSEFrame(payload.decode("utf-8", "replace"), event)


def unwrap_invoke(event: str, payload: bytes) -> SSEFrame:
    """InvokeModelWithResponseStream: a ``chunk`` is ``{"bytes": base64(one provider event)}``
    (plus Bedrock's random-length ``"p"`` padding); the frame is the inner event, named by its
    ``type`` so the Anthropic decoder sees what api.anthropic.com would have sent."""
    if event != "chunk":
        return as_frame(event, payload)
    try:
        wrapper = orjson.loads(payload)
        inner = base64.b64decode(wrapper["bytes"], validate=True)
    except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error, ValueError):
        raise _bad("a chunk without base64 'bytes'") from None
    name: str | None = None
    if inner.startswith(b'{"type":"'):  # the usual shape: the type first, no JSON parse needed
        close = inner.find(b'"', 9)
        if close > 0:
            name = inner[9:close].decode("utf-8", "replace")
    if name is None:
        try:
            obj = orjson.loads(inner)
        except orjson.JSONDecodeError:
            obj = None
        found = obj.get("type") if isinstance(obj, dict) else None
        name = found if isinstance(found, str) else None
    return SSEFrame(inner.decode("utf-8", "replace"), name)


class EventStreamDecoder:
    """Bytes off the socket → ``SSEFrame``s (see the module docstring). ``unwrap`` turns one
    event message (its ``:event-type`` and payload) into the frame the dialect's decoder reads."""

    __slots__ = ("_buf", "_unwrap", "_checked", "_known")

    def __init__(self, unwrap: Unwrap = as_frame) -> None:
        self._buf = bytearray()
        self._unwrap = unwrap
        self._checked = False  # the prelude of the message at the head of _buf was checked
        self._known: dict[bytes, dict[str, HeaderValue]] = {}  # header block -> parsed (read only)

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        buf = self._buf
        buf += chunk
        frames: list[SSEFrame] = []
        pos = 0
        size = len(buf)
        try:
            while size - pos >= PRELUDE:
                total, hlen, crc = _U32x3.unpack_from(buf, pos)
                if not self._checked:
                    if zlib.crc32(buf[pos : pos + 8]) != crc:
                        raise _bad("bad prelude CRC")
                    if (
                        total < MIN_MESSAGE
                        or hlen > MAX_HEADERS
                        or hlen > total - MIN_MESSAGE
                        or total - hlen - MIN_MESSAGE > MAX_PAYLOAD
                    ):
                        raise _bad(f"impossible lengths (total {total}, headers {hlen})")
                    self._checked = True
                if size - pos < total:
                    break
                view = memoryview(buf)
                try:
                    end = pos + total - 4
                    (message_crc,) = _U32.unpack_from(buf, end)
                    if zlib.crc32(view[pos:end]) != message_crc:
                        raise _bad("bad message CRC")
                    block = bytes(view[pos + PRELUDE : pos + PRELUDE + hlen])
                    headers = self._known.get(block)  # a stream repeats a few header blocks
                    if headers is None:
                        try:
                            headers = parse_headers(block)
                        except (ValueError, UnicodeDecodeError) as exc:
                            raise _bad(f"malformed headers ({exc})") from None
                        if len(self._known) < 32:
                            self._known[block] = headers
                    payload = bytes(view[pos + PRELUDE + hlen : end])
                finally:
                    view.release()
                pos += total
                self._checked = False
                mtype = headers.get(":message-type", "event")
                if mtype == "event":
                    event = headers.get(":event-type")
                    frames.append(self._unwrap(event if isinstance(event, str) else "", payload))
                elif mtype in ("exception", "error"):
                    raise FramerError(exception_error(headers, payload))
                # other message types (none defined for responses) are skipped
        except FramerError as exc:
            exc.frames = frames
            self._buf = bytearray()
            raise
        if pos:
            del buf[:pos]
        return frames

    def close(self) -> bool:
        """End of input: True when it ended between messages (else a message was cut off)."""
        clean = not self._buf
        self._buf = bytearray()
        self._checked = False
        return clean
