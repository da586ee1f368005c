"""A route whose targets all fail answers at once, never loops (issue 28 item 1; docs/routing-failures.md).

One loopback OpenAI-chat server stands for the deployments (``tests/support/targets.py``; it counts the
attempts each upstream model received); a closed port stands for a deployment that refuses connections.
Each target is tried at most its provider's ``max_retries + 1`` times, the fallbacks come next, and a
request waits only for targets that cooled before it, within ``max_wait_seconds``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.access_log import capture_access_log
from tests.support.fake_upstream import ServerThread, free_port
from tests.support.targets import Behaviour, Deployments

MAX_RETRIES = 2  # the provider default: 3 tries per target at most


@pytest.fixture(scope="module")
def deployments() -> Iterator[Deployments]:
    app = Deployments()
    with ServerThread(app) as server:
        app.url = server.url  # type: ignore[attr-defined]
        yield app


@pytest.fixture(autouse=True)
def _fresh(deployments: Deployments) -> None:
    deployments.reset()


def settings(
    url: str, targets: list[str], fallbacks: list[str] | None = None, retries: int = MAX_RETRIES, **route: Any
) -> Settings:
    """Route ``text`` over ``provider:model`` targets; ``up`` and ``fb`` reach the deployments, ``dead`` a
    closed port. The first-byte timeout is the default (600 s): a loop would hang for minutes."""
    dead = f"http://127.0.0.1:{free_port()}/v1"

    def provider(name: str, base: str) -> dict[str, Any]:
        return {
            "name": name,
            "dialect": "openai-chat",
            "base_url": base,
            "api_key": "sk-" + name,
            "max_retries": retries,
            "retry_backoff": 0.01,
        }

    pool = [{"provider": t.split(":")[0], "upstream_model": t.split(":")[1]} for t in targets]
    return Settings(
        server={"access_log": True, "keepalive_seconds": 0.5},
        auth={"keys_env": ""},
        store={"url": "sqlite://:memory:"},
        providers=[provider("up", url + "/v1"), provider("fb", url + "/v1"), provider("dead", dead)],
        routes=[{"model": "text", "targets": pool, "fallbacks": fallbacks or [], "cooldown_seconds": 3.0, **route}],
    )


@contextmanager
def gateway(deployments: Deployments, targets: list[str], **kw: Any) -> Iterator[str]:
    with ServerThread(create_app(settings(deployments.url, targets, **kw))) as server:  # type: ignore[attr-defined]
        yield server.url


def ask(url: str, request_id: str = "r") -> tuple[httpx.Response, float]:
    started = time.monotonic()
    reply = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "text", "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-request-id": request_id},
        timeout=30,
    )
    return reply, time.monotonic() - started


def test_two_targets_failing_with_500_answer_at_once_and_never_loop(deployments: Deployments) -> None:
    """The reported loop: both 500, cooldown 3 s, the default first-byte timeout — 12 attempts over 12 s
    and no answer before. Now: each target at most max_retries + 1 times, then the last error."""
    deployments.behaviour["a"] = Behaviour(always_fail=500)
    deployments.behaviour["b"] = Behaviour(always_fail=500)
    with gateway(deployments, ["up:a", "up:b"], strategy="ordered") as url:
        reply, took = ask(url)
    assert reply.status_code == 500, reply.text
    assert reply.json()["error"]["message"] == "b failing"
    assert 1 <= deployments.count("a") <= MAX_RETRIES + 1 and 1 <= deployments.count("b") <= MAX_RETRIES + 1
    assert took < 2.5, took  # no wait for the cooldown


def test_failing_pool_goes_to_the_fallback(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(always_fail=500)
    deployments.behaviour["b"] = Behaviour(always_fail=503)
    with gateway(deployments, ["up:a", "up:b"], fallbacks=["fb:z"], strategy="weighted") as url:
        reply, took = ask(url)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "from z"
    assert deployments.count("a") <= MAX_RETRIES + 1 and deployments.count("b") <= MAX_RETRIES + 1
    assert deployments.hits[-1] == "z" and deployments.count("z") == 1
    assert took < 2.5, took


def test_failing_fallback_too_is_the_last_error_at_once(deployments: Deployments) -> None:
    for model in ("a", "b", "y"):
        deployments.behaviour[model] = Behaviour(always_fail=500)
    # the fallback naming a pool target is not sent to again by the request that failed on it
    with gateway(deployments, ["up:a", "up:b"], fallbacks=["up:a", "fb:y"], strategy="ordered") as url:
        reply, took = ask(url)
    assert reply.status_code == 500 and reply.json()["error"]["message"] == "y failing"
    assert deployments.count("a") == 1  # not again as a fallback
    assert deployments.count("b") <= MAX_RETRIES + 1 and deployments.count("y") == MAX_RETRIES + 1
    assert took < 2.5, took


@pytest.mark.parametrize("fallback", [None, "fb:z"])
def test_refused_connections(deployments: Deployments, fallback: str | None) -> None:
    with (
        capture_access_log() as log,
        gateway(deployments, ["dead:a", "dead:b"], fallbacks=[fallback] if fallback else None) as url,
    ):
        reply, took = ask(url, f"refused-{fallback}")
        line = log.line(f"refused-{fallback}")
    tried = [a["upstream_model"] for a in line["attempts"]]
    assert tried.count("a") <= MAX_RETRIES + 1 and tried.count("b") <= MAX_RETRIES + 1
    if fallback is None:
        assert reply.status_code == 502, reply.text
        assert "unreachable" in reply.json()["error"]["message"]
    else:
        assert reply.status_code == 200 and tried[-1] == "z" and deployments.hits == ["z"]
    assert took < 2.5, took


@pytest.mark.parametrize("retry_after", ["60", "20"])  # past the provider's max_retry_after; past max_wait_seconds
def test_429_with_a_long_retry_after_is_a_429_at_once(deployments: Deployments, retry_after: str) -> None:
    deployments.behaviour["a"] = Behaviour(always_fail=429, retry_after=retry_after)
    deployments.behaviour["b"] = Behaviour(always_fail=429, retry_after=retry_after)
    with gateway(deployments, ["up:a", "up:b"], strategy="ordered") as url:
        reply, took = ask(url)
        again, took_again = ask(url)  # both cooling longer than max_wait_seconds: nothing sent
    assert reply.status_code == 429 and again.status_code == 429
    assert int(retry_after) - 2 <= int(reply.headers["retry-after"]) <= int(retry_after)
    assert deployments.hits == ["a", "b"]  # one try each: a wait before a retry would not fit
    assert took < 2.5 and took_again < 1.0, (took, took_again)


def test_429_with_a_long_retry_after_goes_to_the_fallback(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(always_fail=429, retry_after="60")
    deployments.behaviour["b"] = Behaviour(always_fail=429, retry_after="60")
    with gateway(deployments, ["up:a", "up:b"], fallbacks=["fb:z"]) as url:
        reply, took = ask(url)
        again, _ = ask(url)  # both cooled before this one: the fallback comes before any wait
    assert reply.json()["choices"][0]["message"]["content"] == "from z"
    assert again.json()["choices"][0]["message"]["content"] == "from z"
    assert sorted(deployments.hits) == ["a", "b", "z", "z"]
    assert took < 2.5, took


def test_the_wait_is_for_targets_cooled_before_the_request_and_only_within_max_wait(
    deployments: Deployments,
) -> None:
    deployments.behaviour["a"] = Behaviour(fail=[429], retry_after="1")
    deployments.behaviour["b"] = Behaviour(fail=[429], retry_after="2")
    with gateway(deployments, ["up:a", "up:b"], strategy="ordered", cooldown_seconds=0.1, retries=0) as url:
        first, took = ask(url)  # cools both itself: answered at once, no wait
        assert first.status_code == 429 and took < 0.9, took
        second, waited = ask(url)  # both cooled before it: waits ~1 s for a
    assert second.json()["choices"][0]["message"]["content"] == "from a"
    assert 0.8 <= waited < 1.9, waited
    assert deployments.hits == ["a", "b", "a"]


def test_no_wait_when_it_does_not_fit_max_wait_seconds(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(fail=[429], retry_after="1")
    deployments.behaviour["b"] = Behaviour(fail=[429], retry_after="1")
    with gateway(deployments, ["up:a", "up:b"], cooldown_seconds=0.1, max_wait_seconds=0.5, retries=0) as url:
        ask(url)
        second, took = ask(url)
    assert second.status_code == 429 and 1 <= int(second.headers["retry-after"]) <= 2
    assert took < 0.5 and deployments.count("a") == 1 and deployments.count("b") == 1


def _openai(url: str) -> None:
    openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0).chat.completions.create(
        model="text", messages=[{"role": "user", "content": "hi"}]
    )


def _anthropic(url: str) -> None:
    anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0).messages.create(
        model="text", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    )


def _gemini(url: str) -> None:
    client = genai.Client(api_key="unused", http_options={"base_url": url, "retry_options": {"attempts": 1}})
    client.models.generate_content(model="text", contents="hi")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (_openai, openai.InternalServerError),
        (_anthropic, anthropic.InternalServerError),
        (_gemini, genai_errors.ServerError),
    ],
)
def test_errors_in_three_caller_dialects(deployments: Deployments, call: Any, error: type[Exception]) -> None:
    """All targets failing: each official SDK raises its own error for the 500, at once."""
    deployments.behaviour["a"] = Behaviour(always_fail=500)
    deployments.behaviour["b"] = Behaviour(always_fail=500)
    with gateway(deployments, ["up:a", "up:b"]) as url:
        started = time.monotonic()
        with pytest.raises(error) as info:
            call(url)
        took = time.monotonic() - started
    assert getattr(info.value, "status_code", getattr(info.value, "code", None)) == 500
    assert deployments.count("a") <= MAX_RETRIES + 1 and deployments.count("b") <= MAX_RETRIES + 1
    assert took < 5.0, took


@pytest.mark.parametrize(("retry_after", "max_wait", "tries"), [("1", 10.0, 2), ("20", 10.0, 1), ("1", 0.0, 1)])
def test_a_provider_route_waits_for_a_retry_after_only_within_max_wait(
    deployments: Deployments, retry_after: str, max_wait: float, tries: int
) -> None:
    """A one-provider route: a Retry-After is honoured before its retry only while it fits max_wait_seconds;
    else the caller's 429 (with that Retry-After) comes at once."""
    deployments.behaviour["a"] = Behaviour(fail=[429], retry_after=retry_after)
    cfg = settings(deployments.url, ["up:a"]).model_dump()  # type: ignore[attr-defined]
    cfg["routes"] = [{"model": "text", "provider": "up", "upstream_model": "a", "max_wait_seconds": max_wait}]
    with ServerThread(create_app(Settings(**cfg))) as server:
        reply, took = ask(server.url)
    assert deployments.count("a") == tries
    if tries == 2:
        assert reply.status_code == 200 and 0.9 <= took < 2.5, took
    else:
        assert reply.status_code == 429 and reply.headers["retry-after"] == retry_after and took < 0.9, took
