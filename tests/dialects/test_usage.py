"""Each dialect's ``usage.py``: wire usage → canonical ``Usage`` and back, table-driven
(the field table is gateway/dialects/usage_fields.py)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from gateway.dialects.registry import MODULES
from gateway.events import Usage


def usage_module(dialect: str) -> Any:
    return importlib.import_module(f"{MODULES[dialect]}.usage")


CONVERT: list[tuple[str, Any, Usage | None]] = [
    # anthropic: input excludes cache reads and writes; no reasoning count
    (
        "anthropic",
        {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20},
        Usage(130, 5, 100, 20, None),
    ),
    ("anthropic", {"output_tokens": 7}, Usage(None, 7, None, None, None)),
    ("anthropic", {"input_tokens": 3.0, "output_tokens": "4"}, Usage(3, 4, None, None, None)),
    ("anthropic", {"input_tokens": True, "output_tokens": 1.5}, Usage(None, None, None, None, None)),
    ("anthropic", None, None),
    # openai-chat: already canonical; DeepSeek's cache-hit field as a fallback
    (
        "openai-chat",
        {
            "prompt_tokens": 50,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 30},
            "completion_tokens_details": {"reasoning_tokens": 8},
        },
        Usage(50, 20, 30, None, 8),
    ),
    (
        "openai-chat",
        {"prompt_tokens": 50, "completion_tokens": 20, "prompt_cache_hit_tokens": 12},
        Usage(50, 20, 12, None, None),
    ),
    ("openai-chat", {"prompt_tokens": None}, Usage(None, None, None, None, None)),
    ("openai-chat", [1, 2], None),
    # openai-responses
    (
        "openai-responses",
        {
            "input_tokens": 9,
            "output_tokens": 4,
            "input_tokens_details": {"cached_tokens": 2},
            "output_tokens_details": {"reasoning_tokens": 1},
        },
        Usage(9, 4, 2, None, 1),
    ),
    ("openai-responses", {"input_tokens": 9}, Usage(9, None, None, None, None)),
    ("openai-responses", "n/a", None),
    # gemini: candidates exclude thoughts
    (
        "gemini",
        {"promptTokenCount": 11, "candidatesTokenCount": 6, "thoughtsTokenCount": 4, "cachedContentTokenCount": 3},
        Usage(11, 10, 3, None, 4),
    ),
    ("gemini", {"promptTokenCount": 11}, Usage(11, None, None, None, None)),
    ("gemini", {"thoughtsTokenCount": 4}, Usage(None, 4, None, None, 4)),
    ("gemini", None, None),
    # gemini-interactions: output excludes thought tokens
    (
        "gemini-interactions",
        {
            "total_input_tokens": 8,
            "total_output_tokens": 3,
            "total_thought_tokens": 2,
            "total_cached_tokens": 1,
            "total_tool_use_tokens": 5,
        },
        Usage(8, 5, 1, None, 2),
    ),
    ("gemini-interactions", {"total_input_tokens": 8}, Usage(8, None, None, None, None)),
    ("gemini-interactions", 42, None),
    # bedrock-converse: input excludes the cache, unless totalTokens says it is inside
    (
        "bedrock-converse",
        {
            "inputTokens": 10,
            "outputTokens": 5,
            "totalTokens": 45,
            "cacheReadInputTokens": 20,
            "cacheWriteInputTokens": 10,
        },
        Usage(40, 5, 20, 10, None),
    ),
    (
        "bedrock-converse",
        {"inputTokens": 40, "outputTokens": 5, "totalTokens": 45, "cacheReadInputTokens": 20},
        Usage(40, 5, 20, None, None),
    ),
    ("bedrock-converse", None, None),
]


@pytest.mark.parametrize("dialect,wire,want", CONVERT, ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(CONVERT)])
def test_convert_usage(dialect: str, wire: Any, want: Usage | None) -> None:
    assert usage_module(dialect).convert_usage(wire) == want


RENDER: list[tuple[str, Usage | None, dict[str, Any]]] = [
    (
        "anthropic",
        Usage(130, 5, 100, 20),
        {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 5},
    ),
    (
        "anthropic",
        None,
        {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 0},
    ),
    (
        "openai-chat",
        Usage(50, 20, 30, None, 8),
        {
            "prompt_tokens": 50,
            "completion_tokens": 20,
            "total_tokens": 70,
            "prompt_tokens_details": {"cached_tokens": 30},
            "completion_tokens_details": {"reasoning_tokens": 8},
        },
    ),
    ("openai-chat", None, {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
    (
        "openai-responses",
        Usage(9, 4, 2, None, 1),
        {
            "input_tokens": 9,
            "output_tokens": 4,
            "total_tokens": 13,
            "input_tokens_details": {"cached_tokens": 2},
            "output_tokens_details": {"reasoning_tokens": 1},
        },
    ),
    (
        "gemini",
        Usage(11, 10, 3, None, 4),
        {
            "promptTokenCount": 11,
            "candidatesTokenCount": 6,
            "thoughtsTokenCount": 4,
            "cachedContentTokenCount": 3,
            "totalTokenCount": 21,
        },
    ),
    ("gemini", Usage(11, 6), {"promptTokenCount": 11, "candidatesTokenCount": 6, "totalTokenCount": 17}),
    (
        "gemini-interactions",
        Usage(8, 5, 1, None, 2),
        {
            "total_input_tokens": 8,
            "total_output_tokens": 3,
            "total_thought_tokens": 2,
            "total_cached_tokens": 1,
            "total_tokens": 13,
        },
    ),
]


@pytest.mark.parametrize("dialect,usage,want", RENDER, ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(RENDER)])
def test_render_usage(dialect: str, usage: Usage | None, want: dict[str, Any]) -> None:
    got = usage_module(dialect).render_usage(usage)
    assert {k: got[k] for k in want} == want
    if dialect == "gemini" and not (usage and usage.reasoning):
        assert "thoughtsTokenCount" not in got  # only when non-zero, as Gemini writes it


@pytest.mark.parametrize("dialect", [d for d in MODULES if hasattr(usage_module(d), "render_usage")])
def test_render_then_convert_keeps_the_counts(dialect: str) -> None:
    usage = Usage(input=120, output=40, cache_read=100, cache_write=None, reasoning=10)
    if dialect == "anthropic":  # no reasoning count on Anthropic's wire
        usage.reasoning = None
    back = usage_module(dialect).convert_usage(usage_module(dialect).render_usage(usage))
    assert back is not None
    assert (back.input, back.output, back.cache_read) == (usage.input, usage.output, usage.cache_read)
    assert back.reasoning in (usage.reasoning, 0)
