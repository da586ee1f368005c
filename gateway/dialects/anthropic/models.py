"""What differs between Claude models on one wire: the built-in lists a provider may override.

Globs over the upstream model name (``*`` in front so Bedrock/Vertex ids such as
``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` match too). A provider's
``sampling_exclusive_models`` / ``adaptive_thinking_models`` replace these lists.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.ir import ChatRequest

# Adaptive thinking (thinking {type: adaptive} + output_config.effort) came with Claude 4.6, where
# budget_tokens is deprecated; Opus 4.7 and the Claude 5 family refuse budget_tokens outright.
ADAPTIVE_THINKING = (
    "*claude-*-4-6*",
    "*claude-*-4-7*",
    "*claude-opus-5*",
    "*claude-sonnet-5*",
    "*claude-haiku-5*",
    "*claude-fable-5*",
    "*claude-mythos*",
)

# Since Opus 4.1 Claude answers 400 "`temperature` and `top_p` cannot both be specified for this
# model"; Claude 3.x and the 4.0 models take both. Every adaptive-thinking model is among them.
SAMPLING_EXCLUSIVE = ("*claude-opus-4-1*", "*claude-*-4-5*", *ADAPTIVE_THINKING)


def matches(model: str, globs: tuple[str, ...] | None, default: tuple[str, ...]) -> bool:
    return _matches(model, default if globs is None else globs)


@lru_cache(maxsize=4096)
def _matches(model: str, globs: tuple[str, ...]) -> bool:
    """Cached: asked twice per request to Claude, ~14 glob matches each time (~15 µs), for the few
    models a gateway serves."""
    return any(fnmatchcase(model, g) for g in globs)


def claude_sampling(
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    *,
    thinking_on: bool,
    exclusive: bool,
    dropped: list[str],
) -> tuple[float | None, float | None, int | None]:
    """temperature / top_p / top_k as Claude takes them (on its own API or through Bedrock Converse),
    each one left out recorded in ``dropped``.

    With thinking on Claude takes neither temperature nor top_k, and top_p only from 0.95; the
    models that refuse temperature together with top_p (``exclusive``) keep temperature.
    """
    if thinking_on:
        if temperature is not None:
            dropped.append("temperature")
            temperature = None
        if top_k is not None:
            dropped.append("top_k")
            top_k = None
        if top_p is not None and top_p < 0.95:
            dropped.append("top_p")
            top_p = None
    if exclusive and temperature is not None and top_p is not None:
        dropped.append("top_p")
        top_p = None
    return temperature, top_p, top_k


def claude_thinking_refusal(req: ChatRequest, lacks_signed: Callable[[], bool], signed_by: str) -> str | None:
    """Why Claude would refuse extended thinking on ``req`` (None: it takes it), on its own API or
    through Bedrock Converse: forced tool use, or a tool loop whose assistant turns carry no thinking
    block signed by ``signed_by`` (``lacks_signed``, asked only when it matters)."""
    if req.tool_choice is not None and req.tool_choice.mode in ("required", "tool"):
        return "forced tool use is incompatible with Claude's extended thinking"
    if lacks_signed():
        return f"an assistant tool-call turn has no {signed_by}-signed thinking block"
    return None


# The shortest prefix Anthropic caches, in tokens (its prompt-caching docs, "Cache limitations"):
# a breakpoint before that is ignored. First matching glob wins; else 1024 (Sonnet 4.5, Opus 4.1, 4, 3.7 …).
MIN_CACHEABLE = (
    ("*claude-opus-4-5*", 4096),
    ("*claude-opus-4-6*", 4096),
    ("*claude-haiku-4-5*", 4096),
    ("*claude-sonnet-4-6*", 2048),
    ("*claude-3-5-haiku*", 2048),
    ("*claude-3-haiku*", 2048),
    ("*claude-haiku-3*", 2048),
)


def min_cacheable_tokens(model: str) -> int:
    return next((n for glob, n in MIN_CACHEABLE if fnmatchcase(model, glob)), 1024)
