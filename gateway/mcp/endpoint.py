"""``/mcp``: the gateway as one MCP server (streamable HTTP) over the tools of every ``[[mcp_servers]]``.

The protocol is the official SDK's (``mcp``'s low-level ``Server`` behind its
``StreamableHTTPSessionManager``), not hand-written: the SDK answers every revision it negotiates —
the ``initialize`` handshake revisions 2024-11-05 … 2025-11-25 and the per-request envelope of
2026-07-28 (``server/discover``) — with the JSON-RPC errors, ``Accept`` handling
(JSON or an SSE stream per POST) and header checks of each. The manager runs *stateless*: no
``Mcp-Session-Id`` is issued and nothing about a client is kept between requests, so a client's
requests may land on any replica (docs/mcp.md "Replicas"). ``GET`` (a server-to-client stream) and
``DELETE`` (ending a session) are then 405, as the transport allows a server without sessions.

What the gateway adds in front: the caller's key (``Authorization: Bearer``, the same
``Authenticator`` as model calls; a 401 before the SDK sees the body), and behind: ``tools/list``
from the catalog filtered by the key, ``tools/call`` refused unless the key may call the tool
(never reaching a server), else admitted by the key's limits and forwarded to its server with the
server's timeout. The caller's key is never forwarded (the upstream sessions carry only the
server's own ``headers_env``). A 2025-03-26 batch is split into single messages here
(gateway/mcp/batch.py): the SDK's transport reads one message per POST.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from gateway.asgi import Receive, Scope, Send, header
from gateway.errors import GatewayError
from gateway.mcp.access import CallRecord, McpMetrics
from gateway.mcp.batch import Captured, batch_refusal, element_scope
from gateway.mcp.cancel import CANCEL_KEY, InFlight, Watch, replayed, watch_disconnect
from gateway.mcp.catalog import BadCursor, Catalog, allowed
from gateway.mcp.upstream import ServerDown, Upstream
from gateway.telemetry.observe import request_id_for

if TYPE_CHECKING:
    from gateway.governance.keys import KeySpec
    from gateway.relay.state import GatewayState

log = logging.getLogger("gateway.mcp")

PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes (as mcp_types.jsonrpc names them)

SPEC_KEY = "gateway.mcp.key"  # the caller's KeySpec, on the ASGI scope the SDK hands back as ctx.request
REQUEST_ID_KEY = "gateway.mcp.request_id"  # the request's id (the caller's x-request-id, else a new one)
MAX_BODY_BYTES = 4 * 1024 * 1024  # one JSON-RPC message (or batch); larger is a 413 before parsing
STARTUP_WAIT_SECONDS = 10.0  # the gateway waits this long at startup for each server's first tool list


class McpGateway:
    """The ``/mcp`` ASGI endpoint and the upstream servers it owns."""

    def __init__(self, state: GatewayState) -> None:
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise SystemExit(
                "[[mcp_servers]] is configured but the MCP SDK is not installed: pip install 'llm-gateway[mcp]' "
                "(or pip install mcp)"
            ) from None
        # the SDK logs every stateless request at INFO ("Terminating session"), httpx2 every upstream
        # request with its URL: the gateway's own log says what matters
        for name in ("mcp", "httpx2"):
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger(name).level))
        self.state = state
        self.upstreams = {s.name: Upstream(s) for s in state.settings.mcp_servers}
        import mcp_types

        self.catalog = Catalog(self.upstreams, mcp_types.Tool.model_validate)  # validated once per list change
        self.metrics = McpMetrics(state.observer.metrics.registry, self.upstreams)
        state.ledger.call_prices = {
            s.name: s.price_per_call for s in state.settings.mcp_servers if s.price_per_call is not None
        }
        self.inflight = InFlight()  # running calls, for notifications/cancelled and hang-ups
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.changes = InMemorySubscriptionBus()  # tool-list changes, to this replica's listen streams
        for upstream in self.upstreams.values():
            upstream.on_change = self._tools_changed
        self.server = self._server()
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        # Accept decides the answer's form: an SSE stream when the client takes one (progress
        # notifications then reach it before the result), one JSON body when it takes only JSON
        self.managers = {
            json_only: StreamableHTTPSessionManager(
                app=self.server, stateless=True, json_response=json_only, max_request_body_size=MAX_BODY_BYTES
            )
            for json_only in (False, True)
        }
        self._running: list[Any] = []

    # -- lifecycle (the app's lifespan) -----------------------------------------------------------

    async def start(self) -> None:
        if self.state.stateful is not None:  # cancel markers for calls running on another replica
            self.inflight.store = self.state.stateful.store
        for manager in self.managers.values():
            running = manager.run()
            await running.__aenter__()
            self._running.append(running)
        for upstream in self.upstreams.values():
            upstream.start()
        await asyncio.gather(*(u.wait_up(STARTUP_WAIT_SECONDS) for u in self.upstreams.values()))

    async def stop(self) -> None:
        for upstream in self.upstreams.values():
            await upstream.stop()
        while self._running:
            await self._running.pop().__aexit__(None, None, None)

    def status(self) -> dict[str, Any]:
        return {name: u.status() for name, u in self.upstreams.items()}

    # -- HTTP -------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "")
        if method != "POST":
            # no sessions and no server-initiated stream: the transport's answer for both is a 405
            await _plain(send, 405, "this MCP endpoint is stateless: POST only", {b"allow": b"POST"})
            return
        try:
            spec = await self.state.auth.authenticate(scope, {})
        except GatewayError as err:
            await _plain(send, err.status, err.message, {b"www-authenticate": b'Bearer realm="mcp"'})
            return
        body = await _read_body(receive, MAX_BODY_BYTES)
        if body is None:
            await _plain(send, 413, f"the message is larger than {MAX_BODY_BYTES} bytes", {}, code=INVALID_REQUEST)
            return
        message, refusal = check_message(body)
        if refusal is not None:
            await _plain(send, 400, refusal[1], {}, code=refusal[0])
            return
        request_id = request_id_for(scope)
        send = _with_request_id(send, request_id.encode("latin-1"))
        watch = Watch()
        watcher = watch_disconnect(receive, watch)
        try:
            if isinstance(message, list):
                await self._batch(scope, message, spec, request_id, send, watch)
                return
            accept = header(scope, b"accept") or ""
            json_only = "text/event-stream" not in accept and "application/json" in accept
            await self._one(scope, body, message, spec, request_id, send, watch, json_only)
        finally:
            watcher.cancel()

    async def _one(
        self,
        scope: Scope,
        body: bytes,
        message: dict[str, Any],
        spec: KeySpec | None,
        request_id: str,
        send: Send,
        watch: Watch,
        json_only: bool,
    ) -> None:
        """One JSON-RPC message (a POST's, or one element of a batch) answered on ``send``."""
        if message.get("method") == "notifications/cancelled" and "id" not in message:
            params = message.get("params") or {}
            await self.inflight.cancel(spec.name if spec is not None else "", params.get("requestId"))
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        scope[SPEC_KEY] = spec
        scope[REQUEST_ID_KEY] = request_id
        scope[CANCEL_KEY] = watch
        manager = self.managers[json_only]
        await manager.handle_request(scope, replayed(body, watch), send)  # type: ignore[arg-type]  # the ASGI dict

    async def _batch(
        self, scope: Scope, elements: list[Any], spec: KeySpec | None, request_id: str, send: Send, watch: Watch
    ) -> None:
        """A 2025-03-26 batch: each element served as if sent alone (concurrently), the answers in one
        array (gateway/mcp/batch.py); a batch for another revision refused whole."""
        refusal = batch_refusal(elements, header(scope, b"mcp-protocol-version"))
        if refusal is not None:
            await _plain(send, 400, refusal, {}, code=INVALID_REQUEST)
            return

        async def element(index: int, item: Any) -> Any:
            bad = _refusal(item)
            if bad is not None:
                item_id = item.get("id") if isinstance(item, dict) else None
                return {"jsonrpc": "2.0", "id": item_id if isinstance(item_id, (str, int)) else None,
                        "error": {"code": bad[0], "message": bad[1]}}  # fmt: skip
            captured = Captured()
            one = orjson.dumps(item)
            await self._one(
                element_scope(scope), one, item, spec, f"{request_id}.{index}", captured, watch.child(), True
            )
            return orjson.loads(captured.body) if captured.body else None

        answers = await asyncio.gather(*(element(i, item) for i, item in enumerate(elements)))
        kept = [a for a in answers if isinstance(a, dict)]
        if not kept:  # only notifications and responses: accepted, no body
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(kept)})

    # -- the MCP server ---------------------------------------------------------------------------

    def _server(self) -> Any:
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import INVALID_PARAMS

        async def list_tools(ctx: Any, params: Any) -> Any:
            spec = _spec(ctx)
            try:
                tools, cursor = self.catalog.page(spec, getattr(params, "cursor", None))
            except BadCursor as exc:
                raise MCPError(INVALID_PARAMS, str(exc)) from None
            return types.ListToolsResult(tools=tools, next_cursor=cursor)  # (the catalog's models, kept)

        async def call_tool(ctx: Any, params: Any) -> Any:
            scope = ctx.request.scope if ctx.request is not None else {}
            spec = _spec(ctx)
            name = params.name
            call = CallRecord(self.state, self.metrics, scope, spec, name)
            found = self.catalog.resolve(name)
            if not allowed(spec, name):
                call.finish(403, "permission")
                assert spec is not None
                raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}: key {spec.name!r} may not call it")
            if found is None or (found[0].up and found[1] not in found[0].names):
                call.finish(404, "not_found")
                raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}")
            upstream, tool = found
            call.server(upstream, tool)
            result: Any = _error_result("the call was cancelled")
            async with self.inflight.running(
                spec.name if spec is not None else "", ctx.request_id, scope.get(CANCEL_KEY)
            ):
                result = await self._forward(ctx, call, spec, upstream, tool, params, MCPError)
            # the server's own result passes as the SDK's model it is; the gateway's error results are dicts
            return result if isinstance(result, types.CallToolResult) else types.CallToolResult.model_validate(result)

        from mcp.server.subscriptions import ListenHandler

        return Server(
            "llm-gateway",
            version="0.1.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_subscriptions_listen=ListenHandler(self.changes),  # 2026-07-28 clients: tools listChanged
        )

    async def _tools_changed(self) -> None:
        """A server's tool list changed: each open ``subscriptions/listen`` stream hears of it."""
        from mcp.shared.subscriptions import ToolsListChanged

        await self.changes.publish(ToolsListChanged())

    async def _forward(
        self,
        ctx: Any,
        call: CallRecord,
        spec: KeySpec | None,
        upstream: Upstream,
        tool: str,
        params: Any,
        mcp_error: Any,
    ) -> Any:
        """Admit, forward, and account one call; the result the caller gets (an error result for a
        refusal, a down or slow server; the server's JSON-RPC error as the same error)."""
        from gateway.governance.prices import NANO

        if spec is not None:
            price = upstream.settings.price_per_call
            try:
                await self.state.limiter.admit_call(spec, call.record, round((price or 0.0) * NANO))
            except GatewayError as err:
                call.finish(err.status, err.kind)
                return _error_result(err.message)
        progress = _progress_relay(ctx)
        try:
            result = await upstream.call(tool, params.arguments, progress)
        except ServerDown as exc:
            call.finish(502, "server_down")
            return _error_result(f"MCP server {upstream.name!r} is unavailable ({exc}); try again later")
        except TimeoutError:
            call.finish(504, "timeout")
            return _error_result(f"MCP server {upstream.name!r} did not answer within {upstream.timeout:g}s")
        except mcp_error:
            call.finish(502, "server_error")
            raise
        except BaseException:
            call.finish(499, "cancelled")
            raise
        call.finish(200, "tool_error" if result.is_error else None)
        return result


