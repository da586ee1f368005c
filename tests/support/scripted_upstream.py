"""A scripted HTTP/1.1 upstream on 127.0.0.1 that runs in the test's own event loop.

Unlike ``fake_upstream`` (uvicorn in a thread, replaying captures), each reply here is a script
of body writes, pauses, waits and resets, written exactly as told (chunked unless a length is
given, a short sleep after each write so the client sees a separate socket read). Being in the
test's loop, a test can hold a reply (``Wait``) until it has checked what the client did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Reset:
    """Abort the TCP connection (an RST, no clean end of the body)."""


@dataclass
class Pause:
    seconds: float


@dataclass
class Wait:
    """Hold the reply until the test sets ``event``."""

    event: asyncio.Event


@dataclass
class Flood:
    """``total`` bytes of JSON-ish filler in 1 MiB writes, for as long as the client reads."""

    total: int


Part = bytes | Reset | Pause | Wait | Flood


@dataclass
class Reply:
    parts: list[Part]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    length: int | None = None  # a content-length body (else chunked)


@dataclass
class Request:
    method: str
    target: str


class Upstream:
    """A loopback HTTP/1.1 server in the test's loop: ``answer(request)`` scripts each reply.

    Keep-alive as a real upstream: several requests per connection; ``connections`` counts the
    TCP connections accepted, ``sent`` the body bytes a ``Flood`` got into the socket."""

    def __init__(self, answer: Callable[[Request], Reply | None]) -> None:
        self.answer = answer
        self.requests: list[Request] = []
        self.connections = 0
        self.sent = 0
        self.url = ""
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Upstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        for task in self._tasks:
            task.cancel()  # a reply still pausing or waiting
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.append(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                method, target = head.decode("latin-1").split(" ")[:2]
                request = Request(method, target)
                self.requests.append(request)
                reply = self.answer(request)
                if reply is None or not await self._write(writer, reply):  # None: dropped unanswered
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return  # (cancelled: the test is over; ending quietly keeps asyncio from logging it)
        finally:
            writer.transport.abort()

    async def _write(self, writer: asyncio.StreamWriter, reply: Reply) -> bool:
        chunked = reply.length is None
        head = f"HTTP/1.1 {reply.status} X\r\ncontent-type: {reply.content_type}\r\n"
        head += "transfer-encoding: chunked\r\n" if chunked else f"content-length: {reply.length}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        writer.write(head.encode() + b"\r\n")
        for part in reply.parts:
            if isinstance(part, Reset):
                writer.transport.abort()
                return False
            if isinstance(part, Pause):
                await asyncio.sleep(part.seconds)
            elif isinstance(part, Wait):
                await part.event.wait()
            elif isinstance(part, Flood):
                piece = b" " * (1 << 20)
                while self.sent < part.total:
                    writer.write(piece)
                    await writer.drain()  # raises once the client has gone
                    self.sent += len(piece)
            else:
                writer.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                await writer.drain()
                await asyncio.sleep(0.002)  # a separate socket read on the other side
        if chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


NOT_FOUND = Reply(
    [b'{"error":{"code":"not_found","message":"no such interaction"}}'], status=404, content_type="application/json"
)


def replying(*parts: Part, **reply: object) -> Callable[[Request], Reply]:
    """Every POST answered with ``parts``; a GET (a resume) finds nothing."""
    return lambda request: NOT_FOUND if request.method == "GET" else Reply(list(parts), **reply)  # type: ignore[arg-type]
