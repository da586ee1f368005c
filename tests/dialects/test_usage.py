"""Each dialect's ``usage.py``: wire usage → canonical ``Usage`` and back, table-driven
(the field table is gateway/dialects/usage_fields.py)."""

from __future__ import annotations

import importlib
import logging
from typing import Any

import pytest

from gateway.dialects.common import UPSTREAM
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
        Usage(13, 5, 1, None, 2, tool_use=5),  # tool-use tokens are input the model read
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


# One row per vendor convention, from each vendor's documented usage object: what the gateway reads,
# and the check that its reading adds up to the total the vendor itself reports (input + output =
# total: every token counted once, none dropped). docs/vendor-conventions.md says the same in prose.
VENDORS: list[tuple[str, str, dict[str, Any], Usage, str]] = [
    (
        "openai",
        "openai-chat",
        {
            "prompt_tokens": 20,
            "completion_tokens": 150,
            "total_tokens": 170,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 128},
        },
        Usage(20, 150, 0, None, 128),
        "total_tokens",
    ),
    (  # reasoning outside completion_tokens: total = prompt + completion + reasoning
        "xai",
        "openai-chat",
        {
            "prompt_tokens": 32,
            "completion_tokens": 9,
            "total_tokens": 1176,
            "prompt_tokens_details": {"text_tokens": 32, "audio_tokens": 0, "image_tokens": 0, "cached_tokens": 6},
            "completion_tokens_details": {
                "reasoning_tokens": 1135,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        Usage(32, 1144, 6, None, 1135),
        "total_tokens",
    ),
    (
        "xai-responses",
        "openai-responses",
        {
            "input_tokens": 32,
            "output_tokens": 9,
            "total_tokens": 1176,
            "input_tokens_details": {"cached_tokens": 6},
            "output_tokens_details": {"reasoning_tokens": 1135},
        },
        Usage(32, 1144, 6, None, 1135),
        "total_tokens",
    ),
    (  # cache hits in its own fields; hit + miss = prompt
        "deepseek",
        "openai-chat",
        {
            "prompt_tokens": 64,
            "completion_tokens": 300,
            "total_tokens": 364,
            "prompt_cache_hit_tokens": 48,
            "prompt_cache_miss_tokens": 16,
            "completion_tokens_details": {"reasoning_tokens": 250},
        },
        Usage(64, 300, 48, None, 250),
        "total_tokens",
    ),
    (  # OpenAI's meanings; thinking inside completion_tokens, no details
        "mistral",
        "openai-chat",
        {"prompt_tokens": 12, "completion_tokens": 480, "total_tokens": 492},
        Usage(12, 480, None, None, None),
        "total_tokens",
    ),
    (  # OpenAI's fields plus timings (x_groq.usage in a stream)
        "groq",
        "openai-chat",
        {
            "queue_time": 0.05,
            "prompt_tokens": 40,
            "prompt_time": 0.002,
            "completion_tokens": 120,
            "completion_time": 0.2,
            "total_tokens": 160,
            "total_time": 0.202,
            "completion_tokens_details": {"reasoning_tokens": 90},
        },
        Usage(40, 120, None, None, 90),
        "total_tokens",
    ),
    (  # cache hits as a top-level cached_tokens
        "moonshot",
        "openai-chat",
        {"prompt_tokens": 100, "completion_tokens": 30, "total_tokens": 130, "cached_tokens": 80},
        Usage(100, 30, 80, None, None),
        "total_tokens",
    ),
    (  # DashScope's compatible mode: OpenAI's details
        "alibaba",
        "openai-chat",
        {
            "prompt_tokens": 22,
            "completion_tokens": 610,
            "total_tokens": 632,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 540},
        },
        Usage(22, 610, 0, None, 540),
        "total_tokens",
    ),
    (  # reasoning_tokens at the top level (inside completion); citations and searches are not tokens read here
        "perplexity",
        "openai-chat",
        {
            "prompt_tokens": 9,
            "completion_tokens": 700,
            "total_tokens": 709,
            "citation_tokens": 3000,
            "num_search_queries": 5,
            "reasoning_tokens": 400,
        },
        Usage(9, 700, None, None, 400),
        "total_tokens",
    ),
    (  # Google: thoughts and tool-use (Google Search results) outside the prompt / candidates counts
        "gemini",
        "gemini",
        {
            "promptTokenCount": 10,
            "candidatesTokenCount": 40,
            "thoughtsTokenCount": 100,
            "toolUsePromptTokenCount": 900,
            "totalTokenCount": 1050,
        },
        Usage(910, 140, None, None, 100, tool_use=900),
        "totalTokenCount",
    ),
    (
        "interactions",
        "gemini-interactions",
        {
            "total_input_tokens": 11,
            "total_output_tokens": 90,
            "total_thought_tokens": 245,
            "total_tool_use_tokens": 1200,
            "total_cached_tokens": 0,
            "total_tokens": 1546,
        },
        Usage(1211, 335, 0, None, 245, tool_use=1200),
        "total_tokens",
    ),
]


@pytest.mark.parametrize("dialect,wire,want,total", [v[1:] for v in VENDORS], ids=[v[0] for v in VENDORS])
def test_vendor_convention_adds_up_to_its_total(
    dialect: str, wire: dict[str, Any], want: Usage, total: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "gateway.dialects"):
        got = usage_module(dialect).convert_usage(wire)
    assert got == want
    assert got.input is not None and got.output is not None
    assert got.input + got.output == wire[total]  # every token the vendor billed, counted once
    assert not [r for r in caplog.records if "do not add up" in r.getMessage()]


@pytest.mark.parametrize(
    "dialect,wire",
    [
        ("openai-chat", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 99}),
        ("openai-responses", {"input_tokens": 10, "output_tokens": 5, "total_tokens": 99}),
        ("gemini", {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 99}),
        ("gemini-interactions", {"total_input_tokens": 10, "total_output_tokens": 5, "total_tokens": 99}),
    ],
)
def test_parts_that_do_not_add_up_are_a_warning_naming_the_provider(
    dialect: str, wire: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    token = UPSTREAM.set(f"vendor-of-{dialect}")
    try:
        with caplog.at_level(logging.WARNING, "gateway.dialects"):
            got = usage_module(dialect).convert_usage(wire)
    finally:
        UPSTREAM.reset(token)
    assert got is not None and (got.input, got.output) == (10, 5)  # the dialect's own reading is kept
    [record] = [r for r in caplog.records if "do not add up" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert f"vendor-of-{dialect}" in record.getMessage() and "99" in record.getMessage()


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


@pytest.mark.parametrize("dialect", ["gemini", "gemini-interactions"])
def test_tool_use_tokens_round_trip_inside_input(dialect: str) -> None:
    usage = Usage(input=1000, output=50, reasoning=20, tool_use=900)
    wire = usage_module(dialect).render_usage(usage)
    back = usage_module(dialect).convert_usage(wire)
    assert back is not None and (back.input, back.output, back.tool_use) == (1000, 50, 900)
