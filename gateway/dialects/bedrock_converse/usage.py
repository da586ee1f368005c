"""Converse ``TokenUsage`` → the canonical ``Usage`` (gateway/events.py).

``{inputTokens, outputTokens, totalTokens, cacheReadInputTokens?, cacheWriteInputTokens?}``. Like
Anthropic's, Bedrock's ``inputTokens`` leaves the cache reads and writes out, and ``totalTokens``
counts them: ``total = input + output + cacheRead + cacheWrite``. The canonical ``input`` includes
them. When a reply's own ``totalTokens`` says the cache tokens are already inside ``inputTokens``
(``total == input + output``), ``inputTokens`` is taken as it is, so neither reading double counts.
Converse reports no reasoning count: ``reasoning`` stays ``None``.

The stream states usage once, in ``metadata`` after ``messageStop``; there is nothing to merge.
"""

from __future__ import annotations

from gateway.dialects.kit import count
from gateway.events import Usage


def convert_usage(usage: object) -> Usage | None:
    """One ``usage`` object as canonical ``Usage`` (``None`` when it is not an object)."""
    if not isinstance(usage, dict):
        return None
    input_tokens = count(usage.get("inputTokens"))
    output = count(usage.get("outputTokens"))
    total = count(usage.get("totalTokens"))
    cache_read = count(usage.get("cacheReadInputTokens"))
    cache_write = count(usage.get("cacheWriteInputTokens"))
    canonical = input_tokens
    if input_tokens is not None:
        cached = (cache_read or 0) + (cache_write or 0)
        inclusive = cached and total is not None and output is not None and total == input_tokens + output
        canonical = input_tokens if inclusive else input_tokens + cached
    return Usage(input=canonical, output=output, cache_read=cache_read, cache_write=cache_write)
