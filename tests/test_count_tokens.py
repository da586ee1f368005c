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
    counted = client.responses.input_tokens.count(model="anthropic--text", input=LONG, instructions="Be brief.")
    assert counted.object == "response.input_tokens" and 400 <= counted.input_tokens <= 700
    raw = httpx.post(gateway.url + "/v1/responses/input_tokens", json={"model": "openai-chat--text", "input": "hi"}, timeout=10)
    assert raw.status_code == 200 and raw.headers.get("x-gateway-estimate") == "1"
    bad = httpx.post(gateway.url + "/v1/responses/input_tokens", json={"model": "no-such-model", "input": "hi"}, timeout=10)
    assert bad.status_code == 404 and bad.json()["error"]["type"]
