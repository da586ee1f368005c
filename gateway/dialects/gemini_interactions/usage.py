"""Interactions ``usage`` <-> canonical ``Usage``.

Interactions: ``total_input_tokens`` includes ``total_cached_tokens`` (canonical already);
``total_output_tokens`` EXCLUDES ``total_thought_tokens`` (Gemini's convention), so canonical
``output`` = output + thought and ``reasoning`` = thought. ``total_tool_use_tokens`` (the results
of server-side tools such as Google Search, fed to the model: input it read) is outside
``total_input_tokens`` (``total_tokens`` = input + output + thought + tool use), so the canonical
``input`` adds it and ``tool_use`` keeps it visible (a caller of this dialect gets it back in its
own field). A ``total_tokens`` that does not add up is logged as a warning naming the provider.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count, usage_mismatch
from gateway.events import Usage

DIALECT = "gemini-interactions"


def convert_usage(u: object) -> Usage | None:
    """The ``usage`` object of an interaction; ``None`` when there is none."""
    if not isinstance(u, dict):
        return None
    inp = count(u.get("total_input_tokens"))
    out = count(u.get("total_output_tokens"))
    thought = count(u.get("total_thought_tokens"))
    tool_use = count(u.get("total_tool_use_tokens"))
    output = None if out is None and thought is None else (out or 0) + (thought or 0)
    canonical = inp
    if inp is not None and tool_use:
        canonical = inp + tool_use  # outside total_input_tokens (total_tokens counts it on its own)
        total = count(u.get("total_tokens"))
        if total is not None and total == inp + (output or 0):  # a server that counted it inside input
            canonical = inp
    _check_total(u, canonical, output)
    return Usage(
        input=canonical,
        output=output,
        cache_read=count(u.get("total_cached_tokens")),
        cache_write=None,
        reasoning=thought,
        tool_use=tool_use,
    )


def _check_total(u: dict[str, Any], canonical: int | None, output: int | None) -> None:
    total = count(u.get("total_tokens"))
    if total is None or canonical is None or output is None or total == canonical + output:
        return
    usage_mismatch(
        DIALECT,
        "total_tokens",
        total,
        {
            name: count(u.get(name))
            for name in ("total_input_tokens", "total_output_tokens", "total_thought_tokens", "total_tool_use_tokens")
        },
    )


def render_usage(u: Usage | None) -> dict[str, Any]:
    """Every count the resource shows; unknown ones become 0 only here (the SDK types them as ints)."""
    if u is None:
        u = Usage()
    tool_use = min(u.tool_use or 0, u.input or 0)
    inp = (u.input or 0) - tool_use
    output = u.output or 0
    thought = min(u.reasoning or 0, output) if output else (u.reasoning or 0)
    visible = max(output - thought, 0)
    return {
        "total_input_tokens": inp,
        "total_cached_tokens": u.cache_read or 0,
        "total_output_tokens": visible,
        "total_thought_tokens": thought,
        "total_tool_use_tokens": tool_use,
        "total_tokens": inp + tool_use + visible + thought,
    }
