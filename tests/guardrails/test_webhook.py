"""The webhook guardrail against a loopback service: allow, block with a reason, redacted texts,
slow (past timeout_ms) and down, fail closed and open; the openai SDK as the caller."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.guardrails.test_guardrails_callers import ChatUpstream
from tests.support.callers import openai_client
from tests.support.fake_upstream import ServerThread, free_port


class GuardService:
    """Decides by a word in the texts: BLOCK, REDACT (each "secret-123" becomes "[gone]"), SLOW; else allow."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            msg = await receive()
            raw += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        body = orjson.loads(raw)
        self.seen.append(body)
        joined = " ".join(body["texts"])
        if "SLOW" in joined:
            await asyncio.sleep(1.0)
        if "BLOCK" in joined:
            answer: dict[str, Any] = {"action": "block", "reason": "policy 7 forbids this"}
        elif "REDACT" in joined:
            answer = {"action": "redact", "texts": [t.replace("secret-123", "[gone]") for t in body["texts"]]}
        else:
            answer = {"action": "allow"}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(answer)})


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[str, ChatUpstream, GuardService]]:
    up, service = ChatUpstream(), GuardService()
    down = f"http://127.0.0.1:{free_port()}/check"
    with ServerThread(up) as upstream, ServerThread(service) as guard:
        hook = {"kind": "webhook", "action": "redact", "timeout_ms": 200}
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [
                {"name": "svc", "url": guard.url + "/check", **hook},
                {"name": "down-closed", "url": down, **hook},
                {"name": "down-open", "url": down, **hook, "fail": "open"},
            ],
            "routes": [
                {"model": "svc", "provider": "up", "guardrails": ["svc"]},
                {"model": "closed", "provider": "up", "guardrails": ["down-closed"]},
                {"model": "open", "provider": "up", "guardrails": ["down-open"]},
            ],
        }
        with ServerThread(create_app(Settings(**config))) as gw:
            yield gw.url, up, service


def _ask(url: str, model: str, text: str) -> str:
    reply = openai_client(url).chat.completions.create(
        model=model, messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]
    )
    return reply.choices[0].message.content or ""


def test_allow_forwards_and_sends_every_text(setup: tuple[str, ChatUpstream, GuardService]) -> None:
    url, up, service = setup
    assert _ask(url, "svc", "hello there")
    assert service.seen[-1] == {"guardrail": "svc", "where": "request", "texts": ["be brief", "hello there"]}
    assert up.bodies[-1]["messages"][-1]["content"] == "hello there"


def test_block_is_a_400_with_the_reason_and_nothing_upstream(setup: tuple[str, ChatUpstream, GuardService]) -> None:
    url, up, _ = setup
    before = len(up.bodies)
    with pytest.raises(openai.BadRequestError) as info:
        _ask(url, "svc", "please BLOCK me")
    assert info.value.code == "guardrail_blocked"
    assert "policy 7" in str(info.value)
    assert len(up.bodies) == before


def test_redact_replaces_the_texts(setup: tuple[str, ChatUpstream, GuardService]) -> None:
    url, up, _ = setup
    _ask(url, "svc", "REDACT secret-123 now")
    assert up.bodies[-1]["messages"][-1]["content"] == "REDACT [gone] now"


def test_slow_and_down_fail_closed(setup: tuple[str, ChatUpstream, GuardService]) -> None:
    url, up, _ = setup
    before = len(up.bodies)
    for model, text in (("svc", "SLOW please"), ("closed", "hi")):
        with pytest.raises(openai.BadRequestError) as info:
            _ask(url, model, text)
        assert info.value.code == "guardrail_blocked"
    assert len(up.bodies) == before


def test_down_fail_open_forwards(setup: tuple[str, ChatUpstream, GuardService]) -> None:
    url, up, _ = setup
    assert _ask(url, "open", "hi")
    assert up.bodies[-1]["messages"][-1]["content"] == "hi"
