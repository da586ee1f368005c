"""Vendors' own conventions (issue 30 items 2, 6, 7), through every caller SDK, stream and whole.

The upstream is the loopback fake replaying captures written from the vendors' documented shapes:
``captures/openai-chat/mistral_list_deltas.sse`` (Magistral's ``delta.content`` as a list of
``thinking`` and ``text`` parts), ``xai_usage.sse`` (Grok's ``completion_tokens`` without the
reasoning: ``total_tokens`` = prompt + completion + reasoning) and
``error_429_insufficient_quota.json`` (OpenAI's spent-account 429).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.callers import CALLERS, ERRORS, openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread
from tests.test_matrix import CALLER_DIALECTS

# canonical output of each capture (every generated token) and the reasoning part of it
ANSWERS = {
    "mistral_list_deltas": {"text": "Hello from Mistral.", "input": 10, "output": 25, "reasoning": None},
    "xai_usage": {"text": "Hello from Grok.", "input": 30, "output": 105, "reasoning": 100},
}


def output_seen(caller: str, usage: dict[str, Any]) -> int:
    """Every generated token as the caller's own usage states it."""
    if caller == "gemini":
        return int(usage.get("candidates_token_count") or 0) + int(usage.get("thoughts_token_count") or 0)
    if caller == "gemini-interactions":
        return int(usage["total_output_tokens"]) + int(usage.get("total_thought_tokens") or 0)
    if caller == "openai-chat":
        return int(usage["completion_tokens"])
    return int(usage["output_tokens"])


def chat_stream_passthrough(url: str, model: str) -> tuple[str, str, dict[str, Any] | None]:
    """A Chat caller of a Chat upstream gets the upstream's own frames (the fast path): Mistral's
    list-shaped content as Mistral sends it, read here as an application of Mistral would."""
    text, thinking, usage = "", "", None
    stream = openai_client(url).chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            content: Any = choice.delta.content
            if isinstance(content, str):
                text += content
            for part in content if isinstance(content, list) else []:
                if part.get("type") == "text":
                    text += part["text"]
                elif part.get("type") == "thinking":
                    thinking += "".join(p.get("text", "") for p in part["thinking"])
    return text, thinking, usage


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("capture", list(ANSWERS))
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_vendor_capture_reaches_every_caller(gateway: Any, caller: str, capture: str, stream: bool) -> None:
    want = ANSWERS[capture]
    model = f"openai-chat--{capture}"
    if caller == "openai-chat" and stream:
        text, thinking, usage = chat_stream_passthrough(gateway.url, model)
        assert text == want["text"]
        if capture == "mistral_list_deltas":
            assert thinking == "The user wants a greeting."
        assert usage is not None and usage["prompt_tokens"] == want["input"]
        return
    out = CALLERS[caller](gateway.url, model, "text", stream)
    assert out.text == want["text"]  # list-shaped deltas: the text parts, and no thinking in the text
    assert output_seen(caller, out.usage) == want["output"]  # xAI: the reasoning counted in output


def test_mistral_thinking_parts_are_thinking_for_an_anthropic_caller(gateway: Any) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=gateway.url, api_key="sk-caller")
    message = client.messages.create(
        model="openai-chat--mistral_list_deltas",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "hi"}],
    )
    kinds = [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in message.content]
    assert kinds == [("thinking", "The user wants a greeting."), ("text", "Hello from Mistral.")]


def test_a_spent_account_is_tried_once_and_the_fallback_answers() -> None:
    """A 429 ``insufficient_quota`` cannot heal by waiting: one attempt (not 1 + max_retries), then
    the fallback at once; with no fallback the caller gets the 429 after that one attempt."""
    fake = FakeUpstream()
    with ServerThread(fake) as upstream:
        config = gateway_config(upstream.url)
        for p in config["providers"]:
            p.update(max_retries=2, retry_backoff=0)
        config["routes"][:0] = [
            {
                "model": "spent",
                "provider": "up-openai-chat",
                "upstream_model": "a--error_429_insufficient_quota",
                "fallbacks": ["up-anthropic:b--text"],
            },
            {"model": "spent-alone", "provider": "up-openai-chat", "upstream_model": "c--error_429_insufficient_quota"},
        ]
        with ServerThread(create_app(Settings(**config))) as gateway:
            client = openai_client(gateway.url)
            reply = client.chat.completions.create(model="spent", messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content == "Hello from the gateway. 你好 — ok!"
            assert fake.hits["a--error_429_insufficient_quota"] == 1
            assert fake.hits["b--text"] == 1
            with pytest.raises(ERRORS["openai-chat"]) as info:
                client.chat.completions.create(model="spent-alone", messages=[{"role": "user", "content": "hi"}])
            assert isinstance(info.value, openai.RateLimitError)
            assert info.value.code == "insufficient_quota"
            assert fake.hits["c--error_429_insufficient_quota"] == 1
