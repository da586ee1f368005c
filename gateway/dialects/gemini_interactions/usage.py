"""Interactions ``usage`` <-> canonical ``Usage``.

Interactions: ``total_input_tokens`` includes ``total_cached_tokens`` (canonical already);
``total_output_tokens`` EXCLUDES ``total_thought_tokens`` (Gemini's convention), so canonical
``output`` = output + thought and ``reasoning`` = thought. ``total_tool_use_tokens`` (tokens of
server-tool results) has no canonical slot and is not counted anywhere.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count
from gateway.events import Usage


def convert_usage(u: object) -> Usage | None:
    """The ``usage`` object of an interaction; ``None`` when there is none."""
    if not isinstance(u, dict):
        return None
    out = count(u.get("total_output_tokens"))
    thought = count(u.get("total_thought_tokens"))
    output = None if out is None and thought is None else (out or 0) + (thought or 0)
    return Usage(
        input=count(u.get("total_input_tokens")),
        output=output,
        cache_read=count(u.get("total_cached_tokens")),
        cache_write=None,
        reasoning=thought,
    )


def render_usage(u: Usage | None) -> dict[str, Any]:
    """Every count the resource shows; unknown ones become 0 only here (the SDK types them as ints)."""
    if u is None:
        u = Usage()
    inp = u.input or 0
    output = u.output or 0
    thought = min(u.reasoning or 0, output) if output else (u.reasoning or 0)
    visible = max(output - thought, 0)
    return {
        "total_input_tokens": inp,
        "total_cached_tokens": u.cache_read or 0,
        "total_output_tokens": visible,
        "total_thought_tokens": thought,
        "total_tool_use_tokens": 0,
        "total_tokens": inp + visible + thought,
    }
