"""How long an upstream asked us to wait before a retry, and what a request that no target answered raises."""

from __future__ import annotations

import email.utils
import time

import pytest

from gateway.errors import GatewayError
from gateway.ir import ChatRequest, Message, TextPart
from gateway.relay.attempts import AttemptsFailed, _retry_after, open_upstream
from gateway.routing.router import Router
from gateway.settings import Settings
from gateway.upstream.providers import Provider
from tests.support.fake_upstream import FakeUpstream, ServerThread


class FakeResponse:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


def test_retry_after_forms() -> None:
    assert _retry_after(FakeResponse({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5  # OpenAI's, finer
    assert _retry_after(FakeResponse({"retry-after": "2"})) == 2.0
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= _retry_after(FakeResponse({"retry-after": in_30s})) <= 30  # type: ignore[operator]
    assert _retry_after(FakeResponse({"retry-after": email.utils.formatdate(0, usegmt=True)})) == 0.0
    assert _retry_after(FakeResponse({"retry-after": "soon"})) is None
    assert _retry_after(FakeResponse({})) is None


async def test_no_target_answering_is_one_typed_error_with_every_attempt() -> None:
    """Two targets (a route and its fallback), each answering 500 after a retry: the caller's
    error is the last upstream's, raised as ``AttemptsFailed`` with all four attempts in order."""
    fake = FakeUpstream()
    with ServerThread(fake) as server:
        provider = {
            "dialect": "anthropic",
            "base_url": server.url,
            "api_key": "k",
            "max_retries": 1,
            "retry_backoff": 0,
        }
        settings = Settings(
            providers=[{"name": "text", **provider}, {"name": "type", **provider}],
            routes=[
                {"model": "m", "provider": "text", "upstream_model": "a--error_500", "fallbacks": ["type:b--error_500"]}
            ],
            store={"url": "sqlite://:memory:"},
        )
        providers = {p.name: Provider(p) for p in settings.providers}
        for p in providers.values():
            p.start()
        try:
            req = ChatRequest(model="m", messages=[Message("user", [TextPart("hi")])], max_tokens=5, stream=True)
            with pytest.raises(AttemptsFailed) as failed:
                await open_upstream(providers, req, Router(settings).resolve("m"))
        finally:
            for p in providers.values():
                await p.close()
    assert isinstance(failed.value, GatewayError) and failed.value.status == 500 and failed.value.kind == "api_error"
    assert [(a.provider, a.upstream_model, a.status) for a in failed.value.attempts] == [
        ("text", "a--error_500", 500),
        ("text", "a--error_500", 500),
        ("type", "b--error_500", 500),
        ("type", "b--error_500", 500),
    ]
    assert len(fake.received) == 4
