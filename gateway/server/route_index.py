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
"""

from __future__ import annotations

from typing import Any

from starlette._utils import get_route_path
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send


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


def index_routes(router: Router) -> None:
    """Put a ``RouteIndex`` in front of ``router``'s scan (a router with middleware keeps its scan)."""
    if router.middleware_stack == router.app:
        RouteIndex(router)
