"""One upstream HTTP/1.1 connection as an asyncio protocol with the ``httptools`` parser, and the
byte stream an ``httpx.Response`` reads it through (the pool is ``http_pool.py``, the
``httpx`` transport that puts them behind ``httpx.AsyncClient`` is ``http_transport.py``).

Why a connection of our own under httpx: measured in ``bench/`` (bench/README.md "Where the time goes"),
httpx's default transport (httpcore → h11) hands the body out one HTTP chunk at a time, so a stream
whose 50 events arrive in one socket read still cost 50 decoder passes, 50 caller writes and 50
trips through three layers of Python, and its pool walks every connection on each request. Here the
body is handed out per *socket read* (all the chunks that arrived together, joined once): one read
= one item of the response's ``aiter_raw()`` = one decoder batch = one caller write. The request is
one pre-assembled ``transport.write``. ``httptools`` (the C llhttp parser, already installed by
``uvicorn[standard]``) does the framing: chunked, content-length and read-until-close bodies,
header folding, protocol errors.

What it deliberately does not do: HTTP/2, redirects, ``Expect: 100-continue``, SOCKS or proxy
settings from the environment: ``transport = "httpx"`` (httpx's own transport) does those. Content
decoding (gzip, deflate, br) is httpx's, on ``aiter_bytes``.

Errors are httpx's own classes (re-exported here so the rest of the gateway names one module).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol, cast

import httptools
import httpx
from httpx import (
    ConnectError,
    ConnectTimeout,
    HTTPError,
    LocalProtocolError,
    PoolTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    Response,
    TimeoutException,
)

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "Connection",
    "ConnectionOwner",
    "ConnectionStream",
    "HTTPError",
    "LocalProtocolError",
    "LossListener",
    "Origin",
    "PoolTimeout",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "Response",
    "TimeoutException",
    "read_at_most",
    "request_head",
]

# A stream's body is buffered up to this before the socket stops being read (backpressure from a
# slow caller reaches the upstream's TCP window instead of our memory).
_HIGH_WATER = 256 * 1024


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str  # ASCII (IDNA-encoded); an IPv6 address without brackets
    port: int
    authority: bytes  # host:port as it goes on a CONNECT line


class LossListener(Protocol):
    """Where a connection reports that its socket closed: its pool, or nobody once it gave up
    the slot (``http_pool``, which this module does not import: the pool is built on it)."""

    def lost(self, conn: Connection) -> None: ...


class ConnectionOwner(LossListener, Protocol):
    """What a response's body hands its connection back to when it is done: the pool, given by
    the transport that made the response (``http_transport.GatewayTransport``)."""

    def release(self, conn: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; carries one request/response at a time."""

    __slots__ = (
        "origin",
        "pool",
        "transport",
        "parser",
        "closed",
        "lost",
        "idle_since",
        "served",
        "read_timeout",
        "_status",
        "_headers",
        "_head_waiter",
        "_body",
        "_body_size",
        "_body_waiter",
        "_complete",
        "_error",
        "_paused",
        "_got_bytes",
        "_until_close",
        "_keep_alive",
        "_loop",
        "_framed",
    )

    def __init__(self, origin: Origin, pool: LossListener) -> None:
        self.origin = origin
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost = False
        self.idle_since = 0.0
        self.served = 0
        self.read_timeout: float | None = None
        self._loop = asyncio.get_running_loop()
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_waiter: asyncio.Future[None] | None = None
        self._body: list[bytes] = []
        self._body_size = 0
        self._body_waiter: asyncio.Future[None] | None = None
        self._complete = False
        self._error: HTTPError | None = None
        self._paused = False
        self._got_bytes = False
        self._until_close = False
        self._framed = False  # content-length or chunked seen
        self._keep_alive = False

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's transport

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(RemoteProtocolError(f"upstream sent invalid HTTP: {exc}"))
            self.close()
            return
        if (self._body or self._complete) and self._body_waiter is not None and not self._body_waiter.done():
            self._body_waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = self.closed = True
        self.pool.lost(self)
        if self._until_close and self._status and not self._complete:
            self._on_done()  # a body without length or chunking ends with the connection
        elif not self._complete:
            self._fail(ReadError("upstream closed the connection" + (f" ({type(exc).__name__})" if exc else "")))

    # -- httptools callbacks ----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length" or (lowered == b"transfer-encoding" and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()
        if 100 <= self._status < 200:  # an interim response (we never ask for one): ignore it
            self._status = 0
            self._headers = []
            self._framed = False
            return
        self._keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the message is complete
        self._until_close = not self._framed
        if self._head_waiter is not None and not self._head_waiter.done():
            self._head_waiter.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._body_size += len(body)
        if self._body_size > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._status:
            self._on_done()

    def _on_done(self) -> None:
        self._complete = True
        for waiter in (self._head_waiter, self._body_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _fail(self, error: HTTPError) -> None:
        if self._error is None:
            self._error = error
        for waiter in (self._head_waiter, self._body_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    # -- used by the pool and the stream ----------------------------------------------------

    async def request(self, head: bytes, body: bytes | None) -> tuple[int, list[tuple[bytes, bytes]]]:
        """Write one request and wait for the response head."""
        assert self.transport is not None
        self._reset()
        if self.closed or self.transport.is_closing():  # the server hung up while it sat idle
            raise ReadError("upstream closed the kept-alive connection")
        self.transport.write(head + body if body else head)
        if not self._status and self._error is None:
            self._head_waiter = self._loop.create_future()
            await self._wait(self._head_waiter)
        if self._error is not None and not self._status:
            raise self._error
        return self._status, self._headers

    async def _wait(self, waiter: asyncio.Future[None]) -> None:
        if self.read_timeout is None:
            await waiter
            return
        try:
            async with asyncio.timeout(self.read_timeout):
                await waiter
        except TimeoutError:
            self.close()
            raise ReadTimeout(f"upstream sent nothing for {self.read_timeout:g}s") from None

    async def read_body(self) -> bytes:
        """Every body byte that has arrived since the last call (waiting for at least one);
        ``b""`` once the body is complete. Raises ``ReadError`` if the connection is lost first."""
        while True:
            if self._body:
                body = self._body
                data = body[0] if len(body) == 1 else b"".join(body)
                self._body = []
                self._body_size = 0
                if self._paused and self.transport is not None and not self.closed:
                    self._paused = False
                    self.transport.resume_reading()
                return data
            if self._complete:
                return b""
            if self._error is not None:
                raise self._error
            self._body_waiter = self._loop.create_future()
            try:
                await self._wait(self._body_waiter)
            finally:
                self._body_waiter = None

    @property
    def got_response_bytes(self) -> bool:
        return self._got_bytes

    def reusable(self) -> bool:
        return (
            self._complete
            and not self.closed
            and self._error is None
            and not self._body
            and not self._until_close
            and self._keep_alive
        )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()


class ConnectionStream(httpx.AsyncByteStream):
    """A response body as httpx reads it: one item per socket read; ``aclose`` gives the
    connection back to its owner, the pool (which closes it when the body was not read to the end)."""

    __slots__ = ("_conn", "_pool", "_closed")

    def __init__(self, conn: Connection, pool: ConnectionOwner) -> None:
        self._conn = conn
        self._pool = pool
        self._closed = False

    def __aiter__(self) -> ConnectionStream:
        return self

    async def __anext__(self) -> bytes:
        data = await self._conn.read_body()
        if not data:
            raise StopAsyncIteration
        return data

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.release(self._conn)


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request line and header block, refusing what would split it (a CR, LF or NUL in a
    header, a colon in a name): httpx does not check, and a value from a caller must never become
    a header of its own."""
    lines = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if b":" in name:
            raise LocalProtocolError(f"header name {name!r} cannot be sent")
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    head = b"".join(lines)
    # Two C-level counts over the whole head instead of three tests per header.
    if head.count(b"\n") != len(headers) + 2 or head.count(b"\r") != len(headers) + 2 or b"\0" in head:
        raise LocalProtocolError("a header has a character that cannot be sent (CR, LF or NUL)")
    return head


async def read_at_most(response: httpx.Response, limit: int) -> bytes:
    """The (decoded) body, or about its first ``limit`` bytes: an error body or a whole reply must
    not take the gateway's memory. What is left unread is not reused (the connection closes)."""
    parts = []
    size = 0
    reads = cast(AsyncGenerator[bytes, None], response.aiter_bytes())  # httpx's is an async generator
    try:
        async for chunk in reads:
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    finally:
        await reads.aclose()
    return b"".join(parts)
