"""The router's answer for a static path, remembered: a dict lookup instead of Starlette's scan.

Starlette's ``Router`` tries every route's regex in order on each request (the dialect paths, the
models, health and admin routes: ~8 regex matches and child-scope dicts before a Gemini or a
console path; ~70 µs per request under cProfile, bench/README.md "second pass"). For a path
without parameters the answer never changes, so once Starlette's own scan has chosen a top-level
``Route`` for a (path, method) whose path is exactly that route's, the next request with the same
(path, method) goes straight to it, with the scope Starlette would have set (``router``, ``route``,
``endpoint``, ``path_params``). Anything else (paths with parameters, websockets, a wrong method, a
miss, a redirect) is still Starlette's scan. The index holds at most one entry per static route and
method.

``IndexedStarlette`` goes one step further for a remembered route whose endpoint is a bare ASGI
app of ours (the model calls, count-tokens, embeddings, stored objects: never a Starlette function
endpoint, which needs the exception middleware's scope): the request goes from the application's
``__call__`` straight to it, past Starlette's middleware (the server-error and exception
middleware and ``EdgeGuard``, each a call and a ``send`` wrapper per message: ~4 % of a whole
request's CPU, bench/README.md "third pass"). What those layers would do for it is done here:
``EdgeGuard``'s refusals (``edge.path_problem``, a WebSocket upgrade) send the request the long
way, where they answer it; the endpoints turn every error into an answer in the caller's dialect
themselves (``Relay.serve``), and a bug that escapes is uvicorn's 500, as it was the server-error
middleware's.
"""

from __future__ import annotations

from typing import Any, cast

from starlette._utils import get_route_path
from starlette.applications import Starlette
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from gateway.server.edge import path_problem, wants_websocket


class RouteIndex:
    """Installed as ``router.middleware_stack`` (what ``Router.__call__`` runs; no router middleware)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.scan = router.middleware_stack
        self.static = {id(r) for r in router.routes if type(r) is Route and not r.param_convertors}
        self.known: dict[tuple[str, str], Any] = {}
        router.middleware_stack = self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.scan(scope, receive, send)
            return
        path, method = get_route_path(scope), scope["method"]
        route = self.known.get((path, method))
        if route is None:
            await self.scan(scope, receive, send)
            route = scope.get("route")
            if (
                route is not None
                and id(route) in self.static
                and route.path == path
                and (route.methods is None or method in route.methods)
            ):
                self.known[(path, method)] = route
            return
        if "router" not in scope:
            scope["router"] = self.router
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = dict(scope.get("path_params", {}))
        await route.app(scope, receive, send)


def index_routes(router: Router) -> RouteIndex | None:
    """Put a ``RouteIndex`` in front of ``router``'s scan (a router with middleware keeps its scan)."""
    if router.middleware_stack == router.app:
        return RouteIndex(router)
    return None


class IndexedStarlette(Starlette):
    """A Starlette app that serves its remembered bare-ASGI routes from ``__call__`` (module doc)."""

    index: RouteIndex | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        index = self.index
        if index is not None and scope["type"] == "http":
            route = index.known.get((get_route_path(scope), scope["method"]))
            if route is not None and route.app is route.endpoint and _plain(scope):
                scope["app"] = self
                scope["router"] = index.router
                scope["route"] = route
                scope["endpoint"] = route.endpoint
                scope["path_params"] = {}
                await route.app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _plain(scope: Scope) -> bool:
    """Nothing ``EdgeGuard`` would refuse: no path trick, no WebSocket upgrade."""
    plain = cast("dict[str, Any]", scope)  # (gateway.asgi's Scope: the same mapping, typed as a dict)
    return path_problem(plain) is None and not wants_websocket(plain)
