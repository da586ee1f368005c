"""Dialect name → codec. Imported lazily so one broken codec cannot take the others down at import."""

from __future__ import annotations

import importlib

from gateway.dialects.base import Codec

MODULES = {
    "anthropic": "gateway.dialects.anthropic",
    "openai-chat": "gateway.dialects.openai_chat",
    "openai-responses": "gateway.dialects.openai_responses",
    "gemini": "gateway.dialects.gemini",
    "gemini-interactions": "gateway.dialects.gemini_interactions",
    "bedrock-converse": "gateway.dialects.bedrock_converse",  # upstream only: no caller route
}

_cache: dict[str, Codec] = {}


def codec_for(dialect: str) -> Codec:
    codec = _cache.get(dialect)
    if codec is None:
        codec = importlib.import_module(MODULES[dialect]).CODEC
        _cache[dialect] = codec
    return codec


def available() -> list[str]:
    """Dialects whose codec imports (a dialect not built yet is simply not served)."""
    names = []
    for name in MODULES:
        try:
            codec_for(name)
        except (ImportError, AttributeError):
            continue
        names.append(name)
    return names
