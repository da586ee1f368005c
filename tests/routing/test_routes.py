"""Routes over several targets (issue 20): balancing, cooldowns, affinity, per-target rpm/tpm.

One loopback OpenAI-chat server stands for several deployments (``tests/support/targets.py``):
the targets of route ``text`` are upstream models ``a``, ``b``, … of provider ``up``, and the
server records which one each request reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.fake_upstream import ServerThread
from tests.support.targets import Behaviour, Deployments


@pytest.fixture(scope="module")
def deployments() -> Iterator[Deployments]:
    app = Deployments()
    with ServerThread(app) as server:
        app.url = server.url  # type: ignore[attr-defined]
        yield app


@pytest.fixture(autouse=True)
def _fresh(deployments: Deployments) -> None:
    deployments.reset()


def config(url: str, models: list[str], **route: Any) -> dict[str, Any]:
    weights = route.pop("weights", [1] * len(models))
    targets = [{"provider": "up", "upstream_model": m, "weight": w} for m, w in zip(models, weights)]
    for extra in route.pop("target_extras", []):
        targets[extra.pop("index")].update(extra)
    provider = {
        "name": "up",
        "dialect": "openai-chat",
        "base_url": url + "/v1",
        "api_key": "sk-up",
        "max_retries": 0,
        "first_byte_timeout": route.pop("first_byte_timeout", 5.0),
    }
    other = {
        "name": "other",
        "dialect": "openai-chat",
        "base_url": url + "/v1",
        "api_key": "sk-other",
        "max_retries": 0,
    }
    return {
        "server": {"access_log": False, "keepalive_seconds": 0.5},
        "auth": {"keys_env": ""},
        "store": {"url": "sqlite://:memory:"},
        "providers": [provider, other],
        "routes": [{"model": "text", "targets": targets, **route}],
    }


@contextmanager
def gateway(deployments: Deployments, models: list[str], **route: Any) -> Iterator[str]:
    settings = Settings(**config(deployments.url, models, **route))  # type: ignore[attr-defined]
    with ServerThread(create_app(settings)) as server:
        yield server.url


def ask(client: httpx.Client, url: str, headers: dict[str, str] | None = None, **body: Any) -> httpx.Response:
    payload = {"model": "text", "messages": [{"role": "user", "content": "hi"}], **body}
    return client.post(url + "/v1/chat/completions", json=payload, headers=headers or {})


def served_by(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"].removeprefix("from ")


def test_weighted_shares_over_1000_requests(deployments: Deployments) -> None:
    """Weights 3:1 → a gets 75 %: over 1,000 requests the count of a is 750 ± 5 standard
    deviations (sd = sqrt(1000 · 0.75 · 0.25) ≈ 13.7, so 681..819; a false failure is ~1e-6)."""
    with (
        gateway(deployments, ["a", "b"], strategy="weighted", weights=[3, 1]) as url,
        httpx.Client(timeout=10) as client,
    ):
        for _ in range(1000):
            assert ask(client, url).status_code == 200
    assert 681 <= deployments.count("a") <= 819, deployments.count("a")
    assert deployments.count("a") + deployments.count("b") == 1000


def test_least_busy_avoids_a_target_holding_a_long_stream(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(hold=3.0)
    deployments.behaviour["b"] = Behaviour(hold=3.0)
    with gateway(deployments, ["a", "b"], strategy="least_busy") as url, httpx.Client(timeout=10) as client:
        held: list[str] = []

        def hold() -> None:
            with client.stream(
                "POST",
                url + "/v1/chat/completions",
                json={"model": "text", "stream": True, "messages": [{"role": "user", "content": "hold"}]},
            ) as r:
                for _ in r.iter_lines():
                    pass
            held.append("done")

        holder = threading.Thread(target=hold)
        holder.start()
        deadline = time.monotonic() + 5
        while not any(deployments.open.values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        busy = next(m for m, n in deployments.open.items() if n)
        free = "b" if busy == "a" else "a"
        for _ in range(20):
            assert served_by(ask(client, url)) == free
        holder.join()
    assert held == ["done"]


def test_latency_avoids_a_slow_target_after_warm_up(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(delay=0.25)
    with gateway(deployments, ["a", "b"], strategy="latency") as url, httpx.Client(timeout=10) as client:
        for _ in range(4):
            ask(client, url)
        deployments.hits.clear()
        for _ in range(40):
            assert ask(client, url).status_code == 200
    # exploration sends ~5 % in random order: a expected ~1 of 40; 6 or more is p < 1e-3
    assert deployments.count("a") <= 5, deployments.hits


def test_cooldown_honoured_then_traffic_returns(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(fail=[500])
    with (
        gateway(deployments, ["a", "b"], strategy="ordered", cooldown_seconds=1.0) as url,
        httpx.Client(timeout=10) as client,
    ):
        assert served_by(ask(client, url)) == "b"  # a failed before the first byte: b answered at once
        assert deployments.hits == ["a", "b"]
        started = time.monotonic()
        while time.monotonic() - started < 0.8:
            assert served_by(ask(client, url)) == "b"
        assert deployments.count("a") == 1  # not called while cooling
        time.sleep(0.3)
        assert served_by(ask(client, url)) == "a"  # recovered: traffic returns


def test_retry_after_longer_than_the_cooldown_wins(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(fail=[429], retry_after="2")
    with (
        gateway(deployments, ["a", "b"], strategy="ordered", cooldown_seconds=0.3) as url,
        httpx.Client(timeout=10) as client,
    ):
        assert served_by(ask(client, url)) == "b"
        time.sleep(0.6)  # past cooldown_seconds, inside Retry-After
        assert served_by(ask(client, url)) == "b"
        assert deployments.count("a") == 1
        time.sleep(1.6)
        assert served_by(ask(client, url)) == "a"


def test_all_targets_cooling_waits_for_the_first_recovery(deployments: Deployments) -> None:
    """The wait is for targets that cooled before the request (docs/routing-failures.md): the first
    request cools both and is answered at once; the next waits for the first to recover."""
    deployments.behaviour["a"] = Behaviour(fail=[429], retry_after="1")
    deployments.behaviour["b"] = Behaviour(fail=[429], retry_after="2")
    with gateway(deployments, ["a", "b"], strategy="ordered", cooldown_seconds=0.1) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="text", messages=[{"role": "user", "content": "hi"}])
        started = time.monotonic()
        answer = client.chat.completions.create(model="text", messages=[{"role": "user", "content": "hi"}])
        waited = time.monotonic() - started
    assert answer.choices[0].message.content == "from a"  # the first to recover
    assert 0.8 <= waited < 1.9, waited
    assert deployments.hits == ["a", "b", "a"]


CALLS = {
    "openai-chat": ("/v1/chat/completions", {"model": "text", "messages": [{"role": "user", "content": "hi"}]}),
    "openai-responses": ("/v1/responses", {"model": "text", "input": "hi"}),
    "anthropic": ("/v1/messages", {"model": "text", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    "gemini": ("/v1beta/models/text:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    "gemini-interactions": ("/v1beta/interactions", {"model": "text", "input": "hi", "store": False}),
}


def _error_kind(dialect: str, body: dict[str, Any]) -> str:
    if dialect == "anthropic":
        assert body["type"] == "error"
        return body["error"]["type"]
    if dialect.startswith("gemini"):
        return body["error"]["status"] if dialect == "gemini" else str(body["error"].get("code"))
    return body["error"]["code"] or body["error"]["type"]


@pytest.mark.parametrize("dialect", list(CALLS))
def test_all_cooling_past_the_budget_is_429_with_retry_after_in_each_dialect(
    deployments: Deployments, dialect: str
) -> None:
    deployments.behaviour["a"] = Behaviour(always_fail=429, retry_after="30")
    deployments.behaviour["b"] = Behaviour(always_fail=429, retry_after="30")
    path, body = CALLS[dialect]
    with (
        gateway(deployments, ["a", "b"], strategy="weighted", first_byte_timeout=2.0) as url,
        httpx.Client(timeout=10) as client,
    ):
        first = client.post(url + path, json=body)  # both tried, both 429 with Retry-After 30 > the 2 s budget
        assert first.status_code == 429, first.text
        deployments.hits.clear()
        started = time.monotonic()
        second = client.post(url + path, json=body)  # both cooling: answered at once, nothing sent upstream
        assert time.monotonic() - started < 1.0
    assert deployments.hits == []
    assert second.status_code == 429, second.text
    assert 28 <= int(second.headers["retry-after"]) <= 30
    kind = _error_kind(dialect, second.json())
    assert kind in ("rate_limit_error", "RESOURCE_EXHAUSTED", "429", "rate_limit_exceeded", "resource_exhausted"), (
        second.text
    )


@pytest.mark.parametrize("dialect", ["openai-chat", "anthropic", "gemini"])
def test_every_target_at_its_rpm_is_429_with_the_windows_retry_after(deployments: Deployments, dialect: str) -> None:
    """Both targets at their rpm: a 429 in the caller's dialect, nothing sent upstream, and a
    ``Retry-After`` that is when the sliding window has room again (not just "the next minute")."""
    path, body = CALLS[dialect]
    extras = [{"index": 0, "rpm": 1}, {"index": 1, "rpm": 1}]
    with (
        gateway(deployments, ["a", "b"], strategy="ordered", target_extras=extras) as url,
        httpx.Client(timeout=10) as client,
    ):
        assert client.post(url + path, json=body).status_code == 200
        assert client.post(url + path, json=body).status_code == 200
        deployments.hits.clear()
        third = client.post(url + path, json=body)
    assert deployments.hits == []
    assert third.status_code == 429, third.text
    assert 1 <= int(third.headers["retry-after"]) <= 120
    kind = _error_kind(dialect, third.json())
    assert kind in ("rate_limit_error", "RESOURCE_EXHAUSTED", "rate_limit_exceeded"), third.text


def test_affinity_sticks_while_healthy_and_moves_once_on_failure(deployments: Deployments) -> None:
    with (
        gateway(deployments, ["a", "b", "c"], strategy="weighted", affinity="session", cooldown_seconds=0.5) as url,
        httpx.Client(timeout=10) as client,
    ):
        homes = {}
        for session in ("s1", "s2", "s3", "s4"):
            seen = {served_by(ask(client, url, {"x-session-id": session})) for _ in range(25)}
            assert len(seen) == 1, (session, seen)  # 100 % sticky
            homes[session] = seen.pop()
        home = homes["s1"]
        deployments.behaviour[home] = Behaviour(fail=[500])
        moved = served_by(ask(client, url, {"x-session-id": "s1"}))
        assert moved != home
        time.sleep(0.7)  # the old home has recovered: the session stays where it moved
        assert {served_by(ask(client, url, {"x-session-id": "s1"})) for _ in range(25)} == {moved}
        # the caller's user is a session too (OpenAI ``user``; Anthropic metadata.user_id)
        assert len({served_by(ask(client, url, user="alice")) for _ in range(20)}) == 1


def test_per_target_rpm_passes_the_target_over(deployments: Deployments) -> None:
    with (
        gateway(deployments, ["a", "b"], strategy="ordered", target_extras=[{"index": 0, "rpm": 3}]) as url,
        httpx.Client(timeout=10) as client,
    ):
        served = [served_by(ask(client, url)) for _ in range(6)]
    if served[:3] == ["a", "a", "a"]:
        assert served[3:] == ["b", "b", "b"]
    else:  # the minute turned over during the test: a's window restarted
        assert served.count("a") >= 3
    assert deployments.count("a") == served.count("a")  # passed over, never called


def test_fallbacks_after_every_target_failed(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(always_fail=500)
    deployments.behaviour["b"] = Behaviour(always_fail=503)
    with (
        gateway(deployments, ["a", "b"], strategy="weighted", fallbacks=["other:z"]) as url,
        httpx.Client(timeout=10) as client,
    ):
        assert served_by(ask(client, url)) == "z"
        assert sorted(deployments.hits[:2]) == ["a", "b"] and deployments.hits[2] == "z"
        metrics = client.get(url + "/metrics").text
    assert 'gateway_target_failed_total{kind="api_error",route="text",target="up:a"} 1.0' in metrics
    assert 'gateway_target_selected_total{route="text",target="up:b"} 1.0' in metrics
    import re

    left = re.search(r'gateway_target_cooldown_seconds\{route="text",target="up:a"\} ([0-9.e+]+)', metrics)
    assert left is not None and 25 < float(left.group(1)) <= 30  # the default 30 s cooldown, as it was set


def test_no_switch_after_the_first_byte(deployments: Deployments) -> None:
    deployments.behaviour["a"] = Behaviour(cut=True)
    with gateway(deployments, ["a", "b"], strategy="ordered") as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        stream = client.chat.completions.create(model="text", messages=[{"role": "user", "content": "hi"}], stream=True)
        text = ""
        with pytest.raises(openai.APIError):
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    text += chunk.choices[0].delta.content
    assert text == "from a"
    assert deployments.hits == ["a"]  # the cut after a byte is an error in the stream, not a switch to b


def test_check_config_shows_targets_strategy_weights_and_fallbacks(tmp_path: Any) -> None:
    import subprocess
    import sys

    path = tmp_path / "g.toml"
    path.write_text(
        '[[providers]]\nname = "claude"\ndialect = "anthropic"\nbase_url = "http://127.0.0.1:9"\napi_key = "k"\n'
        '[[providers]]\nname = "openai"\ndialect = "openai-chat"\nbase_url = "http://127.0.0.1:9"\napi_key = "k"\n'
        '[[routes]]\nmodel = "smart"\nstrategy = "weighted"\naffinity = "session"\ncooldown_seconds = 30\nfallbacks = ["openai:gpt-4.1"]\n'
        'targets = [{ provider = "claude", upstream_model = "a", weight = 3 }, { provider = "claude", upstream_model = "b", weight = 1, rpm = 100 }]\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(path), "--model", "smart"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "strategy weighted, affinity session, cooldown 30s" in out.stdout
    assert "target claude:a weight 3 (75% of traffic)" in out.stdout
    assert "target claude:b weight 1 (25% of traffic), rpm 100" in out.stdout
    assert "fallback openai:gpt-4.1" in out.stdout
    path.write_text(path.read_text().replace('model = "smart"', 'model = "smart"\nprovider = "claude"'))
    bad = subprocess.run([sys.executable, "-m", "gateway", "check-config", str(path)], capture_output=True, text=True)
    assert bad.returncode == 1 and "either provider or targets" in bad.stderr


def test_affinity_from_anthropic_metadata_user_id(deployments: Deployments) -> None:
    with gateway(deployments, ["a", "b", "c"], strategy="weighted", affinity="session") as url:
        import anthropic

        client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
        for user in ("u1", "u2", "u3"):
            texts = {
                client.messages.create(
                    model="text",
                    max_tokens=10,
                    metadata={"user_id": user},
                    messages=[{"role": "user", "content": "hi"}],
                )
                .content[0]
                .text  # type: ignore[union-attr]
                for _ in range(15)
            }
            assert len(texts) == 1, texts


def test_access_log_names_the_target_that_served_and_those_tried(deployments: Deployments) -> None:
    from tests.support.access_log import capture_access_log

    deployments.behaviour["a"] = Behaviour(fail=[503])
    cfg = config(deployments.url, ["a", "b"], strategy="ordered")  # type: ignore[attr-defined]
    cfg["server"]["access_log"] = True
    with (
        capture_access_log() as log,
        ServerThread(create_app(Settings(**cfg))) as server,
        httpx.Client(timeout=10) as client,
    ):
        r = ask(client, server.url, {"x-request-id": "req-routes-1"})
        assert served_by(r) == "b"
        line = log.line("req-routes-1")
    assert line["route"] == "text" and line["provider"] == "up" and line["upstream_model"] == "b"
    assert [(a["upstream_model"], a["status"]) for a in line["attempts"]] == [("a", 503), ("b", 200)]


def test_per_target_tpm_passes_the_target_over(deployments: Deployments) -> None:
    # each request reserves its input estimate (4 tokens for "hi") + max_tokens 1 = 5 of a's 14 a
    # minute, and each answer reports 3 + 2 = 5 tokens: after two answers a third does not fit
    with (
        gateway(deployments, ["a", "b"], strategy="ordered", target_extras=[{"index": 0, "tpm": 14}]) as url,
        httpx.Client(timeout=10) as client,
    ):
        served = [served_by(ask(client, url, max_tokens=1)) for _ in range(4)]
    if time.time() % 60 > 2:  # (the minute did not turn over during the test)
        assert served == ["a", "a", "b", "b"]
    assert deployments.count("a") == served.count("a")


def test_per_target_tpm_counts_the_answers_still_running(deployments: Deployments) -> None:
    """A target's tpm is reserved when a request is sent to it, not counted when the answer ends:
    while one answer is streaming from a, a second request that would take a past its tpm goes to b."""
    deployments.behaviour["a"] = Behaviour(hold=1.5)
    with (
        gateway(deployments, ["a", "b"], strategy="ordered", target_extras=[{"index": 0, "tpm": 9}]) as url,
        httpx.Client(timeout=10) as client,
    ):
        hold = {"model": "text", "stream": True, "max_tokens": 1, "messages": [{"role": "user", "content": "hold"}]}
        holder = threading.Thread(target=lambda: httpx.post(url + "/v1/chat/completions", json=hold, timeout=10))
        holder.start()
        deadline = time.monotonic() + 5
        while not deployments.open.get("a") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert deployments.open.get("a")
        assert served_by(ask(client, url, max_tokens=1)) == "b"  # 5 + 1 held, 4 + 1 more: past 9
        holder.join()
    assert deployments.count("a") == 1


def test_the_last_healthy_target_gets_its_providers_retries(deployments: Deployments) -> None:
    """A one-target pool (or the last healthy target) is retried like a ``provider`` route,
    so one transient error does not cool the only deployment."""
    deployments.behaviour["a"] = Behaviour(fail=[500])
    cfg = config(deployments.url, ["a"], strategy="ordered")  # type: ignore[attr-defined]
    cfg["providers"][0].update(max_retries=1, retry_backoff=0.01)
    with ServerThread(create_app(Settings(**cfg))) as server, httpx.Client(timeout=10) as client:
        assert served_by(ask(client, server.url)) == "a"
        assert served_by(ask(client, server.url)) == "a"
    assert deployments.hits == ["a", "a", "a"]


def test_affinity_follows_a_previous_response_id_chain(deployments: Deployments) -> None:
    """No session header, no user: each stored turn pins its new id, so the next turn (sent with
    ``previous_response_id``) stays on the target that answered the first."""
    with gateway(deployments, ["a", "b", "c"], strategy="weighted", affinity="session") as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        for _ in range(4):
            deployments.hits.clear()
            previous = None
            for _ in range(4):
                r = client.responses.create(model="text", input="hi", previous_response_id=previous)  # type: ignore[arg-type]
                previous = r.id
            assert len(set(deployments.hits)) == 1, deployments.hits
