"""``create_app(settings)``: the Starlette application and its route table.

Model endpoints are plain ASGI callables (``DialectEndpoint``) so the relay sees ``http.disconnect``
directly; the small JSON endpoints (models, health, metrics) are ordinary Starlette functions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import cast
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from gateway.asgi import Receive, Scope, Send, headers_dict, send_json
from gateway.dialects.base import ModelAction, RequestMeta
from gateway.dialects.registry import available, caller_dialects, codec_for
from gateway.endpoints.models import ModelsEndpoints
from gateway.errors import GatewayError
from gateway.governance.auth import Authenticator
from gateway.governance.keys import REFRESH_SECONDS, KeyRing
from gateway.governance.ledger import Ledger
from gateway.governance.limits import Limiter
from gateway.governance.prices import PriceBook
from gateway.guardrails.engine import Guardrails
from gateway.platforms import check_platforms
from gateway.relay.pipeline import Relay
from gateway.relay.state import GatewayState
from gateway.relay.stateful import Stateful
from gateway.routing.router import Router
from gateway.routing.targets import Routing
from gateway.server.edge import EdgeGuard, error_response, scope_dialect
from gateway.server.route_index import IndexedStarlette, index_routes
from gateway.settings import Settings
from gateway.store import Store, open_store
from gateway.telemetry import workers
from gateway.telemetry.inspector import from_settings
from gateway.telemetry.loop_lag import sample_loop_lag
from gateway.telemetry.observe import Observer
from gateway.telemetry.recent import Recent
from gateway.telemetry.setup import telemetry_from_settings
from gateway.upstream.providers import Provider

log = logging.getLogger("gateway")


class DialectEndpoint:
    """ASGI endpoint for one dialect's model call (POST)."""

    def __init__(self, relay: Relay, dialect: str, stream: bool | None = None) -> None:
        self.relay = relay
        self.dialect = dialect
        self.stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_query = scope.get("query_string", b"")
        query = dict(parse_qsl(raw_query.decode("latin-1"))) if raw_query else {}
        meta = RequestMeta(query=query, headers=headers_dict(scope), stream=self.stream)
        await self.relay.serve(self.dialect, scope, receive, send, meta)


class ModelActionEndpoint:
    """``/{version}/models/{model}:{action}`` (Gemini): the action after the colon picks the
    behaviour, from the route's ``actions`` (declared by the codec)."""

    def __init__(self, relay: Relay, dialect: str, actions: tuple[ModelAction, ...]) -> None:
        self.relay = relay
        self.dialect = dialect
        self.actions = {a.name: a for a in actions}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = scope["path_params"]["target"]
        model, _, name = target.rpartition(":")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        action = self.actions.get(name)
        if action is not None and action.kind == "call":
            meta = RequestMeta(path_model=model, query=query, headers=headers_dict(scope), stream=action.stream)
            await self.relay.serve(self.dialect, scope, receive, send, meta)
            return
        if action is not None and action.kind == "embed":
            from gateway.endpoints.embeddings import serve_gemini

            meta = RequestMeta(path_model=model, query=query, headers=headers_dict(scope))
            await serve_gemini(self.relay.state, name, scope, receive, send, meta)
            return
        if action is not None:
            from gateway.endpoints.count_tokens import serve_count

            await serve_count(
                self.relay.state,
                self.dialect,
                scope,
                receive,
                send,
                RequestMeta(path_model=model, query=query, headers=headers_dict(scope)),
            )
            return
        *first, last = self.actions
        err = GatewayError("not_found", f"unknown method {name!r}: use {', '.join(first)} or {last}", 404)
        status, body = codec_for(self.dialect).render_error(err)
        await send_json(send, status, body)


def dialect_routes(state: GatewayState, relay: Relay) -> list[Route]:
    """Every caller dialect's paths, as its codec declares them (``Codec.routes``)."""
    from gateway.endpoints.count_tokens import CountEndpoint
    from gateway.endpoints.embeddings import EmbedEndpoint
    from gateway.endpoints.stored import StoredEndpoint

    routes = []
    for dialect in caller_dialects():
        for r in codec_for(dialect).routes:
            endpoint: Callable[[Scope, Receive, Send], Awaitable[None]]
            if r.kind == "call":
                endpoint = DialectEndpoint(relay, dialect)
            elif r.kind == "count":
                endpoint = CountEndpoint(state, dialect)
            elif r.kind == "stored":
                endpoint = StoredEndpoint(state, dialect)
            elif r.kind == "embed":
                endpoint = EmbedEndpoint(state, dialect)
            else:
                endpoint = ModelActionEndpoint(relay, dialect, r.actions)
            routes.append(Route(r.path, endpoint, methods=list(r.methods)))
    return routes


