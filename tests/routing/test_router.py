"""gateway/routing/router.py: a model name → the route, its targets and fallbacks; resolution order is an
exact name, then globs in file order, then ``provider/upstream-model``; anything else is a 404."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import GatewayError
from gateway.routing.router import Router, Target
from gateway.settings import Settings


def router(routes: list[dict[str, Any]]) -> Router:
    providers = [
        {"name": n, "dialect": "anthropic", "base_url": "http://127.0.0.1:9", "api_key": "k"} for n in ("a", "b", "c")
    ]
    return Router(Settings(providers=providers, routes=routes, auth={"keys_env": ""}))


def test_exact_before_glob_and_globs_in_file_order() -> None:
    r = router(
        [
            {"model": "claude-*", "provider": "a"},
            {"model": "*", "provider": "b"},
            {"model": "claude-x", "provider": "c", "upstream_model": "real"},
        ]
    )
    assert r.resolve("claude-x").targets == (Target("c", "real"),)
    got = r.resolve("claude-y")
    assert (got.route, got.targets) == ("claude-*", (Target("a", "claude-y"),))  # the caller's name goes upstream
    assert r.resolve("text").targets == (Target("b", "text"),)  # a model called "text" is just a name


def test_provider_slash_model_addressing_and_unknown() -> None:
    r = router([{"model": "only", "provider": "a"}])
    assert r.resolve("b/some/model").targets == (Target("b", "some/model"),)
    for name in ("nope", "zz/model", "a/", "/model"):
        with pytest.raises(GatewayError) as info:
            r.resolve(name)
        assert (info.value.kind, info.value.status) == ("not_found", 404)


def test_fallbacks_follow_the_targets() -> None:
    r = router([{"model": "m", "provider": "a", "fallbacks": ["b:other", "c"]}])
    assert r.resolve("m").targets == (Target("a", "m"), Target("b", "other"), Target("c", "m"))
    assert r.resolve("m").pool == 1 and not r.resolve("m").balanced


def test_a_pool_of_targets() -> None:
    r = router(
        [
            {
                "model": "pool",
                "targets": [{"provider": "a", "weight": 3}, {"provider": "b", "upstream_model": "x"}],
                "strategy": "least_busy",
                "fallbacks": ["c"],
            }
        ]
    )
    got = r.resolve("pool")
    assert got.targets == (Target("a", "pool", 3.0), Target("b", "x"), Target("c", "pool"))
    assert (got.pool, got.strategy, got.balanced) == (2, "least_busy", True)
    assert got.targets[0].key == "a:pool"


def test_resolution_is_cached_and_stable() -> None:
    r = router([{"model": "*", "provider": "a"}])
    assert r.resolve("m") is r.resolve("m")
