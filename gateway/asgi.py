"""Plain ASGI mechanics the relay needs: reading a bounded JSON body, sending replies, and noticing
that the caller hung up.

Pure ASGI on purpose: Starlette's ``BaseHTTPMiddleware`` and ``StreamingResponse`` hide or delay
``http.disconnect``, and a gateway must cancel its upstream the moment the caller is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from gateway.body_encoding import inflater_for
from gateway.errors import GatewayError

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON_TYPES = ("application/json", "text/json", "application/x-ndjson")


class ClientGone(Exception):
    """The caller disconnected."""


def header(scope: Scope, name: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def headers_dict(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body, at most ``limit`` bytes (inflated when it is gzip/deflate encoded)."""
    length = header(scope, b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise GatewayError("request_too_large", f"request body is larger than {limit} bytes", 413)
    inflater = inflater_for(header(scope, b"content-encoding"), limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        body = message.get("body", b"")
        if body:
            size += len(body)
            if size > limit:
                raise GatewayError("request_too_large", f"request body is larger than {limit} bytes", 413)
            chunks.append(body if inflater is None else inflater.feed(body))
        if not message.get("more_body", False):
            if inflater is not None:
                inflater.finish()
            return b"".join(chunks)


def _depth_ok(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return True


def parse_json_object(scope: Scope, body: bytes, max_depth: int) -> dict[str, Any]:
    """The request body as a JSON object, or a 4xx ``GatewayError`` that says what is wrong."""
    content_type = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
    if content_type and content_type not in JSON_TYPES and not content_type.endswith("+json"):
        raise GatewayError(
            "unsupported_media_type", f"content-type must be application/json, not {content_type!r}", 415
        )
    if not body.strip():
        raise GatewayError("invalid_request", "request body is empty: a JSON object is required", 400)
    try:
        value = orjson.loads(body)  # (orjson refuses invalid UTF-8 too: the decode below only words it)
    except orjson.JSONDecodeError as exc:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise GatewayError("invalid_request", f"request body is not valid UTF-8 (byte {bad.start})", 400) from None
        raise GatewayError("invalid_request", f"request body is not valid JSON: {exc}", 400) from None
    if not isinstance(value, dict):
        raise GatewayError("invalid_request", f"request body must be a JSON object, not {type(value).__name__}", 400)
    # no deeper than its count of opening brackets (counted at C speed): most bodies need no walk
    if body.count(b"{") + body.count(b"[") > max_depth and not _depth_ok(value, max_depth):
        raise GatewayError("invalid_request", f"request body is nested deeper than {max_depth} levels", 400)
    return value


async def send_json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def wait_disconnect(receive: Receive) -> None:
    """Return when the caller hangs up (the request body has already been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def run_until_disconnect(work: Awaitable[None], receive: Receive) -> bool:
    """Run ``work``; cancel it the moment the caller disconnects. Returns False if it was cut short.

    ``work`` runs in the calling task and one watcher task cancels that task on a disconnect: no
    second task for the work and no ``asyncio.wait`` (its set, callbacks and waiter future were
    ~2 % of a whole request's CPU, bench/README.md "third pass"). A failure of ``work`` after the
    caller left is the hang-up's consequence, not an error: it is dropped, as the cancellation is."""
    current = asyncio.current_task()
    assert current is not None, "run_until_disconnect runs in a task"
    cut = False

    async def watch() -> None:
        nonlocal cut
        await wait_disconnect(receive)
        cut = True
        current.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        await work
    except BaseException:
        if not cut:
            raise
    finally:
        watcher.cancel()
    if cut:
        if current.uncancel() > 0:  # cancelled from outside too (shutdown): that one goes on
            raise asyncio.CancelledError
        return False
    return True
