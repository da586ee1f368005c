"""The edge: answers for requests that never reach a model endpoint, in a dialect's own shape.

An unknown path, a wrong method, a path trick, a WebSocket handshake, a connection over the cap or
a request that took too long: the caller is some SDK, and it reads errors in its own format. Which
one is guessed from what each SDK always sends (``guess_dialect``): each codec says whether it
recognises the request (``Codec.recognises``), asked in registry order: an ``anthropic-version``
header or a ``/v1/messages`` path is Anthropic; the Interactions paths their own shape;
``/v1beta/…``, a Google key header or ``?key=`` is Gemini; ``/v1/responses`` is OpenAI Responses;
anything else OpenAI. The same guess serves the server layer (``gateway.server.protocol``), which has only the
request head.

``EdgeGuard`` wraps the Starlette app and refuses, before any routing:

* path tricks: a ``.`` or ``..`` segment, an empty segment (``//``), an encoded slash or backslash
  (``%2F``, ``%5C``) or a control character (NUL, CR, LF …): 404, never routed. In a Gemini
  ``models/{model}:…`` path a control character is the model name's: 400, as in a body.
* WebSocket handshakes (``Upgrade: websocket``) on any path but the ones served
  (``websocket_paths``: ``/v1/responses``, Responses over WebSocket, gateway/server/websocket.py,
  unless ``[websocket] enabled = false``): 426 Upgrade Required, on which Codex CLI falls back to
  HTTP. Any other ``Upgrade`` (``h2c``) is ignored and the request served as HTTP/1.1.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

import orjson

from gateway.asgi import Receive, Scope, Send
from gateway.errors import GatewayError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENCODED_SEPARATOR = re.compile(rb"%(2f|5c)", re.IGNORECASE)
_GEMINI_MODEL_PATH = re.compile(r"^/(v1beta|v1)/models/")


def guess_dialect(path: str, headers: dict[bytes, bytes] | list[tuple[bytes, bytes]], query: bytes = b"") -> str:
    """The dialect whose error shape this caller reads: the first codec that recognises it
    (``registry.guess_caller``; see the module docstring)."""
    from gateway.dialects.registry import guess_caller

    names = {k.lower() for k, _ in headers} if isinstance(headers, list) else {k.lower() for k in headers}
    keys = {k for k, _ in parse_qsl(query.decode("latin-1"))} if query else set()
    return guess_caller(path, names, keys)


def scope_dialect(scope: Scope) -> str:
    return guess_dialect(scope.get("path", ""), scope.get("headers", []), scope.get("query_string", b""))


def error_response(dialect: str, err: GatewayError) -> tuple[int, bytes]:
    """Status and JSON body of ``err`` as ``dialect`` renders it."""
    from gateway.dialects.registry import codec_for

    status, body = codec_for(dialect).render_error(err)
    return status, orjson.dumps(body)


async def send_edge_error(
    scope: Scope, send: Send, err: GatewayError, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    status, payload = error_response(scope_dialect(scope), err)
    extra = headers or []
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def path_problem(scope: Scope) -> GatewayError | None:
    """Why this path must not be routed, or None."""
    path: str = scope.get("path", "")
    raw: bytes = scope.get("raw_path") or path.encode("latin-1", "replace")
    if _CONTROL.search(path) or b"%00" in raw:
        if _GEMINI_MODEL_PATH.match(path):
            return GatewayError(
                "invalid_request", "model: the model name contains a control character", 400, param="model"
            )
        return GatewayError("not_found", "no route: the path contains a control character", 404)
    segments = path.split("/")[1:]
    if any(s in (".", "..") for s in segments) or "//" in path or _ENCODED_SEPARATOR.search(raw):
        return GatewayError(
            "not_found", f"no route for {path!r}: dot segments, empty segments and encoded slashes are not routed", 404
        )
    return None


def wants_websocket(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"upgrade" and b"websocket" in value.lower():
            return True
    return False


UPGRADE_REQUIRED = GatewayError(
    "invalid_request", "no WebSocket is served on this path: send the same request as a plain HTTP POST", 426
)


class EdgeGuard:
    """ASGI wrapper: path tricks and WebSocket handshakes answered before routing (see module doc)."""

    def __init__(self, app: Any, websocket_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.websocket_paths = websocket_paths  # the WebSocket endpoints the app serves

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":  # only when the server was started with WebSocket support
            if scope.get("path") in self.websocket_paths and path_problem(scope) is None:
                await self.app(scope, receive, send)
            else:
                await self._refuse_websocket(scope, receive, send)
            return
        if kind == "http":
            problem = path_problem(scope)
            if problem is None and wants_websocket(scope):
                problem = UPGRADE_REQUIRED
            if problem is not None:
                headers = [(b"connection", b"close")] if problem.status == 426 else []
                await send_edge_error(scope, send, problem, headers)
                return
        await self.app(scope, receive, send)

    async def _refuse_websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()  # websocket.connect
        if message["type"] != "websocket.connect":
            return
        status, payload = error_response(scope_dialect(scope), path_problem(scope) or UPGRADE_REQUIRED)
        if "websocket.http.response" in scope.get("extensions", {}):
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "websocket.http.response.body", "body": payload})
        else:
            await send({"type": "websocket.close", "code": 1008})
