"""The admin API (CONTRACT.md "Named keys, prices, spend, budgets and limits"): keys, spend, requests.

Plain JSON in and out, for scripts and the web console: the admin key as ``Authorization: Bearer``
(401 otherwise); errors as ``{"error": {"message", "type"}}``. Mounted only when ``[admin]`` names
a key. Money is in USD (floats rounded to 1e-9, the ledger's unit); times are ISO 8601 UTC.

* ``POST /admin/keys`` creates a key; the secret is in this one answer only (the store keeps its
  SHA-256). ``GET /admin/keys[/{name}]`` lists settings and the current period's spend;
  ``PATCH`` changes limits (``null`` clears one); ``DELETE`` revokes (the next request is a 401 on
  every replica within a second).
* ``GET /admin/spend?group_by=key|model|provider|route|day&from=ISO&to=ISO&key=NAME`` sums the
  hourly spend buckets whose hour starts in ``[from, to)`` (default: the current calendar month).
  ``model`` is the upstream model that answered; requests without a named key have key ``null``.
* ``GET /admin/requests?key=NAME&limit=N`` the newest request records (the access-log fields).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.governance.keys import hash_key, new_secret, parse_time, validate_limits
from gateway.governance.periods import period_bounds
from gateway.governance.prices import NANO
from gateway.settings import check_name
from gateway.store.counters import SPEND_FIELDS

if TYPE_CHECKING:
    from gateway.governance.keys import KeySpec
    from gateway.relay.state import GatewayState

Handler = Callable[[Request], Awaitable[Response]]

GROUPS = ("key", "model", "provider", "route", "day")


class AdminError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type="application/json")


def _usd(nano: int) -> float:
    return round(nano / NANO, 9)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Admin:
    def __init__(self, state: GatewayState, admin_key: str) -> None:
        self.state = state
        self._key = admin_key.encode()

    def routes(self) -> list[Route]:
        return [
            Route("/admin/keys", self._wrap(self.create_key), methods=["POST"]),
            Route("/admin/keys", self._wrap(self.list_keys), methods=["GET"]),
            Route("/admin/keys/{name}", self._wrap(self.get_key), methods=["GET"]),
            Route("/admin/keys/{name}", self._wrap(self.patch_key), methods=["PATCH"]),
            Route("/admin/keys/{name}", self._wrap(self.delete_key), methods=["DELETE"]),
            Route("/admin/spend", self._wrap(self.spend), methods=["GET"]),
            Route("/admin/requests", self._wrap(self.requests), methods=["GET"]),
        ]

    def _wrap(self, handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            auth = request.headers.get("authorization", "")
            token = auth[7:].strip().encode() if auth[:7].lower() == "bearer " else b""
            if not hmac.compare_digest(token, self._key):
                return _json(
                    {
                        "error": {
                            "message": "the admin API needs the admin key as Authorization: Bearer",
                            "type": "authentication_error",
                        }
                    },
                    401,
                )
            if self.state.stateful is None:
                return _json({"error": {"message": "the store is not open yet", "type": "unavailable"}}, 503)
            try:
                return await handler(request)
            except AdminError as err:
                return _json({"error": {"message": err.message, "type": err.kind}}, err.status)
            except (ConnectionError, OSError, TimeoutError) as exc:
                return _json(
                    {"error": {"message": f"the store is unreachable ({type(exc).__name__})", "type": "unavailable"}},
                    503,
                )
            except Exception as exc:
                if type(exc).__module__.startswith("redis"):
                    return _json(
                        {
                            "error": {
                                "message": f"the store is unreachable ({type(exc).__name__})",
                                "type": "unavailable",
                            }
                        },
                        503,
                    )
                raise

        return endpoint

    @property
    def store(self) -> Any:
        stateful = self.state.stateful
        assert stateful is not None  # the handlers answer 503 before this while the store is not open
        return stateful.store

    async def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            raise AdminError(400, "the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise AdminError(400, "the body must be a JSON object")
        return body

    async def _reload(self) -> None:
        await self.state.keys_ring.refresh(self.store)

    def _spec(self, name: str) -> KeySpec:
        spec: KeySpec | None = self.state.keys_ring.by_name.get(name)
        if spec is None:
            raise AdminError(404, f"no key named {name!r}", "not_found_error")
        return spec

    async def _view(self, spec: KeySpec) -> dict[str, Any]:
        view = spec.public()
        view["created_at"] = _iso(spec.created_at) if spec.created_at else None
        if spec.budget_usd is not None:
            period, start, end = period_bounds(spec.budget_period, time.time())
        else:
            period, start, end = "total", None, None
        spent, held = await self.store.budget_state(spec.name, period)
        if spec.budget_usd is None:
            # no budget: nothing is held against a period, so the spend is the ledger's, all time
            # (the same hourly buckets /admin/spend sums; the caller flushed the ledger)
            spent = await self._all_time_cost(spec.name)
        view["spend"] = {
            "period": period,
            "period_start": _iso(start) if start is not None else None,
            "period_end": _iso(end) if end is not None else None,
            "spent_usd": _usd(spent),
            "held_usd": _usd(held),
            "remaining_usd": None if spec.budget_usd is None else round(spec.budget_usd - spent / NANO, 9),
        }
        return view

    async def _all_time_cost(self, name: str) -> int:
        cost = SPEND_FIELDS.index("cost_nano")
        rows = await self.store.spend_buckets(0, int(time.time() // 3600) + 2, name)
        return sum(int(row[5 + cost]) for row in rows)

    async def create_key(self, request: Request) -> Response:
        body = await self._body(request)
        try:
            name = check_name(body.get("name"))
            fields = validate_limits(body, partial=False)
        except ValueError as exc:
            raise AdminError(400, str(exc)) from None
        await self._reload()
        existing = self.state.keys_ring.by_name.get(name)
        if existing is not None and not existing.revoked:
            raise AdminError(409, f"a key named {name!r} exists: PATCH it, or DELETE it first", "conflict_error")
        secret = new_secret()
        record = {**fields, "sha256": hash_key(secret), "created_at": time.time(), "revoked": False}
        await self.store.put_key_record(name, record)
        await self._reload()
        view = await self._view(self._spec(name))
        return _json({"name": name, "key": secret, **{k: v for k, v in view.items() if k != "name"}}, 201)

    async def list_keys(self, request: Request) -> Response:
        await self._reload()
        await self.state.ledger.flush()  # the spend shown is /admin/spend's, requests just answered included
        specs = sorted(self.state.keys_ring.by_name.values(), key=lambda s: s.name)
        return _json({"keys": [await self._view(s) for s in specs]})

    async def get_key(self, request: Request) -> Response:
        await self._reload()
        await self.state.ledger.flush()
        return _json(await self._view(self._spec(request.path_params["name"])))

    async def patch_key(self, request: Request) -> Response:
        name = request.path_params["name"]
        body = await self._body(request)
        try:
            fields = validate_limits(body, partial=True)
        except ValueError as exc:
            raise AdminError(400, str(exc)) from None
        await self._reload()
        self._spec(name)
        record = (await self.store.key_records()).get(name, {})
        await self.store.put_key_record(name, {**record, **fields})
        await self._reload()
        return _json(await self._view(self._spec(name)))

    async def delete_key(self, request: Request) -> Response:
        name = request.path_params["name"]
        await self._reload()
        self._spec(name)
        record = (await self.store.key_records()).get(name, {})
        await self.store.put_key_record(name, {**record, "revoked": True, "revoked_at": time.time()})
        await self._reload()
        return _json({"name": name, "revoked": True})

    async def spend(self, request: Request) -> Response:
        q = request.query_params
        group_by = q.get("group_by", "key")
        if group_by not in GROUPS:
            raise AdminError(400, f"group_by must be one of {', '.join(GROUPS)}")
        try:
            start = parse_time(q.get("from")) if q.get("from") else period_bounds("month", time.time())[1]
            end = parse_time(q.get("to")) if q.get("to") else time.time() + 3600
        except ValueError:
            raise AdminError(400, "from and to must be ISO 8601 times such as 2026-12-01T00:00:00Z") from None
        assert start is not None and end is not None
        await self.state.ledger.flush()
        start_hour = int(start // 3600) + (1 if start % 3600 else 0)
        end_hour = int(end // 3600) + (1 if end % 3600 else 0)
        buckets = await self.store.spend_buckets(start_hour, end_hour, q.get("key"))
        index = {"key": 1, "model": 2, "provider": 3, "route": 4}
        groups: dict[Any, list[int]] = {}
        total = [0] * len(SPEND_FIELDS)
        for row in buckets:
            if group_by == "day":
                group: Any = datetime.fromtimestamp(row[0] * 3600, UTC).strftime("%Y-%m-%d")
            else:
                group = row[index[group_by]] or None
            acc = groups.setdefault(group, [0] * len(SPEND_FIELDS))
            for i, value in enumerate(row[5:]):
                acc[i] += value
                total[i] += value
        rows = [
            {"group": g, **_measures(v)} for g, v in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
        ]
        return _json(
            {
                "group_by": group_by,
                "from": _iso(start_hour * 3600),
                "to": _iso(end_hour * 3600),
                "rows": rows,
                "total": _measures(total),
            }
        )

    async def requests(self, request: Request) -> Response:
        q = request.query_params
        limit = q.get("limit", "100")
        if not limit.isdigit() or not 1 <= int(limit) <= 10000:
            raise AdminError(400, "limit must be a whole number from 1 to 10000")
        await self.state.ledger.flush()
        records = await self.store.recent_requests(q.get("key"), int(limit))
        return _json({"requests": records})


def _measures(values: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in zip(SPEND_FIELDS, values):
        if name == "cost_nano":
            out["cost_usd"] = _usd(value)
        else:
            out[name] = value
    return {
        k: out[k]
        for k in (
            "requests",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "cost_usd",
            "unpriced_requests",
        )
    }
