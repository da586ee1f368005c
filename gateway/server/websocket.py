"""Responses over WebSocket: ``GET /v1/responses`` with ``Upgrade: websocket`` (OpenAI's WebSocket mode).

Codex CLI opens one socket per session and sends each turn as a text frame
``{"type": "response.create", …}`` (the HTTP create body without ``stream``/``background``); the
server answers with the Responses stream events, one per text frame. Here a turn *is* an HTTP
request: ``ResponsesSocket`` hands each ``response.create`` to the same ``DialectEndpoint`` the
POST route uses, with a synthetic ``http`` scope (the handshake's headers, so keys, session
affinity and routing see what they see over HTTP) and a sink (``FrameSink``) that turns the SSE
bytes the pipeline writes into frames: the same event types, order and ``sequence_number`` as the
SSE endpoint, for every upstream dialect. So every turn gets the whole gateway — the key checked
again, limits and budgets, routing and fallbacks, guardrails, the cache, one access-log line
(``"transport": "websocket"``), metrics and a span.

* **Handshake.** The caller key is checked before the upgrade: a refused key is a plain HTTP 401
  in OpenAI's error shape, never a socket. ``OpenAI-Beta: responses_websockets=…`` is accepted, not
  required. The answer carries ``x-request-id`` (the connection's; turn N's is ``<id>-N``) and
  ``x-codex-turn-state`` (the caller's own, else a new token): Codex sends it back on its next
  connection, so a load balancer can keep a session on one replica.
* **Errors in band**, as OpenAI sends them: ``{"type": "error", "status": 429, "error": {…},
  "headers": {…}}``; the socket stays usable. A failure mid-stream is the SSE endpoint's own
  ``error`` + ``response.failed`` events.
* **State**: ``gateway.relay.ws_session`` (the connection's memory of ``store: false`` turns; the
  prewarm ``generate: false`` answered without an upstream call).
* **Other client frames** (``response.processed``, which Codex sends after each turn, or any
  other type) are accepted and ignored; a frame that is not a JSON object is an in-band 400.
* **Turns run one at a time**, in the order sent. The caller closing the socket mid-turn cancels
  the turn at once, which closes its upstream connection.
* **Bounds** (``[websocket]``): ``idle_timeout`` without a new turn (none running), ``max_seconds`` per
  connection (then ``websocket_connection_limit_reached`` in band, which Codex answers by
  reconnecting, and a close), ``max_message_bytes`` per client frame, keepalive pings
  (``gateway.server.ws_protocol``). On shutdown the running turn finishes (within the shutdown
  grace) and the socket is closed with a close frame (1001).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import orjson

from gateway.asgi import Receive, Scope, Send, header
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.relay.pipeline import Relay
from gateway.relay.turn_memory import TURN_MEMORY, TurnMemory
from gateway.relay.ws_session import DIALECT, prewarm, sse_payloads
from gateway.server.ws_protocol import SHUTDOWN  # told by the protocol on server shutdown
from gateway.telemetry.observe import AccessRecord

log = logging.getLogger("gateway.websocket")

TURN_STATE_HEADER = b"x-codex-turn-state"
_HOP = {
    b"upgrade",
    b"connection",
    b"sec-websocket-key",
    b"sec-websocket-version",
    b"sec-websocket-extensions",
    b"sec-websocket-protocol",
    b"content-length",
    b"transfer-encoding",
    b"content-type",
    b"x-request-id",
}
_NOT_ECHOED = {b"content-type", b"content-length", b"connection"}


def _error_frame(status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> bytes:
    """An HTTP error answer as OpenAI's WebSocket mode sends it (what Codex parses)."""
    error = body.get("error", body) if isinstance(body, dict) else {"message": str(body)}
    echoed = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k not in _NOT_ECHOED}
    return orjson.dumps({"type": "error", "status": status, "error": error, "headers": echoed})


def error_frame(err: GatewayError, headers: list[tuple[bytes, bytes]] | None = None) -> bytes:
    status, body = codec_for(DIALECT).render_error(err)
    return _error_frame(status, body, headers or [])


