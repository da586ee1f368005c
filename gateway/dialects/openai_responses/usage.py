"""Responses usage <-> canonical ``Usage``.

Responses already speaks the canonical meanings (``input_tokens`` includes
``input_tokens_details.cached_tokens``; ``output_tokens`` includes
``output_tokens_details.reasoning_tokens``), so this is a rename, never arithmetic on the inputs.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count
from gateway.events import Usage


def convert_usage(u: object) -> Usage | None:
    """The ``usage`` object of a response; ``None`` when the upstream sent none (failed responses)."""
    if not isinstance(u, dict):
        return None
    in_details = u.get("input_tokens_details")
    out_details = u.get("output_tokens_details")
    return Usage(
        input=count(u.get("input_tokens")),
        output=count(u.get("output_tokens")),
        cache_read=count(in_details.get("cached_tokens")) if isinstance(in_details, dict) else None,
        cache_write=None,
        reasoning=count(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else None,
    )


def render_usage(u: Usage | None) -> dict[str, Any]:
    """The SDK's ``ResponseUsage`` requires every integer: unknown counts become 0 only here."""
    if u is None:
        u = Usage()
    inp = u.input or 0
    out = u.output or 0
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": u.cache_read or 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": u.reasoning or 0},
        "total_tokens": inp + out,
    }
