"""The registry is the one list of dialects: every codec answers the pipeline's questions, the
caller dialects are those that declare routes, and a request is recognised as the SDK that sent it."""

from __future__ import annotations

import pytest

from gateway.dialects import registry
from gateway.dialects.base import Resumable


def test_every_codec_declares_what_the_pipeline_reads() -> None:
    for name in registry.UPSTREAM_DIALECTS:
        codec = registry.codec_for(name)
        assert codec.name == name
        assert codec.identity.otel_provider and codec.identity.otel_operation
        for member in ("routes", "rate_limit_headers", "models", "counting", "stored", "own_api"):
            assert hasattr(codec, member), (name, member)


def test_callers_are_the_dialects_with_routes_and_bedrock_is_upstream_only() -> None:
    callers = registry.caller_dialects()
    assert set(callers) == {"anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"}
    assert "bedrock-converse" in registry.UPSTREAM_DIALECTS and "bedrock-converse" not in callers
    assert callers[-1] == registry.FALLBACK_CALLER  # recognises anything: asked last


def test_only_stored_dialects_have_a_policy_and_only_interactions_resume() -> None:
    stored = {n for n in registry.UPSTREAM_DIALECTS if registry.codec_for(n).stored is not None}
    assert stored == {"openai-responses", "gemini-interactions"}
    assert {n for n in registry.UPSTREAM_DIALECTS if isinstance(registry.codec_for(n), Resumable)} == {
        "gemini-interactions"
    }


@pytest.mark.parametrize(
    ("path", "headers", "query", "dialect"),
    [
        ("/v1/messages", [], [], "anthropic"),
        ("/v1/models", [b"anthropic-version"], [], "anthropic"),
        ("/v1beta/interactions/x", [], [], "gemini-interactions"),
        ("/v1/interactions", [], [], "gemini-interactions"),
        ("/v1beta/models/text:generateContent", [], [], "gemini"),
        ("/v1/models", [b"x-goog-api-key"], [], "gemini"),
        ("/v1/models", [], ["key"], "gemini"),
        ("/v1/responses/type", [], [], "openai-responses"),
        ("/responses", [], [], "openai-responses"),
        ("/v1/nothing", [], [], "openai-chat"),
    ],
)
def test_the_sdk_is_recognised(path: str, headers: list[bytes], query: list[str], dialect: str) -> None:
    assert registry.guess_caller(path, headers, query) == dialect
