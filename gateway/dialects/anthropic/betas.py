"""Which ``anthropic-beta`` values a cloud platform's Claude takes: one filter, a table per platform.

Bedrock and Vertex each answer 400 for a beta they do not know ("invalid beta flag"), and Claude
Code sends first-party betas (``prompt-caching-scope-2026-01-05``, ``advanced-tool-use-…``) to a
gateway that looks like api.anthropic.com. Each platform module (``bedrock.py``, ``vertex.py``)
keeps its allow-list and its renames; ``split`` applies one. What is dropped is reported like any
dropped setting (``anthropic_beta:<name>`` in ``x-gateway-dropped`` and the access log).
"""

from __future__ import annotations

from collections.abc import Mapping, Set


def split(header: str | None, allowed: Set[str], renamed: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(kept, dropped) of an ``anthropic-beta`` header's comma-separated values, kept ones renamed
    to the platform's names, each once."""
    kept: list[str] = []
    dropped: list[str] = []
    for raw in (header or "").split(","):
        value = renamed.get(raw.strip(), raw.strip())
        if value in allowed:
            if value not in kept:
                kept.append(value)
        elif value:
            dropped.append(value)
    return kept, dropped
