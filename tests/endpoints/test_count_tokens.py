"""Token counting in each SDK: Anthropic count_tokens, Gemini countTokens, OpenAI input_tokens."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.callers import anthropic_client, gemini_client, openai_client

LONG = "word " * 400  # 2,000 characters: ~500 tokens by any count


def test_anthropic_count_tokens(gateway: Any) -> None:
    client = anthropic_client(gateway.url)
    short = client.messages.count_tokens(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
    long = client.messages.count_tokens(model="openai-chat--text", messages=[{"role": "user", "content": LONG}])
    assert 0 < short.input_tokens < 50 and 400 <= long.input_tokens <= 700


def test_gemini_count_tokens(gateway: Any) -> None:
    client = gemini_client(gateway.url)
    counted = client.models.count_tokens(model="openai-chat--text", contents=LONG)
    assert 400 <= (counted.total_tokens or 0) <= 700


def test_openai_responses_input_tokens(gateway: Any) -> None:
    client = openai_client(gateway.url)
    counted = client.responses.input_tokens.count(model="openai-chat--text", input=LONG, instructions="Be brief.")
    assert counted.object == "response.input_tokens" and 400 <= counted.input_tokens <= 700
    raw = httpx.post(
        gateway.url + "/v1/responses/input_tokens", json={"model": "openai-chat--text", "input": "hi"}, timeout=10
    )
    assert raw.status_code == 200 and raw.headers.get("x-gateway-estimate") == "1"
    bad = httpx.post(
        gateway.url + "/v1/responses/input_tokens", json={"model": "no-such-model", "input": "hi"}, timeout=10
    )
    assert bad.status_code == 404 and bad.json()["error"]["type"]


def test_counts_come_from_the_upstreams_own_endpoint_when_it_has_one(gateway: Any, fake: Any) -> None:
    from tests.support.fake_upstream import COUNTED_TOKENS

    client = anthropic_client(gateway.url)
    counted = client.messages.count_tokens(
        model="anthropic--text", system="Be brief.", messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens == COUNTED_TOKENS
    sent = fake.last("anthropic")
    assert sent.path == "/v1/messages/count_tokens" and sent.headers["x-api-key"] == "sk-upstream-anthropic-secret"
    assert "max_tokens" not in sent.body and "stream" not in sent.body and sent.body["messages"]
    gemini = gemini_client(gateway.url)
    assert gemini.models.count_tokens(model="gemini--text", contents="hi").total_tokens == COUNTED_TOKENS
    assert fake.last("gemini").path == "/v1beta/models/gemini--text:countTokens"
    raw = httpx.post(
        gateway.url + "/v1/responses/input_tokens", json={"model": "gemini--text", "input": "hi"}, timeout=10
    )
    assert (
        raw.json() == {"object": "response.input_tokens", "input_tokens": COUNTED_TOKENS}
        and "x-gateway-estimate" not in raw.headers
    )
