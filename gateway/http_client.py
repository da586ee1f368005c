"""The upstream HTTP/1.1 client: one connection as an asyncio protocol with the ``httptools``
parser, and the streamed ``Response`` (the pool that owns connections is ``http_pool.py``).

Why not httpx: measured in ``bench/`` (README "Where the time goes"), httpx → httpcore → h11 hands
the body out one HTTP chunk at a time, so a stream whose 50 events arrive in one socket read still
cost 50 decoder passes, 50 caller writes and 50 trips through three layers of Python; and its
per-request path (request model, pool bookkeeping) was ~47 % of a short stream's CPU. Here the
body is handed out per *socket read* (all the chunks that arrived together, joined once), the
request is one pre-assembled ``transport.write``, and the pool is a dict of idle connections.
``httptools`` (the C llhttp parser, already installed by ``uvicorn[standard]``) does the framing:
chunked, content-length and read-until-close bodies, header folding, protocol errors.

What it deliberately does not do: HTTP/2, redirects, cookies, ``Expect: 100-continue``, proxy
settings from the environment. Upstream model APIs need none of them; a provider that must go
through an HTTP proxy names it (``proxy``): https upstreams are tunnelled with ``CONNECT``, http
ones sent in absolute form. TLS verifies the certificate and host name against the
system trust store (``certifi``'s when the system has none), or a provider's ``ca_file``.

Errors are the small hierarchy below; ``TimeoutException`` and ``HTTPError`` keep httpx's
meaning (and names) so messages and handling stay what callers of the gateway already see.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import httptools

if TYPE_CHECKING:
    from gateway.http_pool import ConnectionPool

# A stream's body is buffered up to this before the socket stops being read (backpressure from a
# slow caller reaches the upstream's TCP window instead of our memory).
_HIGH_WATER = 256 * 1024


class HTTPError(Exception):
    """Any failure talking to the upstream (connect, protocol, connection lost)."""


class TimeoutException(HTTPError):
    pass


class ConnectTimeout(TimeoutException):
    pass


class PoolTimeout(TimeoutException):
    pass


class ConnectError(HTTPError):
    pass


class ReadError(HTTPError):
    """The connection closed or reset before the response was complete."""


class RemoteProtocolError(HTTPError):
    """The upstream sent something that is not HTTP/1.1."""


class LocalProtocolError(HTTPError):
    """We were asked to send something that cannot go on the wire (a CR/LF in a header value)."""


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> bytes:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        value = host if self.port == default else f"{host}:{self.port}"
        return value.encode("ascii") if value.isascii() else value.encode("idna")


def split_url(url: str, params: dict[str, str] | None = None) -> tuple[Origin, bytes]:
    """``https://h:p/base/path?q`` → (origin, request target bytes)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConnectError(f"unsupported upstream URL scheme or host: {parts.scheme!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = parts.path or "/"
    query = parts.query
    if params:
        query = (query + "&" if query else "") + urlencode(params)
    if query:
        target += "?" + query
    return Origin(parts.scheme, parts.hostname, port), target.encode("ascii", "strict") if target.isascii() else _quote_target(target)


def _quote_target(target: str) -> bytes:
    from urllib.parse import quote

    return quote(target, safe="/?&=%:@!$'()*+,;~-._").encode("ascii")


