"""Model name → where to send it: the targets (provider + upstream model), how to balance them,
and the fallbacks.

Resolution order: an exact route name; then glob routes (``claude-*``, ``*``) in file order;
then ``provider/upstream-model`` addressing. Anything else is unknown (404 in the caller's dialect).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from gateway.errors import GatewayError
from gateway.settings import RouteSettings, Settings


@dataclass(frozen=True, slots=True)
class Target:
    provider: str
    upstream_model: str
    weight: float = 1.0
    rpm: int | None = None
    tpm: int | None = None
    key: str = field(
        init=False, compare=False, repr=False
    )  # "provider:upstream_model": how health, counters, pins and metrics name it

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.provider}:{self.upstream_model}")


@dataclass(frozen=True, slots=True)
class Resolved:
    route: str  # the route that matched (its model pattern), or "provider/model"
    targets: tuple[Target, ...]  # the route's targets (the first ``pool`` of them), then its fallbacks in order
    stream_usage: str | None = None  # the route's stream_usage; None: the [server] setting
    pool: int = 1  # how many leading ``targets`` are balanced; the rest are fallbacks
    strategy: str = "ordered"  # weighted | least_busy | latency | ordered
    balanced: bool = False  # a route with ``targets``: cooldowns, strategies, affinity apply
    affinity: str = "none"
    affinity_ttl: float = 3600.0
    cooldown: float = 30.0
    task_type: str | None = None  # the route's embeddings task type for callers that send none
    cache: bool = True  # the route's ``cache``: false keeps the response cache out of it
    max_wait: float = 10.0  # the route's max_wait_seconds (attempts.py)


class Router:
    def __init__(self, settings: Settings) -> None:
        self._providers = {p.name for p in settings.providers}
        self._exact: dict[str, RouteSettings] = {}
        self._globs: list[RouteSettings] = []
        for route in settings.routes:
            if any(ch in route.model for ch in "*?["):
                self._globs.append(route)
            else:
                self._exact.setdefault(route.model, route)
        self._cache: dict[str, Resolved] = {}

    def resolve(self, model: str) -> Resolved:
        cached = self._cache.get(model)
        if cached is not None:
            return cached
        resolved = self._resolve(model)
        if len(self._cache) < 4096:
            self._cache[model] = resolved
        return resolved

    def _resolve(self, model: str) -> Resolved:
        route = self._exact.get(model)
        if route is None:
            route = next((r for r in self._globs if fnmatchcase(model, r.model)), None)
        if route is not None:
            fallbacks = tuple(self._fallback(f, model) for f in route.fallbacks)
            if route.provider is not None:
                primary = Target(route.provider, route.upstream_model or model)
                return Resolved(
                    route.model,
                    (primary, *fallbacks),
                    route.stream_usage,
                    task_type=route.task_type,
                    cache=route.cache,
                    max_wait=route.max_wait_seconds,
                )
            pool = tuple(Target(t.provider, t.upstream_model or model, t.weight, t.rpm, t.tpm) for t in route.targets)
            return Resolved(
                route.model,
                (*pool, *fallbacks),
                route.stream_usage,
                pool=len(pool),
                strategy=route.strategy,
                balanced=True,
                affinity=route.affinity,
                affinity_ttl=route.affinity_ttl_seconds,
                cooldown=route.cooldown_seconds,
                task_type=route.task_type,
                cache=route.cache,
                max_wait=route.max_wait_seconds,
            )
        provider, sep, upstream = model.partition("/")
        if sep and provider in self._providers and upstream:
            return Resolved(model, (Target(provider, upstream),))
        raise GatewayError("not_found", f"model {model!r} is not configured on this gateway", 404, param="model")

    @staticmethod
    def _fallback(spec: str, model: str) -> Target:
        provider, _, upstream = spec.partition(":")
        return Target(provider, upstream or model)
