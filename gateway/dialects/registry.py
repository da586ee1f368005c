"""Dialect name → codec, and the lists of dialects everything else is built from.

Adding a dialect is one line in ``MODULES`` (and its package: see gateway/dialects/base.py). The
order is the order in which codecs are asked whether a request comes from their SDK
(``Codec.recognises``, see ``guess_caller``): the more specific first, OpenAI Chat (which
recognises anything) last. Codecs are imported lazily, so one broken codec cannot take the others
down at import.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection

from gateway.dialects.base import Codec

MODULES = {
    "anthropic": "gateway.dialects.anthropic",
    "gemini-interactions": "gateway.dialects.gemini_interactions",
    "gemini": "gateway.dialects.gemini",
    "openai-responses": "gateway.dialects.openai_responses",
    "openai-chat": "gateway.dialects.openai_chat",
    "bedrock-converse": "gateway.dialects.bedrock_converse",  # upstream only: no caller route
}
FALLBACK_CALLER = "openai-chat"  # the shape of an answer to a caller no codec recognises

UPSTREAM_DIALECTS: tuple[str, ...] = tuple(MODULES)  # what a provider's ``dialect`` may be

_cache: dict[str, Codec] = {}
_callers: list[Codec] = []  # the caller codecs in registry order, once imported


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


def caller_dialects() -> list[str]:
    """The dialects callers can speak to the gateway (those with routes; an upstream-only dialect has none)."""
    return [name for name in available() if codec_for(name).routes]


def guess_caller(path: str, header_names: Collection[bytes], query_keys: Collection[str]) -> str:
    """The dialect whose SDK sent this request, for the shape of an answer given before routing."""
    if not _callers:
        _callers.extend(codec_for(name) for name in caller_dialects())
    for codec in _callers:
        if codec.recognises(path, header_names, query_keys):
            return codec.name
    return FALLBACK_CALLER
