"""One socket write for a response's head and its first body bytes.

uvicorn writes the status line and headers on ``http.response.start`` and the body on each
``http.response.body``: a whole JSON answer is two ``send`` syscalls on the caller's socket (and,
on loopback or a LAN, two wake-ups of the reader), a stream's head and first event likewise. The
head is useless to a caller without the body that follows it in the same turn of the event loop,
so ``HeadHolding`` keeps it back until the next write (joined: one syscall) or, when nothing
follows in that turn (a stream whose first event is not there yet), until the loop's next turn.

Only the response head is held: the first write that is not a ``100 Continue`` interim answer.
Every later write, ``close`` and the rest of the transport's API go straight through (after the
held head, so the order on the wire never changes).
"""

from __future__ import annotations

import asyncio
from typing import Any

_CONTINUE = b"HTTP/1.1 100 "


class HeadHolding:
    """A transport for one uvicorn ``RequestResponseCycle`` (see the module docstring)."""

    __slots__ = ("_transport", "_loop", "_held", "_done")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._done = False  # the head went out: every write passes straight through

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._done:
            self._transport.write(data)
        elif self._held is not None:
            head, self._held, self._done = self._held, None, True
            self._transport.write(head + bytes(data))
        elif bytes(data[: len(_CONTINUE)]) == _CONTINUE:
            self._transport.write(data)
        else:
            self._held = bytes(data)
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        if self._held is not None:
            head, self._held, self._done = self._held, None, True
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, …: the socket's own
        return getattr(self._transport, name)
