"""Gemini ``usageMetadata`` ⇄ canonical ``Usage``.

Gemini's counts are per-response totals repeated on every chunk (the last chunk is complete), so
the decoder keeps the last one and never adds them up. ``promptTokenCount`` already includes
``cachedContentTokenCount`` (canonical ``input`` meaning); ``candidatesTokenCount`` EXCLUDES
``thoughtsTokenCount``, so canonical ``output`` = candidates + thoughts.
"""

from __future__ import annotations

from typing import Any

from gateway.events import Usage


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def from_gemini(meta: dict[str, Any]) -> Usage:
    prompt = _int(meta.get("promptTokenCount"))
    candidates = _int(meta.get("candidatesTokenCount"))
    thoughts = _int(meta.get("thoughtsTokenCount"))
    output = None
    if candidates is not None or thoughts is not None:
        output = (candidates or 0) + (thoughts or 0)
    return Usage(
        input=prompt,
        output=output,
        cache_read=_int(meta.get("cachedContentTokenCount")),
        cache_write=None,
        reasoning=thoughts,
    )


def early(meta: dict[str, Any]) -> Usage:
    """The prompt side of a first chunk's ``usageMetadata``: what is known before the answer.
    (Output counts so far are left out: clients that add the start's output to the end's count
    would count them twice.)"""
    return Usage(input=_int(meta.get("promptTokenCount")), cache_read=_int(meta.get("cachedContentTokenCount")))


def to_gemini(usage: Usage) -> dict[str, Any]:
    """usageMetadata with the integers the SDKs read; thoughts/cached only when non-zero (as Gemini)."""
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