def check_message(body: bytes) -> tuple[Any, tuple[int, str] | None]:
    """The message (a dict, or a batch's list: gateway/mcp/batch.py judges it), and the JSON-RPC
    error (code, message) for a body that is not one JSON-RPC message.

    The SDK would answer a message without ``method`` with -32602 and a pydantic dump; the
    specification names -32700 (not JSON) and -32600 (not a valid request object)."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}, (PARSE_ERROR, "Parse error: the body is not JSON")
    if isinstance(message, list):
        return message, None
    refusal = _refusal(message)
    return (message if refusal is None else {}), refusal


def _refusal(message: Any) -> tuple[int, str] | None:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, 'Invalid Request: expected a JSON-RPC 2.0 object ("jsonrpc": "2.0")'
    method = message.get("method")
    if "method" in message:
        if not isinstance(method, str) or not method:
            return INVALID_REQUEST, "Invalid Request: method must be a non-empty string"
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return INVALID_REQUEST, "Invalid Request: params must be an object"
        request_id = message.get("id")
        if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
            return INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
    elif "id" not in message or ("result" not in message and "error" not in message):
        return (
            INVALID_REQUEST,
            "Invalid Request: a message needs a method (or, as a response, an id and a result or error)",
        )
    return None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it passes ``limit`` bytes (nothing more is read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _with_request_id(send: Send, request_id: bytes) -> Send:
    """``send`` with the request's id as the ``x-request-id`` response header (as model calls have)."""

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id)]}
        await send(message)

    return sending


def _spec(ctx: Any) -> KeySpec | None:
    request = ctx.request
    spec: KeySpec | None = request.scope.get(SPEC_KEY) if request is not None else None
    return spec


def _progress_relay(ctx: Any) -> Any:
    """The callback that passes the server's ``notifications/progress`` on to the caller, under the
    caller's own progress token (None when the caller asked for no progress)."""
    meta = ctx.meta
    token = None
    if meta is not None:
        token = meta.get("progress_token", meta.get("progressToken"))  # (the SDK's TypedDict: python names)
    if token is None:
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.send_progress_notification(token, progress, total, message, related_request_id=ctx.request_id)

    return relay


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def _plain(
    send: Send, status: int, message: str, headers: dict[bytes, bytes], code: int = INVALID_REQUEST
) -> None:
    """A JSON-RPC error answered by the gateway before the SDK: its status, no id (none was read)."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers.items()],
        }
    )
    await send({"type": "http.response.body", "body": body})
