"""Chat ``usage`` ⇄ the canonical ``Usage`` event.

OpenAI's meanings already are the canonical ones: ``prompt_tokens`` includes
``prompt_tokens_details.cached_tokens`` and ``completion_tokens`` includes
``completion_tokens_details.reasoning_tokens``. The compatible vendors' own conventions, each read
here (the table is gateway/dialects/usage_fields.py; docs/vendor-conventions.md):

* xAI's ``completion_tokens`` leaves the reasoning out (``total_tokens`` = prompt + completion +
  reasoning): told by the reported total, and the reasoning added back (``output_tokens``).
* DeepSeek reports cache hits as ``prompt_cache_hit_tokens`` (+ ``prompt_cache_miss_tokens`` =
  ``prompt_tokens``), Moonshot as a top-level ``cached_tokens``: read as ``cache_read`` when the
  OpenAI detail is missing.
* Perplexity reports ``reasoning_tokens`` at the top level (inside ``completion_tokens``, as
  OpenAI's); its ``citation_tokens`` and ``num_search_queries`` are billing details, not counted.
* Mistral, Groq and DashScope (Alibaba) follow OpenAI's meanings. Where a stream carries the
  object (Groq: ``x_groq.usage``; Moonshot: inside the last choice) is the decoder's business.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count, usage_mismatch
from gateway.events import Usage

DIALECT = "openai-chat"


def convert_usage(usage: object) -> Usage | None:
    """A chunk's or a completion's ``usage`` object (``None`` when it is not an object)."""
    if not isinstance(usage, dict):
        return None
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cache_read = count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    if cache_read is None:
        cache_read = count(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
    if cache_read is None:
        cache_read = count(usage.get("cached_tokens"))  # Moonshot
    reasoning = count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else None
    if reasoning is None:
        reasoning = count(usage.get("reasoning_tokens"))  # Perplexity
    prompt = count(usage.get("prompt_tokens"))
    completion = count(usage.get("completion_tokens"))
    return Usage(
        input=prompt,
        output=output_tokens(prompt, completion, reasoning, count(usage.get("total_tokens"))),
        cache_read=cache_read,
        cache_write=None,  # Chat does not report cache writes
        reasoning=reasoning,
    )


def output_tokens(prompt: int | None, completion: int | None, reasoning: int | None, total: int | None) -> int | None:
    """Every generated token, whichever convention the upstream follows, told by its own total.

    OpenAI's ``completion_tokens`` includes the reasoning (``total = prompt + completion``); xAI's
    leaves it out (``total = prompt + completion + reasoning``). When the reasoning is not zero the
    two totals differ, so the upstream's total says which one it follows — whoever serves it (xAI
    itself, Vertex's or OpenRouter's relay of Grok, a local proxy), without a list of hosts to keep.
    A total that fits neither is logged as a warning naming the provider, and the OpenAI reading
    is kept. No total, or no reasoning: nothing to tell, ``completion_tokens`` as it is."""
    if completion is None or prompt is None or total is None or total == prompt + completion:
        return completion
    if reasoning and total == prompt + completion + reasoning:
        return completion + reasoning
    usage_mismatch(
        DIALECT,
        "total_tokens",
        total,
        {"prompt_tokens": prompt, "completion_tokens": completion, "reasoning_tokens": reasoning},
    )
    return completion


def render_usage(usage: Usage | None) -> dict[str, Any]:
    """The ``usage`` object a Chat caller sees. The SDK requires the three integer totals, so an
    unknown count is written as 0 here (and only here)."""
    if usage is None:
        usage = Usage()
    prompt = usage.input or 0
    completion = usage.output or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read or 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning or 0},
    }
