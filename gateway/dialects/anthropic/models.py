"""What differs between Claude models on one wire: the built-in lists a provider may override.

Globs over the upstream model name (``*`` in front so Bedrock/Vertex ids such as
``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` match too). A provider's
``sampling_exclusive_models`` / ``adaptive_thinking_models`` replace these lists.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

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
    return any(fnmatchcase(model, g) for g in (default if globs is None else globs))
