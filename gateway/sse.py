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
  ``close()`` reports it as truncation so the caller can surface an error.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(slots=True)
class SSEFrame:
    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    __slots__ = ("_utf8", "_buf", "_data", "_event", "_last_id", "_retry", "_pending", "_started", "_cr")

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""  # text of the current, unfinished line(s)
        self._data: list[str] = []
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
        return frames

    def close(self) -> bool:
        """End of input. Returns True when the stream ended cleanly between events.

        False means an event was cut off (fields without the closing blank line, or a partial line):
        that event is discarded, never dispatched.
        """
        tail = self._utf8.decode(b"", final=True)
        rest = self._buf + tail
        self._buf = ""
        if rest and not rest.startswith(":"):
            return False
        return not self._pending

    def _line(self, line: str, frames: list[SSEFrame]) -> None:
        if not line:
            if self._data:
                frames.append(SSEFrame("\n".join(self._data), self._event, self._last_id, self._retry))
            self._data = []
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
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():  # ASCII digits only: "²".isdigit() is True
                self._retry = int(value)


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
