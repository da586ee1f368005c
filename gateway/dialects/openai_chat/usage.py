"""Chat ``usage`` ⇄ the canonical ``Usage`` event.

Chat's meanings already are the canonical ones: ``prompt_tokens`` includes
``prompt_tokens_details.cached_tokens`` and ``completion_tokens`` includes
``completion_tokens_details.reasoning_tokens``. So decoding only renames; nothing is summed.
DeepSeek-style servers report cache hits as ``prompt_cache_hit_tokens``; that is read as
``cache_read`` when the OpenAI detail is missing.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count
from gateway.events import Usage


def convert_usage(usage: object) -> Usage | None:
    """A chunk's or a completion's ``usage`` object (``None`` when it is not an object)."""
    if not isinstance(usage, dict):
        return None
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cache_read = count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    if cache_read is None:
        cache_read = count(usage.get("prompt_cache_hit_tokens"))
    reasoning = count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else None
    return Usage(
        input=count(usage.get("prompt_tokens")),
        output=count(usage.get("completion_tokens")),
        cache_read=cache_read,
        cache_write=None,  # Chat does not report cache writes
        reasoning=reasoning,
    )


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
