"""The connection pool behind each provider: keep-alive, limits, TLS and an optional HTTP proxy.

One pool per provider, inside its ``GatewayTransport`` (``http_transport.py``). All bookkeeping is O(1) per request and per close: a
dict of idle connections per origin, a count of open ones, a queue of requests waiting for a
slot. httpcore's pool walks every connection on each of those, which is what made 1,000+ streams
slow (bench/README.md).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from urllib.parse import urlsplit

from gateway.http.client import (
    ConnectError,
    Connection,
    ConnectTimeout,
    Origin,
    PoolTimeout,
    ReadError,
    request_head,
)

Headers = list[tuple[bytes, bytes]]


class ConnectionPool:
    """Keep-alive connections per origin, at most ``max_connections`` open at once.

    Idle connections are reused newest first (the oldest are the likeliest to have been closed by
    the server); one idle longer than ``keepalive_expiry`` is closed instead. A request that finds
    every slot busy waits up to the request's pool timeout for one (``PoolTimeout``). All bookkeeping is
    O(1) per request: no walk over the open connections.
    """

    def __init__(
        self,
        max_connections: int = 1000,
        keepalive_expiry: float = 15.0,
        ca_file: str | None = None,
        proxy: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[Origin, dict[Connection, None]] = {}
        self._open = 0
        self._waiters: collections.deque[asyncio.Future[Connection | None]] = collections.deque()
        self._ssl: ssl.SSLContext | None = ssl_context
        self._ca_file = ca_file
        self._proxy: Origin | None
        self._proxy_auth: str | None
        self._proxy, self._proxy_auth = _parse_proxy(proxy) if proxy else (None, None)
        self.connections_opened = 0

    @property
    def open_connections(self) -> int:
        return self._open

    async def send(
        self,
        origin: Origin,
        method: bytes,
        target: bytes,
        headers: Headers,
        body: bytes | None,
        connect_timeout: float | None,
        pool_timeout: float | None,
        read_timeout: float | None = None,
    ) -> tuple[Connection, int, Headers]:
        """Send one request; return its connection with the response head read and the body still
        to come (read it with ``conn.read_body()``, then hand the connection to ``release``).
        A timeout of ``None`` waits as long as it takes (httpx's meaning)."""
        if self._proxy is not None and origin.scheme == "http":  # absolute form, to the proxy
            target = b"http://" + origin.authority + target
            if self._proxy_auth:
                headers = [*headers, (b"proxy-authorization", self._proxy_auth.encode("latin-1"))]
        head = request_head(method, target, headers)
        for attempt in range(2):
            conn = await self._acquire(origin, attempt > 0, connect_timeout, pool_timeout)
            conn.read_timeout = read_timeout
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
            return conn, status, response_headers
        raise AssertionError("unreachable")

    async def _acquire(
        self, origin: Origin, fresh: bool, connect_timeout: float | None, pool_timeout: float | None
    ) -> Connection:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle and not fresh:
            conn, _ = idle.popitem()
            if not conn.closed and now - conn.idle_since < self.keepalive_expiry:
                return conn
            self._discard(conn)
        if self._open >= self.max_connections and not self._evict_idle():
            granted = await self._wait_for_slot(pool_timeout)
            if granted is not None:
                if granted.origin == origin and not granted.closed and not fresh:
                    return granted
                granted.close()  # keep its slot, connect anew with it
                granted.pool = _DETACHED
        else:
            self._open += 1
        try:
            return await self._connect(origin, connect_timeout)
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

    async def _wait_for_slot(self, timeout: float | None) -> Connection | None:
        """Wait until a connection is released to us (returned) or a slot frees up (None: we hold it)."""
        waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
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
                raise PoolTimeout(f"no free upstream connection within {timeout:g}s") from None
            raise

    async def _connect(self, origin: Origin, timeout: float | None) -> Connection:
        loop = asyncio.get_running_loop()
        ssl_context = self._ssl_context() if origin.scheme == "https" else None
        proxy = self._proxy
        where = f"{origin.host}:{origin.port}" + (f" through the proxy {proxy.host}:{proxy.port}" if proxy else "")
        try:
            async with asyncio.timeout(timeout):
                if proxy is None:
                    _, conn = await loop.create_connection(
                        lambda: Connection(origin, self),
                        origin.host,
                        origin.port,
                        ssl=ssl_context,
                        server_hostname=origin.host if ssl_context else None,
                    )
                else:
                    _, conn = await loop.create_connection(lambda: Connection(origin, self), proxy.host, proxy.port)
                    if ssl_context is not None:
                        await self._tunnel(loop, conn, origin, ssl_context)
        except TimeoutError:
            raise ConnectTimeout(f"connecting to {where} took over {timeout:g}s") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {where}: {exc.strerror or exc}") from None
        self.connections_opened += 1
        return conn

    async def _tunnel(
        self, loop: asyncio.AbstractEventLoop, conn: Connection, origin: Origin, ssl_context: ssl.SSLContext
    ) -> None:
        """``CONNECT`` through the proxy, then TLS with the upstream inside the tunnel."""
        authority = origin.authority
        head = b"CONNECT " + authority + b" HTTP/1.1\r\nhost: " + authority + b"\r\n"
        if self._proxy_auth:
            head += b"proxy-authorization: " + self._proxy_auth.encode("latin-1") + b"\r\n"
        try:
            status, _ = await conn.request(head + b"\r\n", None)
            if not 200 <= status < 300:
                raise ConnectError(f"the proxy refused to tunnel to {origin.host}:{origin.port} (HTTP {status})")
            assert conn.transport is not None
            conn.transport = await loop.start_tls(conn.transport, conn, ssl_context, server_hostname=origin.host)
        except BaseException:
            conn.close()
            raise

    def release(self, conn: Connection) -> None:
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

    def _discard(self, conn: Connection) -> None:
        conn.pool = _DETACHED  # its slot is given back here, not again by connection_lost
        conn.close()
        self._open -= 1
        self._wake_one()

    def lost(self, conn: Connection) -> None:
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
            self._ssl = trust_context(self._ca_file)
        return self._ssl


def trust_context(ca_file: str | None = None) -> ssl.SSLContext:
    """Certificates and host names verified against ``ca_file``, else the system store (where
    operators add their CAs), else certifi's bundle on a minimal image that has none. Both
    transports use it, so ``transport = "httpx"`` trusts exactly what the default one trusts."""
    if ca_file:
        context = ssl.create_default_context(cafile=ca_file)
    else:
        context = ssl.create_default_context()
        if not context.cert_store_stats().get("x509_ca"):
            try:
                import certifi

                context.load_verify_locations(cafile=certifi.where())
            except ImportError:
                pass
    context.set_alpn_protocols(["http/1.1"])
    return context


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
    port = parts.port or 80
    return Origin("http", parts.hostname, port, f"{parts.hostname}:{port}".encode("idna")), auth


class _DetachedPool:
    """Where a connection that no longer holds a pool slot reports its close: nowhere."""

    def lost(self, conn: Connection) -> None:
        return None


_DETACHED = _DetachedPool()
