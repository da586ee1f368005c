"""Responses usage <-> canonical ``Usage``.

Responses already speaks the canonical meanings (``input_tokens`` includes
``input_tokens_details.cached_tokens``; ``output_tokens`` includes
``output_tokens_details.reasoning_tokens``), so this is a rename, never arithmetic on the inputs —
unless the reported ``total_tokens`` says the reasoning was left out of ``output_tokens``
(``total = input + output + reasoning``, xAI's convention, as on its Chat API): then it is added
back. A total that fits neither reading is logged as a warning naming the provider.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.kit import count, usage_mismatch
from gateway.events import Usage

DIALECT = "openai-responses"


def convert_usage(u: object) -> Usage | None:
    """The ``usage`` object of a response; ``None`` when the upstream sent none (failed responses)."""
    if not isinstance(u, dict):
        return None
    in_details = u.get("input_tokens_details")
    out_details = u.get("output_tokens_details")
    inp = count(u.get("input_tokens"))
    out = count(u.get("output_tokens"))
    reasoning = count(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else None
    total = count(u.get("total_tokens"))
    if inp is not None and out is not None and total is not None and total != inp + out:
        if reasoning and total == inp + out + reasoning:  # reasoning outside output_tokens (xAI's convention)
            out += reasoning
        else:
            usage_mismatch(
                DIALECT,
                "total_tokens",
                total,
                {"input_tokens": inp, "output_tokens": out, "reasoning_tokens": reasoning},
            )
    return Usage(
        input=inp,
        output=out,
        cache_read=count(in_details.get("cached_tokens")) if isinstance(in_details, dict) else None,
        cache_write=None,
        reasoning=reasoning,
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
