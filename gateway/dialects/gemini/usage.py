"""Gemini ``usageMetadata`` ⇄ canonical ``Usage``.

Gemini's counts are per-response totals repeated on every chunk (the last chunk is complete), so
the decoder keeps the last one and never adds them up. ``promptTokenCount`` already includes
``cachedContentTokenCount`` (canonical ``input`` meaning); ``candidatesTokenCount`` EXCLUDES
``thoughtsTokenCount``, so canonical ``output`` = candidates + thoughts. ``toolUsePromptTokenCount``
(the results of server-side tools such as Google Search, fed to the model) is outside
``promptTokenCount`` (``totalTokenCount`` = prompt + candidates + thoughts + tool use): canonical
``input`` adds it and ``tool_use`` keeps it visible. A ``totalTokenCount`` that does not add up is
logged as a warning naming the provider.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count, usage_mismatch
from gateway.events import Usage

DIALECT = "gemini"


def convert_usage(meta: object) -> Usage | None:
    """A ``usageMetadata`` object (``None`` when it is not an object)."""
    if not isinstance(meta, dict):
        return None
    prompt = count(meta.get("promptTokenCount"))
    candidates = count(meta.get("candidatesTokenCount"))
    thoughts = count(meta.get("thoughtsTokenCount"))
    tool_use = count(meta.get("toolUsePromptTokenCount"))
    output = None
    if candidates is not None or thoughts is not None:
        output = (candidates or 0) + (thoughts or 0)
    canonical = prompt
    if prompt is not None and tool_use:
        canonical = prompt + tool_use  # outside promptTokenCount: totalTokenCount counts it on its own
    total = count(meta.get("totalTokenCount"))
    if total is not None and canonical is not None and output is not None and total != canonical + output:
        if tool_use and prompt is not None and total == prompt + output:  # a server that counted it inside the prompt
            canonical = prompt
        else:
            usage_mismatch(
                DIALECT,
                "totalTokenCount",
                total,
                {
                    "promptTokenCount": prompt,
                    "candidatesTokenCount": candidates,
                    "thoughtsTokenCount": thoughts,
                    "toolUsePromptTokenCount": tool_use,
                },
            )
    return Usage(
        input=canonical,
        output=output,
        cache_read=count(meta.get("cachedContentTokenCount")),
        cache_write=None,
        reasoning=thoughts,
        tool_use=tool_use,
    )


def render_usage(usage: Usage | None) -> dict[str, Any]:
    """usageMetadata with the integers the SDKs read; thoughts/cached/tool use only when non-zero (as Gemini)."""
    if usage is None:
        usage = Usage()
    tool_use = min(usage.tool_use or 0, usage.input or 0)
    prompt = (usage.input or 0) - tool_use
    output = usage.output or 0
    reasoning = usage.reasoning or 0
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": max(output - reasoning, 0),
        "totalTokenCount": prompt + tool_use + output,
    }
    if usage.cache_read:
        out["cachedContentTokenCount"] = usage.cache_read
    if reasoning:
        out["thoughtsTokenCount"] = reasoning
    if tool_use:
        out["toolUsePromptTokenCount"] = tool_use
    return out
