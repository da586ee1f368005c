"""Server-sent events framing per the WHATWG HTML standard, knowing nothing about JSON.

``SSEDecoder`` is incremental: feed it bytes exactly as they come off the socket (split anywhere,
even inside a multi-byte UTF-8 character or between CR and LF) and it returns the frames completed
so far. Rules kept (https://html.spec.whatwg.org/multipage/server-sent-events.html):

* line ends are LF, CR or CRLF; a leading UTF-8 BOM is dropped;
* ``field: value`` (one optional space after the colon); a line without a colon is a field with an
  empty value; lines starting with ``:`` are comments;
* several ``data`` lines are joined with ``\\n``; ``event``, ``id`` (ignored if it holds NUL) and
  ``retry`` (digits only) are kept; other fields are ignored;
* a frame is dispatched only on a blank line, and only if it had data (a frame with only an
  ``event`` line is dropped, as browsers do);
* at EOF an event that was started but not ended by a blank line is *not* dispatched:
  ``close()`` reports it as truncation so the caller can surface an error;
* an event or a line longer than ``MAX_EVENT`` raises ``FramerError`` (a 502): an upstream that
  never ends a line is not buffered without bound. A line that arrives over many reads is kept as
  its pieces and joined once, when its end comes (joining on every read is quadratic).
"""

from __future__ import annotations

import codecs

from gateway.events import StreamError
from gateway.framing.base import FramerError
from gateway.framing.base import SSEFrame as SSEFrame  # the frame type every framer yields

# The longest event (or unfinished line) kept while it arrives; more is a broken or hostile upstream,
# refused (a 502) instead of buffered without bound. As large as a whole JSON reply may be (source.py).
MAX_EVENT = 64 << 20


class SSEDecoder:
    __slots__ = (
        "_utf8",
        "_buf",
        "_more",
        "_more_len",
        "_data",
        "_data_len",
        "_event",
        "_last_id",
        "_retry",
        "_pending",
        "_started",
        "_cr",
    )

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""  # text of the current, unfinished line(s)
        self._more: list[str] = []  # later pieces of that line, from reads that brought no line end
        self._more_len = 0
        self._data: list[str] = []
        self._data_len = 0  # characters in _data: the event so far
        self._event: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._pending = False  # a field line was seen since the last dispatch
        self._started = False  # BOM check done
        self._cr = False  # the previous chunk ended with CR: a leading LF now is its pair

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        text = self._utf8.decode(chunk)
        if not text:
            return []
        if not self._started:
            if self._buf == "" and text.startswith("\ufeff"):
                text = text[1:]
            self._started = True
        if self._cr:
            self._cr = False
            if text.startswith("\n"):
                text = text[1:]
        if "\n" not in text and "\r" not in text:  # the unfinished line goes on: keep the piece
            self._more.append(text)
            self._more_len += len(text)
            if len(self._buf) + self._more_len + self._data_len > MAX_EVENT:
                raise _too_long()
            return []
        if self._more:
            buf = self._buf + "".join(self._more) + text
            self._more, self._more_len = [], 0
        else:
            buf = self._buf + text if self._buf else text
        frames: list[SSEFrame] = []
        if "\r" in buf:
            if buf.endswith("\r"):
                self._cr = True  # the LF of a CRLF may be in the next chunk
            buf = buf.replace("\r\n", "\n").replace("\r", "\n")
        lines = buf.split("\n")
        self._buf = lines.pop()  # the unfinished tail ("" when buf ended with a line end)
        for line in lines:
            self._line(line, frames)
        if len(self._buf) + self._data_len > MAX_EVENT:
            raise _too_long(frames)
        return frames

    def close(self) -> bool:
        """End of input. Returns True when the stream ended cleanly between events.

        False means an event was cut off (fields without the closing blank line, or a partial line):
        that event is discarded, never dispatched.
        """
        tail = self._utf8.decode(b"", final=True)
        rest = self._buf + "".join(self._more) + tail
        self._buf, self._more, self._more_len = "", [], 0
        if rest and not rest.startswith(":"):
            return False
        return not self._pending

    def _line(self, line: str, frames: list[SSEFrame]) -> None:
        if not line:
            if self._data:
                frames.append(SSEFrame("\n".join(self._data), self._event, self._last_id, self._retry))
            self._data = []
            self._data_len = 0
            self._event = None
            self._retry = None
            self._pending = False
            return
        if line[0] == ":":
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._pending = True
        if name == "data":
            self._data.append(value)
            self._data_len += len(value) + 1
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():  # ASCII digits only: "²".isdigit() is True
                self._retry = int(value)


def _too_long(frames: list[SSEFrame] | None = None) -> FramerError:
    error = StreamError("bad_gateway", f"upstream sent an SSE event longer than {MAX_EVENT >> 20} MiB", 502)
    return FramerError(error, frames)


def encode_frame(data: str | bytes, event: str | None = None, id: str | None = None) -> bytes:
    """One SSE frame. ``data`` must not contain line ends unless they are meant as separate lines."""
    if isinstance(data, str):
        data = data.encode()
    out = b""
    if event is not None:
        out += b"event: " + event.encode() + b"\n"
    if id is not None:
        out += b"id: " + id.encode() + b"\n"
    if b"\n" in data:
        return out + b"".join(b"data: " + line + b"\n" for line in data.split(b"\n")) + b"\n"
    return out + b"data: " + data + b"\n\n"


COMMENT_KEEPALIVE = b": keepalive\n\n"
