"""``GatewayState``: what one running gateway holds, built by ``app.create_state``.

Its own module (not ``app``) so the relay and the endpoints can name its type without importing
the application: everything here is a lower layer (tests/test_architecture.py). The parts that
exist only once the store is open (``stateful``; the ledger's and limiter's ``store``) are set in
the app's lifespan. Modules below the endpoints take the two or three parts they use, not this.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.governance.auth import Authenticator
    from gateway.governance.keys import KeyRing
    from gateway.governance.ledger import Ledger
    from gateway.governance.limits import Limiter
    from gateway.guardrails.engine import Guardrails
    from gateway.relay.cache import ResponseCache
    from gateway.relay.stateful import Stateful
    from gateway.routing.router import Router
    from gateway.routing.targets import Routing
    from gateway.settings import Settings
    from gateway.telemetry.inspector import Inspector
    from gateway.telemetry.observe import Observer
    from gateway.telemetry.recent import Recent
    from gateway.telemetry.traces import Telemetry
    from gateway.upstream.providers import Provider


@dataclass(slots=True)
class GatewayState:
    settings: Settings
    router: Router
    providers: dict[str, Provider]
    keys: list[str]  # the config file's plain caller keys ([auth])
    observer: Observer
    keys_ring: KeyRing  # named keys (config + admin API)
    auth: Authenticator
    ledger: Ledger  # cost and settlement of every request
    limiter: Limiter  # a named key's limits, before the upstream
    routing: Routing  # balancing, cooldowns, affinity (shared through the store)
    inspector: Inspector  # the kept wire captures ([inspector])
    telemetry: Telemetry | None = None  # when an OTLP endpoint is set; None: off, no spans
    console: Recent | None = None  # when [admin] is set: recent records, live figures
    stateful: Stateful | None = None  # once the store is open (lifespan)
    cache: ResponseCache | None = None  # the response cache, once the store is open, when [cache] enabled
    live_streams: set[asyncio.Task[Any]] = field(default_factory=set)
    shutting_down: bool = False
    fast_path: bool = True  # same-dialect frame passthrough (server.fast_path)
    guardrails: Guardrails | None = None  # [[guardrails]] compiled; None: none configured
    mcp: Any = None  # gateway.mcp.endpoint.McpGateway when [[mcp_servers]] are configured (a layer above)
    started: float = field(default_factory=time.time)
