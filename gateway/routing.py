"""Choosing among a route's targets: health (cooldowns), limits (rpm), balance, affinity.

``Routing`` is what ``attempts.open_upstream`` asks, for a route with ``targets``:

* ``plan`` — the pool's targets that are not cooling, in the strategy's order, a session's pinned
  target first while it is healthy; and, when some are cooling, how soon the first recovers.
* ``admit`` — take one request of a target's ``rpm`` (a shared per-minute counter), and check its
  ``tpm`` (tokens of the answers that ended this minute): a target at a limit is passed over,
  never called. Tokens are counted when an answer ends, so requests already running when the
  limit is reached may go past it by their own size.
* ``failed`` — a failure before the first byte cools the target for ``cooldown_seconds`` or its
  ``Retry-After`` when longer; cooldowns only grow (``SharedState.cool``).
* ``started`` / ``ended`` — one more / one fewer in flight (``least_busy``), and at the end the
  answer's tokens counted against the target's ``tpm``.
* ``served`` — pin the session to the target that answered (it stays there while healthy; after a
  failure it moves once, and stays on the new one), and feed the latency EWMA.
* ``chain`` — a stored answer's new id pinned to that target too, for a conversation known only by
  ``previous_response_id`` / ``previous_interaction_id``.

All shared state goes through ``SharedState`` (the ``[store]``: Redis across replicas, process
memory otherwise); in-flight counts are written only for ``least_busy``, pins only with affinity,
so a weighted route without affinity costs one read (the cooldowns) per request.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.affinity import pin_key, session_of
from gateway.balance import Latency, order
from gateway.events import Usage
from gateway.ir import ChatRequest
from gateway.router import Resolved, Target
from gateway.store.shared import LocalShared, SharedState

IN_FLIGHT_TTL = 3600.0  # a replica that dies mid-stream leaves its count; it fades after this


@dataclass(slots=True)
class Plan:
    candidates: list[Target]  # healthy targets, in the order to try them
    recovery: float | None  # seconds until the first cooling target recovers (None: none cooling)
    session: str | None  # the affinity pin key, when the route has affinity and a session
    pinned: str | None  # the target key the session was pinned to


class RoutingMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.selected = Counter("gateway_target_selected", "Attempts sent to a route's target", ["route", "target"], registry=registry)
        self.failed = Counter("gateway_target_failed", "A route's target failing before the first byte", ["route", "target", "kind"], registry=registry)
        self.cooling = Counter("gateway_target_cooling", "Requests that passed over a cooling (or rpm/tpm-limited) target", ["route", "target", "reason"], registry=registry)
        self.cooldown = Gauge("gateway_target_cooldown_seconds", "Cooldown left on a route's target, as this replica last saw it", ["route", "target"], registry=registry)


class _Route:
    """What routing precomputes once per route: the pool, its store keys, its metric children."""

    __slots__ = ("pool", "keys", "busy", "selected", "skipped", "failed", "cooldown", "cooling_seen")

    def __init__(self, resolved: Resolved, metrics: RoutingMetrics) -> None:
        self.pool = resolved.targets[: resolved.pool]
        self.keys = [t.key for t in self.pool]
        self.busy = ["busy:" + k for k in self.keys]
        self.selected = {k: metrics.selected.labels(resolved.route, k) for k in self.keys}
        self.skipped = {k: metrics.cooling.labels(resolved.route, k, "cooling") for k in self.keys}
        self.failed = metrics.failed
        self.cooldown = {k: metrics.cooldown.labels(resolved.route, k) for k in self.keys}
        self.cooling_seen = False  # the gauges show a cooldown: refresh them until none is left


class Routing:
    def __init__(self, shared: SharedState | None = None, registry: CollectorRegistry | None = None, rng: random.Random | None = None) -> None:
        self.shared = shared or LocalShared()
        self.latency = Latency()
        self.rng = rng or random.Random()
        self.metrics = RoutingMetrics(registry if registry is not None else CollectorRegistry())
        self._routes: dict[int, tuple[Resolved, _Route]] = {}

    def _route(self, resolved: Resolved) -> _Route:
        item = self._routes.get(id(resolved))
        if item is None or item[0] is not resolved:  # (the router caches Resolved: this is once per route)
            item = (resolved, _Route(resolved, self.metrics))
            if len(self._routes) < 4096:
                self._routes[id(resolved)] = item
        return item[1]

    async def plan(self, req: ChatRequest, resolved: Resolved, exclude: set[str]) -> Plan:
        route = self._route(resolved)
        session = None
        if resolved.affinity == "session":
            sid = session_of(req)
            if sid is not None:
                session = pin_key(resolved.route, sid)
        least_busy = resolved.strategy == "least_busy" and len(route.pool) > 1
        left, busy, pinned = await self.shared.snapshot(route.keys, route.busy if least_busy else (), session, resolved.affinity_ttl)
        recovery = None
        in_flight: list[int] | None = None
        cooling = any(left)
        if cooling or route.cooling_seen:
            route.cooling_seen = cooling
            for key, s in zip(route.keys, left):
                route.cooldown[key].set(s)
        if exclude or cooling:
            healthy = []
            in_flight = [] if least_busy else None
            for i, (t, s) in enumerate(zip(route.pool, left)):
                if s > 0:
                    route.skipped[t.key].inc()
                    recovery = s if recovery is None or s < recovery else recovery
                elif t.key not in exclude:
                    healthy.append(t)
                    if in_flight is not None:
                        in_flight.append(busy[i])
        else:
            healthy = list(route.pool)
            in_flight = busy if least_busy else None
        ordered = order(resolved.strategy, healthy, in_flight, self.latency, self.rng)
        if pinned is not None and ordered and ordered[0].key != pinned:
            first = next((t for t in ordered if t.key == pinned), None)
            if first is not None:
                ordered.remove(first)
                ordered.insert(0, first)
        return Plan(ordered, recovery, session, pinned)

    async def admit(self, resolved: Resolved, target: Target) -> bool:
        """Count one request against the target's rpm; False when it is at its rpm limit this
        minute, or its tokens this minute (counted as answers end, ``ended``) reached its tpm."""
        minute = int(time.time() // 60)
        if target.tpm is not None:
            (tokens,) = await self.shared.counts([f"tpm:{target.key}:{minute}"])
            if tokens >= target.tpm:
                self.metrics.cooling.labels(resolved.route, target.key, "tpm").inc()
                return False
        if target.rpm is None:
            return True
        used = await self.shared.add(f"rpm:{target.key}:{minute}", 1, 120.0)
        if used > target.rpm:
            self.metrics.cooling.labels(resolved.route, target.key, "rpm").inc()
            return False
        return True

    async def started(self, resolved: Resolved, target: Target) -> None:
        self._route(resolved).selected[target.key].inc()
        if resolved.strategy == "least_busy":
            await self.shared.add("busy:" + target.key, 1, IN_FLIGHT_TTL)

    async def ended(self, resolved: Resolved, target: Target, usage: Usage | None = None) -> None:
        """The attempt failed, or the answer it opened was closed: one fewer in flight, and its
        tokens (input + output, as the upstream reported them) count against the target's tpm."""
        if resolved.strategy == "least_busy":
            await self.shared.add("busy:" + target.key, -1, IN_FLIGHT_TTL)
        if target.tpm is not None and usage is not None:
            tokens = (usage.input or 0) + (usage.output or 0)
            if tokens:
                await self.shared.add(f"tpm:{target.key}:{int(time.time() // 60)}", tokens, 120.0)

    async def failed(self, resolved: Resolved, target: Target, kind: str, retry_after: float | None) -> None:
        self.metrics.failed.labels(resolved.route, target.key, kind).inc()
        seconds = max(resolved.cooldown, retry_after or 0.0)
        if seconds > 0:
            left = await self.shared.cool(target.key, seconds)
            route = self._route(resolved)
            route.cooldown[target.key].set(left)
            route.cooling_seen = True

    async def served(self, resolved: Resolved, target: Target, plan: Plan, first_token_seconds: float) -> None:
        self.latency.observe(target.key, first_token_seconds)
        if plan.session is not None and plan.pinned != target.key:
            await self.shared.pin(plan.session, target.key, resolved.affinity_ttl)

    async def chain(self, req: ChatRequest, resolved: Resolved, target: Target, new_id: str | None) -> None:
        """A stored answer's id will be the next turn's ``previous_response_id`` /
        ``previous_interaction_id``: when that is how this conversation is known (no
        ``x-session-id``, no user), pin the new id to the target that answered, so the next turn
        follows this one."""
        if not resolved.balanced or resolved.affinity != "session" or new_id is None:
            return
        sid = session_of(req)
        if sid is None or sid.startswith("p:"):
            await self.shared.pin(pin_key(resolved.route, "p:" + new_id), target.key, resolved.affinity_ttl)

    async def cooling(self, targets: Sequence[Target]) -> list[float]:
        return await self.shared.cooling([t.key for t in targets])