class Response:
    """A response whose body is read as it arrives. ``aclose`` must always be called."""

    __slots__ = ("status_code", "headers", "_conn", "_pool", "_closed", "_inflate")

    def __init__(self, status_code: int, headers: dict[str, str], conn: Connection, pool: ConnectionPool) -> None:
        self.status_code = status_code
        self.headers = headers  # lower-cased names; repeated headers joined with ", "
        self._conn = conn
        self._pool = pool
        self._closed = False
        encoding = headers.get("content-encoding", "identity").lower()
        # We send accept-encoding: identity; a server that compresses anyway is still understood.
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32) if encoding in ("gzip", "deflate", "x-gzip") else None
        if encoding not in ("identity", "", "gzip", "deflate", "x-gzip"):
            raise RemoteProtocolError(f"upstream used an unsupported content-encoding {encoding!r}")

    async def read_some(self) -> bytes:
        """Every body byte that has arrived since the last call (waiting for at least one);
        ``b""`` once the body is complete. Raises ``ReadError`` if the connection is lost first."""
        data = await self._conn.read_body()
        while self._inflate is not None:
            try:
                if not data:
                    return self._inflate.flush()
                data = self._inflate.decompress(data)
            except zlib.error as exc:
                raise RemoteProtocolError(f"upstream sent a body that does not inflate: {exc}") from None
            if data:
                return data
            data = await self._conn.read_body()  # a compressed piece too short to yield a byte yet
        return data

    async def aread(self, limit: int | None = None) -> bytes:
        """The rest of the body; with ``limit``, at most about that many bytes (the rest is left
        unread and the connection is then not reused)."""
        parts = []
        size = 0
        while chunk := await self.read_some():
            parts.append(chunk)
            size += len(chunk)
            if limit is not None and size >= limit:
                break
        return b"".join(parts)

    async def aclose(self) -> None:
        """Give the connection back to the pool if its response was read to the end, else close it."""
        if not self._closed:
            self._closed = True
            self._pool.release(self._conn)


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; carries one request/response at a time."""

    __slots__ = (
        "origin", "pool", "transport", "parser", "closed", "lost", "idle_since", "served",
        "_status", "_headers", "_head_waiter", "_body", "_body_size", "_body_waiter",
        "_complete", "_error", "_paused", "_got_bytes", "_until_close", "_keep_alive", "_loop",
    )

    def __init__(self, origin: Origin, pool: Any) -> None:  # pool: a ConnectionPool, or nobody once it gave up the slot
        self.origin = origin
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost = False
        self.idle_since = 0.0
        self.served = 0
        self._loop = asyncio.get_running_loop()
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self._status = 0
        self._headers: dict[str, str] = {}
        self._head_waiter: asyncio.Future[None] | None = None
        self._body: list[bytes] = []
        self._body_size = 0
        self._body_waiter: asyncio.Future[None] | None = None
        self._complete = False
        self._error: HTTPError | None = None
        self._paused = False
        self._got_bytes = False
        self._until_close = False
        self._keep_alive = False

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

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
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()
        if 100 <= self._status < 200:  # an interim response (we never ask for one): ignore it
            self._status = 0
            self._headers = {}
            return
        headers = self._headers
        self._keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the message is complete
        self._until_close = "content-length" not in headers and "chunked" not in headers.get("transfer-encoding", "").lower()
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

    # -- used by the pool and Response ------------------------------------------------------

    async def request(self, head: bytes, body: bytes | None) -> tuple[int, dict[str, str]]:
        """Write one request and wait for the response head."""
        assert self.transport is not None
        self._reset()
        if self.closed or self.transport.is_closing():  # the server hung up while it sat idle
            raise ReadError("upstream closed the kept-alive connection")
        self.transport.write(head + body if body else head)
        if not self._status and self._error is None:
            self._head_waiter = self._loop.create_future()
            await self._head_waiter
        if self._error is not None and not self._status:
            raise self._error
        return self._status, self._headers

    async def read_body(self) -> bytes:
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
                await self._body_waiter
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


def request_head(method: str, target: bytes, origin: Origin, headers: dict[str, str], body: bytes | None) -> bytes:
    lines = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\nhost: ", origin.host_header, b"\r\n"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\0" in value or "\r" in name or "\n" in name or ":" in name:
            raise LocalProtocolError(f"header {name!r} has a character that cannot be sent")
        lines += (name.encode("latin-1"), b": ", value.encode("latin-1", "replace"), b"\r\n")
    if body is not None:
        lines += (b"content-length: ", str(len(body)).encode(), b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)
