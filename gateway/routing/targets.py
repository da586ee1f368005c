"""Choosing among a route's targets: health (cooldowns), limits (rpm/tpm), balance, affinity.

``Routing`` is what ``attempts.open_upstream`` asks, for a route with ``targets``:

* ``plan`` — the pool's targets that are not cooling, in the strategy's order, a session's pinned
  target first while it is healthy; and, when some are cooling, how soon the first recovers.
* ``admit`` — hold one request of a target's ``rpm`` and, for its ``tpm``, the request's tokens
  reserved up front as a named key's are (the input estimate plus ``max_tokens``, at most
  ``[spend] reserve_output_tokens``): a target whose limit that would pass is passed over, never
  called. Both are the key limits' own sliding-window counters (``Store.reserve``, one atomic
  step: a Lua script on Redis, one transaction on SQLite), kept under the name ``@<target>``
  (``@`` cannot begin a key name), so "N a minute across replicas" has one implementation.
* ``failed`` — a failure before the first byte cools the target for ``cooldown_seconds`` or its
  ``Retry-After`` when longer; cooldowns only grow (``SharedState.cool``).
* ``started`` / ``ended`` — one more / one fewer in flight (``least_busy``), and at the end the
  hold settled: the reservation replaced by the tokens the upstream reported (``Store.settle``).
* ``served`` — pin the session to the target that answered (it stays there while healthy; after a
  failure it moves once, and stays on the new one), and feed the latency EWMA.
* ``chain`` — a stored answer's new id pinned to that target too, for a conversation known only by
  ``previous_response_id`` / ``previous_interaction_id``.

Cooldowns, in-flight counts and pins go through ``SharedState`` (the ``[store]``: Redis across
replicas, process memory otherwise); in-flight counts are written only for ``least_busy``, pins
only with affinity, so a weighted route without affinity or limits costs one read (the cooldowns)
per request; a target with rpm/tpm adds one reserve and one settle.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.events import Usage
from gateway.ir import ChatRequest
from gateway.routing.affinity import pin_key, session_of
from gateway.routing.balance import Latency, order
from gateway.routing.router import Resolved, Target
from gateway.store.counters import Ask, Hold, Settlement
from gateway.store.memory_counters import MemoryCounters
from gateway.store.shared import LocalShared, SharedState
from gateway.token_estimate import estimate_tokens

IN_FLIGHT_TTL = 3600.0  # a replica that dies mid-stream leaves its count; it fades after this


@dataclass(slots=True)
class Plan:
    candidates: list[Target]  # healthy targets, in the order to try them
    recovery: float | None  # seconds until the first cooling target recovers (None: none cooling)
    session: str | None  # the affinity pin key, when the route has affinity and a session
    pinned: str | None  # the target key the session was pinned to
    limited: float | None = None  # seconds until the first target passed over for its rpm/tpm has room


class RoutingMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.selected = Counter(
            "gateway_target_selected", "Attempts sent to a route's target", ["route", "target"], registry=registry
        )
        self.failed = Counter(
            "gateway_target_failed",
            "A route's target failing before the first byte",
            ["route", "target", "kind"],
            registry=registry,
        )
        self.cooling = Counter(
            "gateway_target_cooling",
            "Requests that passed over a cooling (or rpm/tpm-limited) target",
            ["route", "target", "reason"],
            registry=registry,
        )
        self.cooldown = Gauge(
            "gateway_target_cooldown_seconds",
            "Cooldown left on a route's target, as this replica last saw it",
            ["route", "target"],
            registry=registry,
        )


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
    def __init__(
        self,
        shared: SharedState | None = None,
        registry: CollectorRegistry | None = None,
        rng: random.Random | None = None,
        reserve_output: int = 4096,
        lease_seconds: float = 3900.0,
    ) -> None:
        self.shared = shared or LocalShared()
        self.latency = Latency()
        self.rng = rng or random.Random()
        self.metrics = RoutingMetrics(registry if registry is not None else CollectorRegistry())
        self._routes: dict[int, tuple[Resolved, _Route]] = {}
        # the target limits' counters: the [store] once it opens (app lifespan), this process otherwise
        self.counters: Any = None
        self._local = MemoryCounters(requests_kept=0)
        self.reserve_output = reserve_output  # [spend] reserve_output_tokens: the tpm reservation's output cap
        self.lease_seconds = lease_seconds  # a hold of a replica that died is released after this
        self._lease_prefix = os.urandom(6).hex() + ":"
        self._leases = 0

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
        left, busy, pinned = await self.shared.snapshot(
            route.keys, route.busy if least_busy else (), session, resolved.affinity_ttl
        )
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

    async def admit(
        self, resolved: Resolved, target: Target, req: ChatRequest, plan: Plan | None = None, tokens: int | None = None
    ) -> Hold | bool:
        """Hold one request of the target's rpm and the request's reserved tokens of its tpm: the
        hold to settle in ``ended`` (True: the target has no limits, nothing held), or False when
        the target is at a limit for now (the caller passes it over; ``plan.limited`` then says
        how soon the first such target has room: the sliding window's own answer, the 429's
        ``Retry-After`` when every target is at a limit)."""
        if target.rpm is None and target.tpm is None:
            return True
        if target.tpm is None:
            tokens = 0
        else:
            # at most the whole tpm: a reservation larger than a minute's allowance still goes to an
            # idle target (else a target with a small tpm would never be used), and fills it
            # (``tokens``: the caller's own reservation, an embeddings request's input estimate)
            wanted = (
                estimate_tokens(req) + min(req.max_tokens or self.reserve_output, self.reserve_output)
                if tokens is None
                else tokens
            )
            tokens = min(wanted, target.tpm)
        self._leases += 1
        ask = Ask(
            "@" + target.key,
            self._lease_prefix + str(self._leases),
            time.time(),
            self.lease_seconds,
            tokens,
            0,
            "",
            None,
            target.rpm,
            target.tpm,
        )
        verdict = self._local.reserve(ask) if self.counters is None else await self.counters.reserve(ask)
        if not verdict.ok:
            self.metrics.cooling.labels(resolved.route, target.key, verdict.reason or "rpm").inc()
            wait = verdict.retry_after
            if plan is not None and wait is not None and (plan.limited is None or wait < plan.limited):
                plan.limited = wait
            return False
        return verdict.hold or True

    async def started(self, resolved: Resolved, target: Target) -> None:
        self._route(resolved).selected[target.key].inc()
        if resolved.strategy == "least_busy":
            await self.shared.add("busy:" + target.key, 1, IN_FLIGHT_TTL)

    async def ended(
        self, resolved: Resolved, target: Target, usage: Usage | None = None, hold: Hold | bool = True
    ) -> None:
        """The attempt failed, or the answer it opened was closed: one fewer in flight, and the
        hold settled — its reserved tokens replaced by the answer's (input + output, as the
        upstream reported them; none for a failed attempt)."""
        if resolved.strategy == "least_busy":
            await self.shared.add("busy:" + target.key, -1, IN_FLIGHT_TTL)
        if isinstance(hold, Hold):
            tokens = 0 if usage is None else (usage.input or 0) + (usage.output or 0)
            s = Settlement(hold.key, time.time(), hold, "", "", "", tokens, 0, 0, 0, 0, 0, False, False, logged=False)
            if self.counters is None:
                self._local.settle([s])
            else:
                await self.counters.settle([s])

    async def failed(
        self, resolved: Resolved, target: Target, kind: str, retry_after: float | None, *, lasting: bool = False
    ) -> None:
        self.metrics.failed.labels(resolved.route, target.key, kind).inc()
        if lasting:  # a spent account or a refused key: a cooldown would only say "retry in N s", wrongly
            return
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
