"""``GET /ui`` (the console's page and its static files) and the admin endpoints only it needs.

The page is static: everything secret or live comes from the admin API, fetched with the admin key
the user typed (kept in ``sessionStorage``, sent as ``Authorization: Bearer``). The page itself and
its assets carry no secret, so they are served without the key, under a strict
Content-Security-Policy (no inline script or style, nothing from another origin).

Admin endpoints (the admin key as Bearer, 401 otherwise):

* ``GET /admin/inspector`` — the kept captures, newest first (summaries);
* ``GET /admin/inspector/{request_id}`` — one capture (``?download=1``: as an attachment;
  ``?side=upstream``: the upstream body as a ``captures/``-style replay file);
* ``GET /admin/console/requests?key=&model=&status=&request_id=&limit=`` — the recent request records:
  the store's log (every worker and replica), or this process's ring without a store, when the
  store fails, or with ``source=process``;
* ``GET /admin/console/info`` — what the console can show here (named keys or not, the route names);
* ``GET /admin/console/overview`` — the last hour's figures; ``/admin/console/live`` the same as
  an SSE stream (one ``overview`` event every ``interval`` seconds, 2 by default);
* ``GET /admin/console/buckets`` — this process's minute buckets (what another worker merges).

With ``--workers N`` the figures each process keeps (the overview's buckets, the inspector's ring)
are gathered from every worker by the one a request reached (gateway/telemetry/workers.py): the
overview and the inspector list are every worker's, each capture names its ``worker``, and
``workers`` says how many answered.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.endpoints.models import listed_models
from gateway.telemetry import workers
from gateway.telemetry.inspector import upstream_replay
from gateway.telemetry.recent import select

if TYPE_CHECKING:
    from gateway.relay.state import GatewayState

log = logging.getLogger("gateway.console")
STATIC = Path(__file__).parent / "static"
STORE_SCAN = 5000  # records of the store's log a filtered Requests view looks through
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}
ADMIN_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(body), status, media_type="application/json", headers={**ADMIN_HEADERS, **(headers or {})}
    )


def _assets() -> dict[str, tuple[bytes, str]]:
    """The static files, read once: only these names are served (no path from the URL reaches the disk)."""
    return {p.name: (p.read_bytes(), TYPES[p.suffix]) for p in STATIC.iterdir() if p.suffix in TYPES}


def console_routes(state: GatewayState) -> list[Route]:
    console = state.console
    assert console is not None  # built only with [admin] set, which is what makes the ring
    assets = _assets()
    admin_key = (state.settings.admin.resolved_key() or "").encode()
    worker = workers.current()

    async def from_siblings(request: Request, path: str) -> dict[int, Any]:
        """The other workers' JSON answers to ``path`` (none with one process, or when a sibling asks)."""
        if worker is None or workers.wants_local(request.scope):
            return {}
        answers = await workers.ask_siblings(worker, path, {"authorization": request.headers.get("authorization", "")})
        return {i: r.json() for i, r in answers.items() if r.status_code == 200}

    def answered(parts: dict[int, Any]) -> dict[str, Any]:
        if worker is None:
            return {}
        return {"workers": {"count": worker.count, "answered": sorted([worker.index, *parts])}}

    async def merged_overview(request: Request) -> dict[str, Any]:
        others = await from_siblings(request, "/admin/console/buckets")
        return {**console.overview([o["buckets"] for o in others.values()]), **answered(others)}

    def authorized(request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip().encode() if auth[:7].lower() == "bearer " else b""
        return bool(admin_key) and hmac.compare_digest(token, admin_key)

    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not authorized(request):
                return _json(
                    {
                        "error": {
                            "message": "the admin API needs the admin key as Authorization: Bearer",
                            "type": "authentication_error",
                        }
                    },
                    401,
                )
            response: Response = await handler(request)
            return response

        return endpoint

    async def page(request: Request) -> Response:
        body, kind = assets["index.html"]
        return Response(body, media_type=kind, headers=PAGE_HEADERS)

    async def static(request: Request) -> Response:
        found = assets.get(request.path_params["name"])
        if found is None or found[1].startswith("text/html"):
            return _json({"error": {"message": "no such console file", "type": "not_found_error"}}, 404)
        return Response(found[0], media_type=found[1], headers=PAGE_HEADERS)

    async def inspector_list(request: Request) -> Response:
        ins = state.inspector
        captures = ins.summaries()
        others = await from_siblings(request, "/admin/inspector")
        if worker is not None:
            captures = [{**c, "worker": worker.index} for c in captures]
            for answer in others.values():
                captures += answer["captures"]
            captures.sort(key=lambda c: -float(c.get("ts") or 0))
        return _json(
            {
                "capture": ins.mode if ins.mode != "sample" else f"sample:{ins.rate:g}",
                "max_requests": ins.max_requests,
                "captures": captures,
                **answered(others),
            }
        )

    async def inspector_one(request: Request) -> Response:
        rid = request.path_params["request_id"]
        capture = state.inspector.get(rid)
        if capture is not None and worker is not None:
            capture["worker"] = worker.index
        if capture is None:  # kept by another worker, perhaps
            found = await from_siblings(request, "/admin/inspector/" + quote(rid, safe=""))
            capture = next(iter(found.values()), None)
        if capture is None:
            return _json(
                {
                    "error": {
                        "message": f"no capture of request {rid!r} (not captured, or dropped from the ring)",
                        "type": "not_found_error",
                    }
                },
                404,
            )
        safe = "".join(c for c in rid if c.isalnum() or c in "-_")[:80] or "capture"
        if request.query_params.get("side") == "upstream":
            return Response(
                upstream_replay(capture),
                media_type="text/plain; charset=utf-8",
                headers={**ADMIN_HEADERS, "content-disposition": f'attachment; filename="{safe}.sse"'},
            )
        extra = (
            {"content-disposition": f'attachment; filename="{safe}.json"'}
            if request.query_params.get("download")
            else None
        )
        return _json(capture, headers=extra)

    async def recent(request: Request) -> Response:
        q = request.query_params
        try:
            limit = max(1, min(1000, int(q.get("limit", "200"))))
        except ValueError:
            return _json({"error": {"message": "limit must be an integer", "type": "invalid_request_error"}}, 400)
        filters = (q.get("key") or None, q.get("model") or None, q.get("status") or None, q.get("request_id") or None)
        if q.get("source") != "process" and state.stateful is not None:
            try:
                return _json({"source": "store", "requests": await _stored(limit, *filters)})
            except Exception:  # the store is out: this process's own records still answer
                log.warning(
                    "console: the store's request records are unavailable; showing this process's", exc_info=True
                )
        mine = {"worker": worker.index} if worker is not None else {}  # this worker's ring only
        return _json({"source": "process", **mine, "requests": console.latest(limit, *filters)})

    async def _stored(
        limit: int, key: str | None, model: str | None, status: str | None, request_id: str | None
    ) -> list[dict[str, Any]]:
        """The store's request log (``GET /admin/requests``'s: every worker and replica, detached
        generations once finished), filtered like the ring; a filter reads further back."""
        await state.ledger.flush()
        scan = limit if not (model or status or request_id) else STORE_SCAN
        stateful = state.stateful
        assert stateful is not None  # (asked only once the store is open)
        records = await stateful.store.recent_requests(key, scan)
        return select(records, limit, None, model, status, request_id)

    async def info(request: Request) -> Response:
        """What this gateway offers the console: named keys (the Keys page: always, the admin API can
        create them), the routes (the Playground: the models list's names, then the wildcard patterns
        as a hint of what else routes)."""
        listed = listed_models(state)
        patterns = [r.model for r in state.settings.routes if r.model not in listed]
        return _json(
            {"named_keys": True, "capture": state.inspector.mode, "models": [*listed, *dict.fromkeys(patterns)]}
        )

    async def overview(request: Request) -> Response:
        return _json(await merged_overview(request))

    async def buckets(request: Request) -> Response:
        return _json({"worker": worker.index if worker else 0, "buckets": console.export()})

    async def live(request: Request) -> Response:
        try:
            interval = max(0.2, float(request.query_params.get("interval", "2")))
        except ValueError:
            interval = 2.0

        async def events() -> Any:
            while not state.shutting_down:
                yield b"event: overview\ndata: " + orjson.dumps(await merged_overview(request)) + b"\n\n"
                await asyncio.sleep(interval)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={**ADMIN_HEADERS, "x-accel-buffering": "no"}
        )

    return [
        Route("/ui", page, methods=["GET"]),
        Route("/ui/", page, methods=["GET"]),
        Route("/ui/static/{name}", static, methods=["GET"]),
        Route("/admin/inspector", guarded(inspector_list), methods=["GET"]),
        Route("/admin/inspector/{request_id}", guarded(inspector_one), methods=["GET"]),
        Route("/admin/console/requests", guarded(recent), methods=["GET"]),
        Route("/admin/console/overview", guarded(overview), methods=["GET"]),
        Route("/admin/console/buckets", guarded(buckets), methods=["GET"]),
        Route("/admin/console/info", guarded(info), methods=["GET"]),
        Route("/admin/console/live", guarded(live), methods=["GET"]),
    ]