def build_routes(state: GatewayState, relay: Relay) -> list[BaseRoute]:
    models = ModelsEndpoints(state)

    worker = workers.current()
    health = {"status": "ok"} if worker is None else {"status": "ok", "worker": worker.index}  # which one answered

    async def healthz(request: Request) -> Response:
        return JSONResponse(health)

    async def readyz(request: Request) -> Response:
        problems = [p.name for p in state.providers.values() if p.pool is None]
        if problems or state.shutting_down:
            return JSONResponse(
                {"status": "not ready", "providers_not_started": problems, "shutting_down": state.shutting_down}, 503
            )
        ready: dict[str, object] = {
            "status": "ready",
            "providers": sorted(state.providers),
            "routes": len(state.settings.routes),
        }
        if state.mcp is not None:  # each MCP server up or not (a down one only hides its tools)
            ready["mcp_servers"] = state.mcp.status()
        return JSONResponse(ready)

    async def metrics(request: Request) -> Response:
        body = await workers.all_metrics(worker, request.scope, state.observer.metrics.render())
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    console_routes = []
    if state.console is not None:
        from gateway.console.routes import console_routes as make_console_routes

        console_routes = make_console_routes(state)
    admin_key = state.settings.admin.resolved_key()
    admin_routes = []
    if admin_key:
        from gateway.endpoints.admin import Admin

        admin_routes = Admin(state, admin_key).routes()
    routes: list[BaseRoute] = [
        *dialect_routes(state, relay),
        Route("/v1/models", models.list, methods=["GET"]),
        Route("/models", models.list, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *console_routes,
        *admin_routes,
    ]
    if state.settings.websocket.enabled:  # Responses over WebSocket (websocket.py): each turn is the POST's
        from gateway.server.websocket import ResponsesSocket

        routes.append(
            WebSocketRoute("/v1/responses", ResponsesSocket(relay, DialectEndpoint(relay, "openai-responses")))
        )
    if state.mcp is not None:
        routes.append(Route("/mcp", state.mcp, methods=["GET", "POST", "DELETE"]))
    routes.append(Route("/v1beta/models", models.list, methods=["GET"]))
    routes.append(Route("/v1beta/models/{target:path}", models.get, methods=["GET"]))
    routes.append(Route("/v1/models/{target:path}", models.get, methods=["GET"]))
    routes.append(Route("/models/{target:path}", models.get, methods=["GET"]))
    return routes


def create_state(settings: Settings) -> GatewayState:
    """Everything a running gateway holds, before the store is open (see ``create_app``'s lifespan)."""
    check_platforms(settings)  # settings complete, each platform's extra installed: fail now, naming it
    providers = {p.name: Provider(p) for p in settings.providers}
    observer = Observer(enabled=settings.server.access_log)
    keys = settings.auth.resolved_keys()
    keys_ring = KeyRing(settings.keys)
    ledger = Ledger(PriceBook(settings.prices, settings.spend.price_database), providers, keys_ring, observer.metrics)
    observer.ledger = ledger
    console = Recent() if settings.admin.resolved_key() else None
    state = GatewayState(
        settings,
        Router(settings),
        providers,
        keys,
        observer,
        keys_ring=keys_ring,
        auth=Authenticator(keys, keys_ring),
        ledger=ledger,
        limiter=Limiter(settings.spend, observer.metrics, ledger.prices, providers),
        routing=Routing(
            registry=observer.metrics.registry,
            reserve_output=settings.spend.reserve_output_tokens,
            lease_seconds=settings.spend.lease_seconds,
        ),
        inspector=from_settings(settings),
        telemetry=telemetry_from_settings(settings, observer.metrics.registry),
        console=console,
        fast_path=settings.server.fast_path,
        guardrails=Guardrails(settings) if settings.guardrails else None,
    )
    if settings.mcp_servers:
        from gateway.mcp.endpoint import McpGateway

        state.mcp = McpGateway(state)
    observer.metrics.upstream_open.set_function(lambda: sum(p.gauge.open for p in providers.values()))
    for provider in providers.values():
        observer.metrics.upstream_pooled.labels(provider.name).set_function(_pooled(provider))
    return state


def _pooled(provider: Provider) -> Callable[[], float]:
    """The pool gauge's reading for ``provider``: its open sockets, 0 before it started."""
    return lambda: provider.pool.open_connections if provider.pool else 0


def create_app(settings: Settings) -> Starlette:
    state = create_state(settings)
    relay = Relay(state)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        for provider in state.providers.values():
            provider.start()
        available()  # import every codec now, not on the first request that needs it
        store = open_store(settings.store.url, settings.store.ttl_hours * 3600, password=settings.store.password())
        store.requests_kept = settings.spend.requests_kept
        state.ledger.prices.warm()
        stateful = state.stateful = Stateful(settings, store)
        state.ledger.store = state.limiter.store = state.auth.store = store
        try:
            await state.keys_ring.refresh(store)
        except Exception:
            log.exception("could not read the key records from the store; retrying in the background")
        refresher = asyncio.create_task(_refresh_keys(state, store))
        lag = asyncio.create_task(sample_loop_lag(state.observer.metrics.loop_lag))
        state.routing.shared = store.shared()  # cooldowns and pins every replica on this store sees
        state.routing.counters = store  # and the targets' rpm/tpm, on the key limits' counters
        if settings.cache.enabled:
            from gateway.relay.cache import ResponseCache

            state.cache = ResponseCache(settings.cache, store, state.observer.metrics)
        if state.mcp is not None:
            await state.mcp.start()  # the MCP servers connected (or down, within a bound) before serving
        try:
            yield
        finally:
            refresher.cancel()
            lag.cancel()
            state.shutting_down = True
            if state.mcp is not None:
                await state.mcp.stop()  # stdio servers stopped, sessions closed
            await stateful.shutdown()  # running generations end in-dialect and keep their usage
            for provider in state.providers.values():
                await provider.close()
            if state.guardrails is not None:
                await state.guardrails.aclose()  # the webhooks' HTTP clients
            await state.ledger.flush()
            await store.close()
            if state.telemetry is not None:
                await asyncio.to_thread(state.telemetry.shutdown)  # bounded by [telemetry] shutdown_seconds
            state.observer.stop()

    app = IndexedStarlette(routes=build_routes(state, relay), lifespan=lifespan)
    # a static path's route found by one dict lookup, a model call's served past the middleware (route_index.py)
    app.index = index_routes(app.router)
    app.state.gateway = state

    async def not_found(request: Request, exc: Exception) -> Response:
        err = GatewayError("not_found", f"no route for {request.method} {request.url.path}", 404)
        return _edge_response(request, err)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        allow = (getattr(exc, "headers", None) or {}).get("Allow", "")
        err = GatewayError(
            "invalid_request",
            f"{request.method} is not allowed on {request.url.path}" + (f": use {allow}" if allow else ""),
            405,
        )
        return _edge_response(request, err, {"Allow": allow} if allow else None)

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, method_not_allowed)
    ws_paths = frozenset({"/v1/responses"}) if settings.websocket.enabled else frozenset()
    app.add_middleware(EdgeGuard, websocket_paths=ws_paths)  # path tricks and WebSocket handshakes (edge.py)
    return app


async def _refresh_keys(state: GatewayState, store: Store) -> None:
    """Reload the admin API's key records when they change (revocations hold within a second)."""
    failing = False
    while True:
        await asyncio.sleep(REFRESH_SECONDS)
        try:
            await state.keys_ring.refresh(store)
            failing = False
        except Exception as exc:
            if not failing:
                log.error("cannot read key records from the store (%s); keys stay as last read", type(exc).__name__)
            failing = True


def _edge_response(request: Request, err: GatewayError, headers: dict[str, str] | None = None) -> Response:
    """An unknown path or method answered in the error shape of the dialect the request suggests."""
    status, payload = error_response(
        scope_dialect(cast("Scope", request.scope)), err
    )  # (Starlette types it a MutableMapping; it is the ASGI dict)
    return Response(payload, status, headers=headers, media_type="application/json")


async def end_live_streams(state: GatewayState, grace: float) -> None:
    """Graceful shutdown: give in-flight streams ``grace`` seconds, then end them in-dialect."""
    state.shutting_down = True
    deadline = time.monotonic() + grace
    while state.live_streams and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for task in list(state.live_streams):
        task.cancel()
