"""Anthropic usage ⇄ the canonical ``Usage`` (gateway/events.py).

Anthropic's ``input_tokens`` EXCLUDES cache reads and cache writes; the canonical ``input``
includes them, so ``input = input_tokens + cache_read_input_tokens + cache_creation_input_tokens``
and the encoder subtracts them again. ``output_tokens`` already includes thinking; Anthropic
reports no separate reasoning count, so ``reasoning`` stays ``None``.

Stream usage is cumulative and may be partial: ``message_start`` carries input and a first
output count, ``message_delta`` the final output and (in newer API versions) the input fields
again. ``UsageState`` merges the fields each event states (the later value wins, never summed).
"""

from __future__ import annotations

from gateway.dialects.kit import count
from gateway.events import Usage


class UsageState:
    """The latest value of each Anthropic usage field seen in one stream or reply."""

    __slots__ = ("input_tokens", "output_tokens", "cache_read", "cache_write")

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cache_read: int | None = None
        self.cache_write: int | None = None

    def update(self, usage: object) -> Usage | None:
        """Merge one ``usage`` object; the canonical ``Usage`` so far (``None`` if not an object)."""
        if not isinstance(usage, dict):
            return None
        value = count(usage.get("input_tokens"))
        if value is not None:
            self.input_tokens = value
        value = count(usage.get("output_tokens"))
        if value is not None:
            self.output_tokens = value
        value = count(usage.get("cache_read_input_tokens"))
        if value is not None:
            self.cache_read = value
        value = count(usage.get("cache_creation_input_tokens"))
        if value is not None:
            self.cache_write = value
        return self.canonical()

    def canonical(self) -> Usage:
        total = None
        if self.input_tokens is not None:
            total = self.input_tokens + (self.cache_read or 0) + (self.cache_write or 0)
        return Usage(input=total, output=self.output_tokens, cache_read=self.cache_read, cache_write=self.cache_write)


def convert_usage(usage: object) -> Usage | None:
    """One whole ``usage`` object as canonical ``Usage`` (``None`` when it is not an object)."""
    return UsageState().update(usage)


def render_usage(usage: Usage | None) -> dict[str, int]:
    """The ``usage`` object an Anthropic caller gets. The SDK requires the integers, so 0 stands in
    for unknown values here (and only here)."""
    if usage is None:
        usage = Usage()
    cache_read = usage.cache_read or 0
    cache_write = usage.cache_write or 0
    input_tokens = max((usage.input or 0) - cache_read - cache_write, 0)
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": usage.output or 0,
    }