class Socket:
    """The accepted connection's send side: text frames, nothing once the caller has gone."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.closed = asyncio.Event()

    async def text(self, payload: bytes) -> None:
        if self.closed.is_set():
            return
        try:
            await self._send({"type": "websocket.send", "text": payload.decode()})
        except OSError:  # uvicorn's ClientDisconnected: the caller went away mid-send
            self.closed.set()

    async def close(self, code: int, reason: str = "") -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        with contextlib.suppress(OSError, RuntimeError):
            await self._send({"type": "websocket.close", "code": code, "reason": reason})


class FrameSink:
    """The ASGI ``send`` of one turn: the pipeline's HTTP answer → WebSocket frames.

    A 200 event stream: each SSE event's JSON as one text frame (keepalive comments dropped: the
    socket has its own pings). Any other answer (a refusal before the stream: 401, 400, 429 …):
    one in-band ``error`` frame carrying its status, error object and headers."""

    def __init__(self, socket: Socket) -> None:
        self.socket = socket
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.streaming = False
        self.rest = b""
        self.body = b""

    async def __call__(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", []))
            content_type = next((v for k, v in self.headers if k == b"content-type"), b"")
            self.streaming = self.status == 200 and content_type.startswith(b"text/event-stream")
            return
        if kind != "http.response.body":
            return
        data: bytes = message.get("body", b"")
        if self.streaming:
            payloads, self.rest = sse_payloads(self.rest + data)
            for payload in payloads:
                await self.socket.text(payload)
            return
        self.body += data
        if not message.get("more_body", False):
            try:
                body = orjson.loads(self.body) if self.body else {}
            except orjson.JSONDecodeError:
                body = {"message": self.body.decode("utf-8", "replace")}
            if self.status == 200:  # a whole answer (never asked for here): its object as one frame
                await self.socket.text(orjson.dumps({"type": "response.completed", "response": body}))
            else:
                await self.socket.text(_error_frame(self.status, body, self.headers))


class ResponsesSocket:
    """ASGI endpoint of the ``websocket`` scope on ``/v1/responses`` (see the module docstring)."""

    def __init__(self, relay: Relay, endpoint: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.relay = relay
        self.endpoint = endpoint  # the POST /v1/responses DialectEndpoint: every turn goes through it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.relay.state
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        try:
            if state.shutting_down:
                raise GatewayError("overloaded", "the gateway is shutting down; reconnect shortly", 503)
            await state.auth.authenticate(scope, query)  # before the upgrade: a refused key gets no socket
        except GatewayError as err:
            await _deny(scope, send, err)
            return
        except Exception as exc:  # a store outage while looking a key up: an answer, never a dropped socket
            log.exception("websocket handshake failed inside the gateway")
            await _deny(scope, send, GatewayError("api_error", f"internal gateway error ({type(exc).__name__})", 500))
            return
        conn_id = header(scope, b"x-request-id") or "ws_" + secrets.token_hex(12)
        turn_state = header(scope, TURN_STATE_HEADER) or "ts_" + secrets.token_urlsafe(18)
        await send(
            {
                "type": "websocket.accept",
                "headers": [(b"x-request-id", conn_id.encode()), (TURN_STATE_HEADER, turn_state.encode())],
            }
        )
        await Connection(self, scope, receive, send, conn_id, turn_state).run()


async def _deny(scope: Scope, send: Send, err: GatewayError) -> None:
    """A refusal before the upgrade: a plain HTTP answer in OpenAI's shape (or a 1008 close where
    the server cannot answer a handshake with HTTP)."""
    status, body = codec_for(DIALECT).render_error(err)
    payload = orjson.dumps(body)
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": payload})


class Connection:
    """One accepted socket: reads client frames, runs its turns one at a time."""

    def __init__(
        self, owner: ResponsesSocket, scope: Scope, receive: Receive, send: Send, conn_id: str, turn_state: str
    ) -> None:
        self.state = owner.relay.state
        self.endpoint = owner.endpoint
        self.settings = self.state.settings.websocket
        self.scope, self.receive = scope, receive
        self.socket = Socket(send)
        self.conn_id = conn_id
        self.turn_state = turn_state
        self.memory = TurnMemory(self.settings.turns_kept)
        self.turns: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.draining = False
        self.count = 0
        headers = [(k, v) for k, v in scope.get("headers", []) if k not in _HOP]
        if not any(k in (b"x-session-id", b"session_id", b"x-claude-code-session-id") for k, _ in headers):
            headers.append((b"x-session-id", turn_state.encode()))  # a connection's turns are one session
        self.headers = [*headers, (b"content-type", b"application/json")]

    async def run(self) -> None:
        gauge = self.state.observer.metrics.websockets_open
        gauge.inc()
        reader = asyncio.create_task(self._read())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.max_seconds if self.settings.max_seconds > 0 else None
        try:
            while not self.socket.closed.is_set():
                if self.draining and self.turns.empty():
                    await self.socket.close(1001, "the gateway is shutting down")
                    break
                timeout = self.settings.idle_timeout if self.settings.idle_timeout > 0 else None
                if deadline is not None:
                    left = deadline - loop.time()
                    timeout = left if timeout is None else min(timeout, left)
                try:
                    body = await asyncio.wait_for(self.turns.get(), max(timeout, 0) if timeout is not None else None)
                except TimeoutError:
                    if deadline is not None and loop.time() >= deadline:
                        await self._connection_limit()
                    else:
                        await self.socket.close(1000, "idle timeout")
                    break
                if body is None:  # the caller left, or shutdown
                    continue
                await self._turn(body)
                if deadline is not None and loop.time() >= deadline and not self.socket.closed.is_set():
                    await self._connection_limit()
                    break
        finally:
            gauge.dec()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _connection_limit(self) -> None:
        minutes = self.settings.max_seconds / 60
        err = GatewayError(
            "invalid_request",
            f"Responses websocket connection limit reached ({minutes:g} minutes). "
            "Create a new websocket connection to continue.",
            400,
            raw="websocket_connection_limit_reached",
            origin=DIALECT,  # OpenAI's own code, which Codex answers by reconnecting
        )
        await self.socket.text(error_frame(err))
        await self.socket.close(1000, "connection limit reached")

    async def _read(self) -> None:
        """Client frames → the turn queue, until the caller closes (which ends a running turn)."""
        try:
            while True:
                message = await self.receive()
                kind = message["type"]
                if kind == "websocket.disconnect":
                    break
                if kind == SHUTDOWN:
                    self.draining = True
                    self.turns.put_nowait(None)
                    continue
                if kind != "websocket.receive":
                    continue
                raw = message.get("text")
                data = raw.encode() if raw is not None else (message.get("bytes") or b"")
                try:
                    event = orjson.loads(data)
                except orjson.JSONDecodeError:
                    event = None
                if not isinstance(event, dict):
                    err = GatewayError("invalid_request", "a client event must be a JSON object with a type", 400)
                    await self.socket.text(error_frame(err))
                    continue
                if event.get("type") == "response.create":
                    if self.draining:
                        err = GatewayError("overloaded", "the gateway is shutting down; reconnect to continue", 503)
                        await self.socket.text(error_frame(err))
                        continue
                    self.turns.put_nowait(event)
                # response.processed (Codex, after each turn) and anything else: accepted, nothing to do
        finally:
            self.socket.closed.set()
            self.turns.put_nowait(None)

    def _turn_scope(self) -> Scope:
        scope = self.scope
        return {
            "type": "http",
            "asgi": scope.get("asgi", {"version": "3.0"}),
            "http_version": "1.1",
            "method": "POST",
            "scheme": "https" if scope.get("scheme") == "wss" else "http",
            "path": "/v1/responses",
            "raw_path": b"/v1/responses",
            "root_path": scope.get("root_path", ""),
            "query_string": scope.get("query_string", b""),
            "headers": [*self.headers, (b"x-request-id", f"{self.conn_id}-{self.count}".encode())],
            "client": scope.get("client"),
            "server": scope.get("server"),
            "state": scope.get("state", {}),
            TURN_MEMORY: self.memory,
        }

    async def _turn(self, event: dict[str, Any]) -> None:
        self.count += 1
        body = {k: v for k, v in event.items() if k not in ("type", "stream")}
        if body.pop("background", None):
            err = GatewayError("invalid_request", "background is not supported over WebSocket", 400, param="background")
            await self.socket.text(error_frame(err))
            return
        scope = self._turn_scope()
        if body.pop("generate", True) is False:
            await self._prewarm(scope, body)
            return
        body["stream"] = True
        payload = orjson.dumps(body)
        sent = False
        closed = self.socket.closed

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": payload, "more_body": False}
            await closed.wait()
            return {"type": "http.disconnect"}

        sink = FrameSink(self.socket)
        try:
            await self.endpoint(scope, receive, sink)
        except Exception:  # the pipeline answers its own failures; this is a bug in the sink
            log.exception("websocket turn %s-%d failed", self.conn_id, self.count)
            if sink.status == 0:
                err = GatewayError("api_error", "internal gateway error", 500)
                await self.socket.text(error_frame(err))

    async def _prewarm(self, scope: Scope, body: dict[str, Any]) -> None:
        """``generate: false``: answered here, never upstream (``ws_session.prewarm``); one log line."""
        state = self.state
        request_id = f"{self.conn_id}-{self.count}"
        record = AccessRecord(request_id, DIALECT, "/v1/responses")
        record.transport = "websocket"
        try:
            for payload in await prewarm(state, scope, body, self.memory, record):
                await self.socket.text(payload)
        except GatewayError as err:
            status, rendered = codec_for(DIALECT).render_error(err)
            record.status, record.error_kind = status, err.kind
            await self.socket.text(_error_frame(status, rendered, [(b"x-request-id", request_id.encode())]))
        finally:
            state.observer.finish(record)
            if state.console is not None:
                state.console.note(record)
