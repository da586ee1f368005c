"""Gemini ``usageMetadata`` ⇄ canonical ``Usage``.

Gemini's counts are per-response totals repeated on every chunk (the last chunk is complete), so
the decoder keeps the last one and never adds them up. ``promptTokenCount`` already includes
``cachedContentTokenCount`` (canonical ``input`` meaning); ``candidatesTokenCount`` EXCLUDES
``thoughtsTokenCount``, so canonical ``output`` = candidates + thoughts.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count
from gateway.events import Usage


def convert_usage(meta: object) -> Usage | None:
    """A ``usageMetadata`` object (``None`` when it is not an object)."""
    if not isinstance(meta, dict):
        return None
    prompt = count(meta.get("promptTokenCount"))
    candidates = count(meta.get("candidatesTokenCount"))
    thoughts = count(meta.get("thoughtsTokenCount"))
    output = None
    if candidates is not None or thoughts is not None:
        output = (candidates or 0) + (thoughts or 0)
    return Usage(
        input=prompt,
        output=output,
        cache_read=count(meta.get("cachedContentTokenCount")),
        cache_write=None,
        reasoning=thoughts,
    )


def render_usage(usage: Usage | None) -> dict[str, Any]:
    """usageMetadata with the integers the SDKs read; thoughts/cached only when non-zero (as Gemini)."""
    if usage is None:
        usage = Usage()
    prompt = usage.input or 0
    output = usage.output or 0
    reasoning = usage.reasoning or 0
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": max(output - reasoning, 0),
        "totalTokenCount": prompt + output,
    }
    if usage.cache_read:
        out["cachedContentTokenCount"] = usage.cache_read
    if reasoning:
        out["thoughtsTokenCount"] = reasoning
    return out
