"""The gateway's HTTP/1.1 server protocol: uvicorn's httptools protocol with the bounds it lacks.

uvicorn bounds an idle keep-alive connection, but not a request that never finishes arriving: a
connection that sends nothing, half a head, one byte a second or half a body is held open forever
(each holds a socket, and enough of them exhaust the process). A gateway must face the network
without a proxy in front, so ``GatewayHttpProtocol`` (a subclass of
``uvicorn.protocols.http.httptools_impl.HttpToolsProtocol``, the parser uvicorn already picks, so
the hot path stays llhttp in C and nothing else changes per byte) adds, from ``[server]``:

* ``request_head_timeout`` (10 s): from the connection's start, or from the first read of a next
  request on a kept-alive connection, to the end of the head. Past it the connection is closed,
  with a 408 in a dialect's shape if part of a head had arrived;
* ``request_body_timeout`` (60 s): from the end of the head to the end of the body. Past it a 408
  in the caller's dialect if no response has started, and the connection is closed; the endpoint
  reading the body sees a disconnect;
* ``keep_alive_timeout`` (5 s): an idle kept-alive connection is closed (uvicorn's own timer);
* ``max_head_bytes`` (64 KiB): a longer head (request line and headers) is a 431 and the connection
  closed; llhttp has no limit of its own, so a head would otherwise grow in memory until its timeout;
* ``max_connections`` (10,000 per process; 0 = no cap): a request on a connection beyond it is
  answered 503 in the caller's dialect with ``Retry-After`` and the connection closed (uvicorn's
  ``limit_concurrency`` answers plain text, which no SDK reads).

``Upgrade: websocket`` is handed to ``ws_protocol.GatewayWebSocketProtocol`` (Responses over
WebSocket, ``gateway.server.websocket``; ``edge.EdgeGuard`` answers a handshake on any other path,
or with ``[websocket] enabled = false``, 426 in the caller's dialect), after the connection cap.
Any other ``Upgrade`` (``h2c``) goes to the app as plain HTTP and is served normally, and since
llhttp cannot parse past an upgrade, the connection closes after that one answer instead of hanging.

Why a subclass and not another server: hypercorn and granian have header timeouts, but uvicorn with
httptools is what the gateway's numbers in ``bench/`` were measured on, and the bounds cost one timer
per connection plus one per request phase still unfinished after a read (most requests arrive in
one read and cost none), nothing per chunk.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from gateway.asgi import Receive, Scope, Send
from gateway.errors import GatewayError
from gateway.server.coalesce import HeadHolding
from gateway.server.edge import error_response, guess_dialect
from gateway.server.loaded_app import app_settings


@dataclass(frozen=True, slots=True)
class Limits:
    head_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 10_000
    max_head_bytes: int = 65_536


_LIMITS: weakref.WeakKeyDictionary[Config, Limits] = weakref.WeakKeyDictionary()  # per uvicorn config, found once


def limits_of(config: Config) -> Limits:
    """The ``[server]`` bounds of the gateway app this config serves (defaults for any other app)."""
    cached = _LIMITS.get(config)
    if cached is not None:
        return cached
    settings = app_settings(config)
    server = settings.server if settings is not None else None
    limits = Limits()
    if server is not None:
        limits = Limits(
            server.request_head_timeout,
            server.request_body_timeout,
            server.keep_alive_timeout,
            server.max_connections,
            server.max_head_bytes,
        )
    _LIMITS[config] = limits
    return limits


def error_bytes(dialect: str, err: GatewayError) -> bytes:
    """A whole HTTP/1.1 response that closes the connection: ``err`` in ``dialect``'s shape (written
    straight to the transport, where no ASGI cycle can answer any more)."""
    status, payload = error_response(dialect, err)
    head = [
        STATUS_LINE[status],
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(payload),
        b"connection: close\r\n",
    ]
    return b"".join(head) + b"\r\n" + payload


def _refusal(err: GatewayError, extra: list[tuple[bytes, bytes]]) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI app answering every request with ``err`` in its dialect, closing the connection."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        dialect = guess_dialect(scope.get("path", ""), scope.get("headers", []), scope.get("query_string", b""))
        status, payload = error_response(dialect, err)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            *extra,
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    return app


_over_capacity = _refusal(
    GatewayError("overloaded", "the gateway has too many open connections; retry shortly", 503),
    [(b"retry-after", b"1")],
)
# llhttp ends the message at the head of an Upgrade request and hands the body out as the new
# protocol's bytes, so such a body cannot be read as HTTP: refused, never parsed as empty.
_upgrade_with_body = _refusal(
    GatewayError(
        "invalid_request", "Upgrade is not supported on a request with a body: send it without the Upgrade header", 400
    ),
    [],
)


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if (name == b"content-length" and value.strip() not in (b"", b"0")) or name == b"transfer-encoding":
            return True
    return False


def _websocket(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name == b"upgrade" and b"websocket" in value.lower() for name, value in headers)


class GatewayHttpProtocol(HttpToolsProtocol):
    """See the module docstring: head/body deadlines, a connection cap answered in dialect, WebSocket upgrades handed on."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits = limits_of(config)
        self.limits = limits
        # uvicorn declares this int but only hands it to loop.call_later, which takes seconds as a float
        self.timeout_keep_alive = limits.keep_alive_timeout  # type: ignore[assignment]
        self.limit_concurrency = None  # the cap is checked here, answered in a dialect (on_headers_complete)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._in_head = False  # bytes of a request head have arrived, its end has not
        self._in_body = False  # the head has arrived, the end of its body has not
        self._head_bytes = 0  # read while a head was unfinished (llhttp itself has no size limit)
        self._upgraded = False  # handed to the WebSocket protocol: this one no longer reads the socket

    # -- timers
    def _arm_head(self) -> None:
        if self._head_timer is None and self.limits.head_timeout > 0:
            self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_expired)

    def _cancel(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        busy = self.cycle is not None and not self.cycle.response_complete  # an answer is still being written
        if self._in_head and not busy:
            path = self.url.split(b"?", 1)[0].decode("latin-1", "replace") if self.url else ""
            err = GatewayError("timeout", f"the request head did not arrive within {self.limits.head_timeout:g}s", 408)
            self.transport.write(error_bytes(guess_dialect(path, self.headers or []), err))
        self.transport.close()

    def _body_expired(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None:
            return
        if not cycle.response_started:
            cycle.response_started = True  # the endpoint's own answer, if any, is dropped
            err = GatewayError("timeout", f"the request body did not arrive within {self.limits.body_timeout:g}s", 408)
            self.transport.write(
                error_bytes(guess_dialect(self.scope.get("path", ""), list(self.scope.get("headers", []))), err)
            )
        cycle.disconnected = True
        cycle.message_event.set()
        self.transport.close()

    # -- uvicorn protocol hooks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(cast(asyncio.Transport, transport))  # a stream server's transports are Transports
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_head_bytes > 0:
                path = self.url.split(b"?", 1)[0].decode("latin-1", "replace")
                err = GatewayError(
                    "request_too_large", f"the request head is larger than {self.limits.max_head_bytes} bytes", 431
                )
                self.transport.write(error_bytes(guess_dialect(path, self.headers or []), err))
                self.transport.close()
                return
        super().data_received(data)
        if self._upgraded:
            return
        # Timers are armed only for a request still unfinished when this read is parsed: most
        # requests arrive whole in one read and cost no timer at all.
        if self.transport.is_closing():
            return
        if self._in_head:
            self._arm_head()
        if self._in_body and self._body_timer is None and self.limits.body_timeout > 0:
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_expired)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        cap = self.limits.max_connections
        substitute = None
        if cap > 0 and (len(self.connections) > cap or len(self.tasks) >= cap):
            substitute = _over_capacity
        elif self.parser.should_upgrade() and _has_body(self.headers) and not _websocket(self.headers):
            substitute = _upgrade_with_body  # (a WebSocket handshake is answered 426 by edge.EdgeGuard)
        app = self.app
        if substitute is not None:
            self.app = substitute
        try:
            super().on_headers_complete()
        finally:
            self.app = app
        if substitute is not None and self.cycle is not None:
            self.cycle.keep_alive = False
        if self.cycle is not None:  # the head and the first body bytes in one write (coalesce.py)
            self.cycle.transport = cast(asyncio.Transport, HeadHolding(self.transport, self.loop))
        self._in_body = True

    def on_message_complete(self) -> None:
        self._in_body = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    def _should_upgrade(self) -> bool:
        """Only a GET is a WebSocket handshake; any other method with ``Upgrade: websocket`` is
        served as HTTP (``edge.EdgeGuard``: 426 in the caller's dialect)."""
        return super()._should_upgrade() and self.scope.get("method") == "GET"

    def handle_websocket_upgrade(self) -> None:
        """A WebSocket handshake: past the connection cap it is a 503 like any request; else the
        head's deadline is over and the socket belongs to the WebSocket protocol from here on."""
        self._cancel()
        self._in_head = self._in_body = False
        self._upgraded = True
        cap = self.limits.max_connections
        if cap > 0 and (len(self.connections) > cap or len(self.tasks) >= cap):
            path = self.url.split(b"?", 1)[0].decode("latin-1", "replace")
            err = GatewayError("overloaded", "the gateway has too many open connections; retry shortly", 503)
            self.transport.write(error_bytes(guess_dialect(path, self.headers or []), err))
            self.transport.close()
            return
        super().handle_websocket_upgrade()

    def _unsupported_upgrade_warning(self) -> None:
        """An ``Upgrade`` request was served as plain HTTP; llhttp cannot read past it, so the
        connection ends with this answer (never held open waiting for a protocol switch)."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self.transport.close()
        else:
            cycle.keep_alive = False


def uvicorn_options() -> dict[str, Any]:
    """What every uvicorn the gateway runs under is given (the CLI, its workers and the tests)."""
    from gateway.server.ws_protocol import GatewayWebSocketProtocol

    return {"http": GatewayHttpProtocol, "ws": GatewayWebSocketProtocol}
