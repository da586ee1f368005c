"""The gateway's HTTP/1.1 connection and pool as an ``httpx`` transport, and the client class
both transports sit under.

``GatewayTransport`` is the default for every provider: ``httpx.AsyncClient`` builds the request,
runs auth and event hooks and owns the response object; the transport writes the request in one
``transport.write`` on a pooled llhttp connection (``http_client.py``, ``http_pool.py``) and hands
the body out per socket read. ``transport = "httpx"`` in a provider's config swaps in httpx's own
transport (httpcore: HTTP/2, SOCKS, proxies from the environment) under the same client.

``UpstreamClient`` is ``httpx.AsyncClient`` without a cookie jar: upstream model APIs set none
worth keeping, and httpx runs ``http.cookiejar`` over every response (a fifth of its added cost
per request, measured in bench/README.md).
"""

from __future__ import annotations

import http
import ssl
from typing import Any

import httpx

from gateway.http.client import ConnectionStream, Origin
from gateway.http.pool import ConnectionPool, trust_context

# Response extensions per status, built once: httpx's client reads reason_phrase on every response
# (for its log line, even when the line is not logged), else it looks the code up in an IntEnum.
_EXTENSIONS = {
    int(s): {"http_version": b"HTTP/1.1", "reason_phrase": s.phrase.encode("ascii")} for s in http.HTTPStatus
}
_HTTP11 = {"http_version": b"HTTP/1.1", "reason_phrase": b""}
_DEFAULT_TIMEOUT = httpx.Timeout(10.0, read=None, write=None).as_dict()
_DEFAULT_PORTS = {"http": 80, "https": 443}


class GatewayTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over the gateway's O(1) pool: keep-alive with a retry on a connection the server
    closed while it sat idle, backpressure (a slow reader stops the socket being read), and a
    response closed before its end closes its socket at once.

    ``verify``, ``limits`` and ``proxy`` (an ``http://`` proxy: ``CONNECT`` for https, absolute
    form for http) mean what they mean to ``httpx.AsyncHTTPTransport``; the request's
    ``connect``, ``pool`` and ``read`` timeouts are honoured (``write``: the request is one buffered
    write).
    """

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | str | bool = True,
        limits: httpx.Limits | None = None,
        proxy: str | None = None,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=1000, keepalive_expiry=15.0)
        if isinstance(verify, ssl.SSLContext):
            context = verify
        elif verify is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = trust_context(verify if isinstance(verify, str) else None)
        self.pool = ConnectionPool(
            max_connections=limits.max_connections or 1 << 30,
            keepalive_expiry=limits.keepalive_expiry if limits.keepalive_expiry is not None else 1e9,
            ssl_context=context,
            proxy=proxy,
        )
        self._origins: dict[tuple[str, bytes, int | None], Origin] = {}

    @property
    def open_connections(self) -> int:
        return self.pool.open_connections

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        key = (url.scheme, url.raw_host, url.port)
        origin = self._origins.get(key) or self._origin(key)
        timeout = request.extensions.get("timeout") or _DEFAULT_TIMEOUT
        sized = type(request.stream) is httpx.ByteStream  # else httpx framed it as chunked
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:
            body = await request.aread()
        if not body and request.method in ("GET", "HEAD", "DELETE", "OPTIONS"):
            body = None
        pool = self.pool
        headers = request.headers.raw
        if not sized:
            headers = _framed(headers, body)
        conn, status, headers = await pool.send(
            origin,
            request.method.encode("ascii"),
            url.raw_path,
            headers,
            body,
            timeout.get("connect"),
            timeout.get("pool"),
            timeout.get("read"),
        )
        return httpx.Response(
            status, headers=headers, stream=ConnectionStream(conn, pool), extensions=_EXTENSIONS.get(status, _HTTP11)
        )

    def _origin(self, key: tuple[str, bytes, int | None]) -> Origin:
        scheme, raw_host, port = key
        if scheme not in _DEFAULT_PORTS or not raw_host:
            raise httpx.UnsupportedProtocol(f"the gateway's transport speaks http:// and https://, not {scheme!r}")
        port = port or _DEFAULT_PORTS[scheme]
        host = raw_host.decode("ascii")
        bracketed = b"[" + raw_host + b"]" if b":" in raw_host else raw_host
        origin = self._origins[key] = Origin(scheme, host, port, bracketed + b":%d" % port)
        return origin

    async def aclose(self) -> None:
        await self.pool.aclose()


def _framed(headers: list[tuple[bytes, bytes]], body: bytes | None) -> list[tuple[bytes, bytes]]:
    """httpx frames a body it could not size as ``transfer-encoding: chunked``; we send bodies
    whole, so such a request gets its ``content-length`` instead (the usual case passes as is)."""
    if body is None or not any(name.lower() == b"transfer-encoding" for name, _ in headers):
        return headers
    return [(n, v) for n, v in headers if n.lower() != b"transfer-encoding"] + [(b"Content-Length", b"%d" % len(body))]


class _NoCookies(httpx.Cookies):
    """A jar that keeps nothing: no ``http.cookiejar`` pass over each response."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set_cookie_header(self, request: httpx.Request) -> None:
        return None


_NO_COOKIES = _NoCookies()


class UpstreamClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` for upstream calls: no cookie jar (``client.cookies`` is always empty)."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        return None


def open_connections(client: httpx.AsyncClient) -> int:
    """Upstream sockets the client's default transport holds (for the pool gauge)."""
    transport: Any = getattr(client, "_transport", None)
    if isinstance(transport, GatewayTransport):
        return transport.open_connections
    pool = getattr(transport, "_pool", None)  # httpx.AsyncHTTPTransport → httpcore's pool
    return len(getattr(pool, "connections", ()))
