"""The upstream HTTP/1.1 client: asyncio protocol + ``httptools`` parser, one pool per provider.

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
import collections
import ssl
import time
import zlib
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import httptools

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

    def __init__(self, status_code: int, headers: dict[str, str], conn: _Connection, pool: ConnectionPool) -> None:
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
            if not data:
                return self._inflate.flush()
            data = self._inflate.decompress(data)
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


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; carries one request/response at a time."""

    __slots__ = (
        "origin", "pool", "transport", "parser", "closed", "lost", "idle_since", "served",
        "_status", "_headers", "_head_waiter", "_body", "_body_size", "_body_waiter",
        "_complete", "_error", "_paused", "_got_bytes", "_until_close", "_keep_alive", "_loop",
    )

    def __init__(self, origin: Origin, pool: ConnectionPool) -> None:
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


class ConnectionPool:
    """Keep-alive connections per origin, at most ``max_connections`` open at once.

    Idle connections are reused newest first (the oldest are the likeliest to have been closed by
    the server); one idle longer than ``keepalive_expiry`` is closed instead. A request that finds
    every slot busy waits up to ``pool_timeout`` for one (``PoolTimeout``). All bookkeeping is
    O(1) per request: no walk over the open connections.
    """

    def __init__(
        self,
        max_connections: int = 1000,
        keepalive_expiry: float = 15.0,
        connect_timeout: float = 10.0,
        pool_timeout: float = 10.0,
        ca_file: str | None = None,
        proxy: str | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.connect_timeout = connect_timeout
        self.pool_timeout = pool_timeout
        self._idle: dict[Origin, dict[_Connection, None]] = {}
        self._open = 0
        self._waiters: collections.deque[asyncio.Future[_Connection | None]] = collections.deque()
        self._ssl: ssl.SSLContext | None = None
        self._ca_file = ca_file
        self._proxy, self._proxy_auth = _parse_proxy(proxy) if proxy else (None, None)
        self.connections_opened = 0

    @property
    def open_connections(self) -> int:
        return self._open

    async def send(self, method: str, url: str, headers: dict[str, str], body: bytes | None, params: dict[str, str] | None = None) -> Response:
        """Send a request; return its response with the head read and the body still to come."""
        origin, target = split_url(url, params)
        if self._proxy is not None and origin.scheme == "http":  # absolute form, to the proxy
            target = b"http://" + origin.host_header + target
            if self._proxy_auth:
                headers = {**headers, "proxy-authorization": self._proxy_auth}
        head = _request_head(method, target, origin, headers, body)
        for attempt in range(2):
            conn = await self._acquire(origin, fresh=attempt > 0)
            reused = conn.served > 0
            try:
                status, response_headers = await conn.request(head, body)
            except ReadError:
                self.release(conn)
                # A kept-alive connection the server closed just as we reused it: the request
                # never reached it (no response byte came back), so sending it again is safe.
                if reused and not conn.got_response_bytes and attempt == 0:
                    continue
                raise
            except BaseException:
                conn.close()
                self.release(conn)
                raise
            conn.served += 1
            try:
                return Response(status, response_headers, conn, self)
            except BaseException:
                conn.close()
                self.release(conn)
                raise
        raise AssertionError("unreachable")

    async def _acquire(self, origin: Origin, fresh: bool = False) -> _Connection:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle and not fresh:
            conn, _ = idle.popitem()
            if not conn.closed and now - conn.idle_since < self.keepalive_expiry:
                return conn
            self._discard(conn)
        if self._open >= self.max_connections and not self._evict_idle():
            granted = await self._wait_for_slot()
            if granted is not None:
                if granted.origin == origin and not granted.closed and not fresh:
                    return granted
                granted.close()  # keep its slot, connect anew with it
                granted.pool = _DETACHED
        else:
            self._open += 1
        try:
            return await self._connect(origin)
        except BaseException:
            self._open -= 1
            self._wake_one()
            raise

    def _evict_idle(self) -> bool:
        """At the limit, close one idle connection (of any origin) to make room; True if one was."""
        for idle in self._idle.values():
            if idle:
                conn = next(iter(idle))  # the oldest
                del idle[conn]
                conn.pool = _DETACHED
                conn.close()
                return True
        return False

    async def _wait_for_slot(self) -> _Connection | None:
        """Wait until a connection is released to us (returned) or a slot frees up (None: we hold it)."""
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self.pool_timeout):
                return await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                granted = waiter.result()  # handed over just as we gave up: pass it on
                if granted is not None:
                    self.release(granted)
                else:
                    self._open -= 1
                    self._wake_one()
            else:
                waiter.cancel()
            if isinstance(exc, TimeoutError):
                raise PoolTimeout(f"no free upstream connection within {self.pool_timeout:g}s") from None
            raise

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        ssl_context = self._ssl_context() if origin.scheme == "https" else None
        proxy = self._proxy
        where = f"{origin.host}:{origin.port}" + (f" through the proxy {proxy.host}:{proxy.port}" if proxy else "")
        try:
            async with asyncio.timeout(self.connect_timeout):
                if proxy is None:
                    _, conn = await loop.create_connection(
                        lambda: _Connection(origin, self), origin.host, origin.port, ssl=ssl_context, server_hostname=origin.host if ssl_context else None
                    )
                else:
                    _, conn = await loop.create_connection(lambda: _Connection(origin, self), proxy.host, proxy.port)
                    if ssl_context is not None:
                        await self._tunnel(loop, conn, origin, ssl_context)
        except TimeoutError:
            raise ConnectTimeout(f"connecting to {where} took over {self.connect_timeout:g}s") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {where}: {exc.strerror or exc}") from None
        self.connections_opened += 1
        return conn

    async def _tunnel(self, loop: asyncio.AbstractEventLoop, conn: _Connection, origin: Origin, ssl_context: ssl.SSLContext) -> None:
        """``CONNECT`` through the proxy, then TLS with the upstream inside the tunnel."""
        authority = f"{origin.host}:{origin.port}".encode("idna")
        head = b"CONNECT " + authority + b" HTTP/1.1\r\nhost: " + authority + b"\r\n"
        if self._proxy_auth:
            head += b"proxy-authorization: " + self._proxy_auth.encode("latin-1") + b"\r\n"
        try:
            status, _ = await conn.request(head + b"\r\n", None)
            if not 200 <= status < 300:
                raise ConnectError(f"the proxy refused to tunnel to {origin.host}:{origin.port} (HTTP {status})")
            assert conn.transport is not None
            conn.transport = await loop.start_tls(conn.transport, conn, ssl_context, server_hostname=origin.host)  # type: ignore[assignment]
        except BaseException:
            conn.close()
            raise

    def release(self, conn: _Connection) -> None:
        """A response is done with ``conn``: keep it for the next request or close it."""
        if not conn.reusable():
            self._discard(conn)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        now = time.monotonic()
        conn.idle_since = now
        idle = self._idle.setdefault(conn.origin, {})
        idle[conn] = None
        # Close the expired ones from the old end: O(1) per release, and the pool does not keep
        # sockets from a past burst open until the server happens to close them.
        while len(idle) > 1:
            oldest = next(iter(idle))
            if now - oldest.idle_since < self.keepalive_expiry:
                break
            del idle[oldest]
            self._discard(oldest)

    def _discard(self, conn: _Connection) -> None:
        conn.pool = _DETACHED  # its slot is given back here, not again by connection_lost
        conn.close()
        self._open -= 1
        self._wake_one()

    def lost(self, conn: _Connection) -> None:
        """``conn``'s socket closed. An idle one leaves the pool now (a busy one when released)."""
        idle = self._idle.get(conn.origin)
        if idle is not None and conn in idle:
            del idle[conn]
            conn.pool = _DETACHED
            self._open -= 1
            self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._open += 1  # the slot is the waiter's now
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.pool = _DETACHED
                conn.close()
                self._open -= 1
        self._idle.clear()


    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            if self._ca_file:
                self._ssl = ssl.create_default_context(cafile=self._ca_file)
            else:
                self._ssl = ssl.create_default_context()  # the system store: where operators add their CAs
                if not self._ssl.cert_store_stats().get("x509_ca"):
                    try:  # a minimal image without a CA bundle: Mozilla's, when certifi is installed
                        import certifi

                        self._ssl.load_verify_locations(cafile=certifi.where())
                    except ImportError:
                        pass
            self._ssl.set_alpn_protocols(["http/1.1"])
        return self._ssl


def _parse_proxy(url: str) -> tuple[Origin, str | None]:
    """``http://[user:password@]host:port`` → (the proxy's origin, its Proxy-Authorization value)."""
    import base64
    from urllib.parse import unquote

    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"proxy must be an http:// URL, got {url!r}")
    auth = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth = "Basic " + base64.b64encode(pair).decode()
    return Origin("http", parts.hostname, parts.port or 80), auth


def _request_head(method: str, target: bytes, origin: Origin, headers: dict[str, str], body: bytes | None) -> bytes:
    lines = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\nhost: ", origin.host_header, b"\r\n"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\0" in value or "\r" in name or "\n" in name or ":" in name:
            raise LocalProtocolError(f"header {name!r} has a character that cannot be sent")
        lines += (name.encode("latin-1"), b": ", value.encode("latin-1", "replace"), b"\r\n")
    if body is not None:
        lines += (b"content-length: ", str(len(body)).encode(), b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


class _DetachedPool:
    """Where a connection that no longer holds a pool slot reports its close: nowhere."""

    def lost(self, conn: _Connection) -> None:
        return None


_DETACHED = _DetachedPool()
