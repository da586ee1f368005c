"""Keepalives keep flowing while an answer webhook (or presidio) holds a streamed block until it ends: the relay
writes nothing for the whole block, so without them a long answer lets the caller's (or a proxy's)
idle timeout fire. A slow upstream streams one block over ~1 s; the gateway's keepalive is 0.2 s;
the callers are raw HTTP streams that stamp every read (the anthropic dialect's ``event: ping``
and the OpenAI chat dialect's SSE comment)."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.guardrails.test_webhook import GuardService
from tests.support.fake_upstream import ServerThread

PRESIDIO = all(importlib.util.find_spec(m) for m in ("presidio_analyzer", "spacy"))
KEEPALIVE = 0.2
CHUNKS, PAUSE = 20, 0.05  # one block over ~1 s


class SlowChatUpstream:
    """An OpenAI-chat upstream streaming "word0 word1 ... REDACT secret-123 mail <an email>" a word every PAUSE."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            obj = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "text",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + orjson.dumps(obj) + b"\n\n"

        await send(
            {"type": "http.response.body", "body": chunk({"role": "assistant", "content": ""}), "more_body": True}
        )
        for i in range(CHUNKS):
            await asyncio.sleep(PAUSE)
            await send({"type": "http.response.body", "body": chunk({"content": f"word{i} "}), "more_body": True})
        await send(
            {
                "type": "http.response.body",
                "body": chunk({"content": "REDACT secret-123 mail jane.roe@example.com"}),
                "more_body": True,
            }
        )
        await send({"type": "http.response.body", "body": chunk({}, "stop") + b"data: [DONE]\n\n"})


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    with ServerThread(SlowChatUpstream()) as upstream, ServerThread(GuardService()) as guard:
        hook = {"kind": "webhook", "url": guard.url + "/check", "timeout_ms": 2000, "on": ["response"]}
        config = {
            "server": {"keepalive_seconds": KEEPALIVE},
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [
                {"name": "redact", **hook, "action": "redact"},
                {"name": "block", **hook, "action": "block"},
            ],
            "routes": [
                {"model": "text", "provider": "up", "guardrails": ["redact"]},
                {"model": "blocked", "provider": "up", "guardrails": ["block"]},
            ],
        }
        if PRESIDIO:
            presidio = {"kind": "presidio", "model": "blank:en", "entities": ["EMAIL_ADDRESS"], "on": ["response"]}
            config["guardrails"] += [  # type: ignore[operator]
                {"name": "presidio", **presidio, "action": "redact"},
                {"name": "presidio-block", **presidio, "action": "block"},
            ]
            config["routes"] += [  # type: ignore[operator]
                {"model": "presidio", "provider": "up", "guardrails": ["presidio"]},
                {"model": "presidio-blocked", "provider": "up", "guardrails": ["presidio-block"]},
            ]
        with ServerThread(create_app(Settings(**config))) as gw:
            yield gw.url


CALLERS = {
    "anthropic": ("/v1/messages", {"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}, b"event: ping"),
    "openai-chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, b": keepalive"),
}


def _stamped(url: str, path: str, body: dict[str, Any]) -> list[tuple[float, bytes]]:
    reads = []
    with httpx.stream("POST", url + path, json=body, timeout=10) as resp:
        assert resp.status_code == 200
        t0 = time.monotonic()
        for data in resp.iter_raw():
            reads.append((time.monotonic() - t0, data))
    return reads


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize(
    ("model", "ending"),
    [
        ("text", b"[gone]"),
        ("blocked", b"blocked the answer"),
        ("presidio", b"[REDACTED:EMAIL_ADDRESS]"),
        ("presidio-blocked", b"blocked the answer"),
    ],
)
def test_keepalives_flow_while_a_guardrail_holds_the_block(
    gateway: str, caller: str, model: str, ending: bytes
) -> None:
    """A webhook or presidio with redact/block holds each block until it ends."""
    if model.startswith("presidio") and not PRESIDIO:
        pytest.skip("the presidio extra is not installed")
    path, body, marker = CALLERS[caller]
    reads = _stamped(gateway, path, {**body, "model": model, "stream": True})
    whole = b"".join(data for _, data in reads)
    assert ending in whole  # the verdict came: redacted text, or the block's error
    assert b"word3" not in whole or not model.endswith("blocked")
    first_text = next(at for at, data in reads if b"word0" in data or b"blocked the answer" in data)
    assert first_text >= CHUNKS * PAUSE * 0.8  # the block was held until it ended
    pings = [at for at, data in reads if marker in data and at < first_text]
    assert len(pings) >= 3, reads
    stamps = [0.0, *[at for at, _ in reads if at <= first_text]]
    assert max(b - a for a, b in itertools.pairwise(stamps)) < KEEPALIVE + 0.3, reads
