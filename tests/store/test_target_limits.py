"""A route target's rpm/tpm (gateway/routing/targets.py) on the key limits' counters, on both backends:
two replicas (two store instances on one SQLite file, or on one Redis) share one target's limits;
a target's tpm is reserved when a request is admitted and settled to the answer's real tokens; the
holds leave no request records (GET /admin/requests lists callers' requests only)."""

from __future__ import annotations

from gateway.events import Usage
from gateway.ir import ChatRequest, Message, TextPart
from gateway.routing.router import Resolved, Target
from gateway.routing.targets import Routing
from tests.store.conftest import Opener


def _replica(opener: Opener) -> Routing:
    routing = Routing()
    routing.counters = opener()
    return routing


def _route(target: Target) -> Resolved:
    return Resolved("text", (target,), pool=1, strategy="ordered", balanced=True)


async def test_two_replicas_share_a_targets_rpm(opener: Opener) -> None:
    target = Target("up", "a", 1, rpm=3)
    route, req = _route(target), ChatRequest("text")
    a, b = _replica(opener), _replica(opener)
    holds = [await a.admit(route, target, req), await b.admit(route, target, req), await a.admit(route, target, req)]
    assert all(h is not False for h in holds)
    assert await b.admit(route, target, req) is False  # the fourth this minute, on either replica
    assert await a.admit(route, target, req) is False
    for h in holds:
        await a.ended(route, target, None, h)
    assert await b.admit(route, target, req) is False  # settling returns tokens, not requests
    assert await a.counters.recent_requests(None, 10) == []


async def test_a_targets_tpm_is_reserved_then_settled(opener: Opener) -> None:
    target = Target("up", "a", 1, tpm=100)
    route = _route(target)
    req = ChatRequest(
        "text", [Message("user", [TextPart("x" * 144)])], max_tokens=40
    )  # (16 + 144) / 4 = 40 in + 40 out
    a, b = _replica(opener), _replica(opener)
    hold = await a.admit(route, target, req)
    assert hold is not False
    assert await b.admit(route, target, req) is False  # 80 held + 80 more > 100, while the first still runs
    await a.ended(route, target, Usage(input=5, output=5), hold)  # the answer was 10 tokens, not 80
    second = await b.admit(route, target, req)
    assert second is not False  # 10 + 80 <= 100
    await b.ended(route, target, None, second)  # a failed attempt: its reservation is returned whole
    assert await a.admit(route, target, req) is not False


async def test_a_request_larger_than_a_targets_tpm_still_reaches_an_idle_target(opener: Opener) -> None:
    target = Target("up", "a", 1, tpm=50)
    route, req = _route(target), ChatRequest("text")  # no max_tokens: 1 + reserve_output_tokens (4096) > 50
    a = _replica(opener)
    hold = await a.admit(route, target, req)
    assert hold is not False  # the reservation is capped at the whole tpm ...
    assert await a.admit(route, target, req) is False  # ... which it fills while it runs
