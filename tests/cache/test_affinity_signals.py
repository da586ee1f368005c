"""Sessions stay on the target whose prompt cache is warm, whatever signal the agent names them by.

Claude Code sends ``X-Claude-Code-Session-Id``, Codex a ``session_id`` header, OpenAI callers
``prompt_cache_key``: each keeps a session on one target of a balanced route; without a signal the
route balances as before. ``prompt_cache_key`` also reaches an OpenAI upstream, from either OpenAI
caller dialect.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import FakeUpstream, ServerThread
from tests.support.targets import Deployments


@pytest.fixture(scope="module")
def routed() -> Iterator[tuple[str, Deployments]]:
    app = Deployments()
    with ServerThread(app) as up:
        config = {
            "server": {"access_log": False},
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [
                {
                    "name": "up",
                    "dialect": "openai-chat",
                    "base_url": up.url + "/v1",
                    "api_key": "sk-up",
                    "max_retries": 0,
                }
            ],
            "routes": [
                {
                    "model": "agent",
                    "strategy": "weighted",
                    "affinity": "session",
                    "targets": [{"provider": "up", "upstream_model": m} for m in ("a", "b", "c")],
                }
            ],
        }
        with ServerThread(create_app(Settings(**config))) as gw:
            yield gw.url, app


def _chat(url: str, headers: dict[str, str], **body: Any) -> str:
    r = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "agent", "messages": [{"role": "user", "content": "hi"}], **body},
        headers=headers,
        timeout=10,
    )
    assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["message"]["content"]).removeprefix("from ")


def _responses(url: str, headers: dict[str, str], **body: Any) -> str:
    r = httpx.post(
        url + "/v1/responses",
        json={"model": "agent", "input": "hi", "store": False, **body},
        headers=headers,
        timeout=10,
    )
    assert r.status_code == 200, r.text
    return str(r.json()["output"][0]["content"][0]["text"]).removeprefix("from ")


SIGNALS = {
    "claude-code-header": lambda url, s: _chat(url, {"X-Claude-Code-Session-Id": s}),
    "codex-session_id-header": lambda url, s: _responses(url, {"session_id": s}),
    "prompt_cache_key-chat": lambda url, s: _chat(url, {}, prompt_cache_key=s),
    "prompt_cache_key-responses": lambda url, s: _responses(url, {}, prompt_cache_key=s),
}


@pytest.mark.parametrize("signal", list(SIGNALS))
def test_ten_sessions_of_five_turns_each_stay_on_one_target(routed: tuple[str, Deployments], signal: str) -> None:
    url, _ = routed
    homes = {}
    for n in range(10):
        session = f"{signal}-session-{n}"
        seen = {SIGNALS[signal](url, session) for _ in range(5)}
        assert len(seen) == 1, f"{session} moved between {seen}"
        homes[session] = seen.pop()
    assert set(homes.values()) <= {"a", "b", "c"}


def test_without_a_signal_the_route_balances_as_before(routed: tuple[str, Deployments]) -> None:
    url, _ = routed
    assert len({_chat(url, {}) for _ in range(30)}) > 1


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_prompt_cache_key_reaches_openai_upstreams(fake: FakeUpstream, path: str) -> None:
    with ServerThread(create_app(Settings(**gateway_config(f"http://127.0.0.1:{fake.port}")))) as gw:
        for upstream in ("openai-chat", "openai-responses"):
            if path.endswith("completions"):
                body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
            else:
                body = {"input": "hi", "store": False}
            r = httpx.post(
                gw.url + path, json={"model": f"{upstream}--text", "prompt_cache_key": "repo-42", **body}, timeout=10
            )
            assert r.status_code == 200, r.text
            assert fake.last(upstream).body["prompt_cache_key"] == "repo-42"
