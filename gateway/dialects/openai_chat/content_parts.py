"""A Chat message's or delta's ``content``: a string, or a list of typed parts.

OpenAI sends a string; compatible servers may send parts. Mistral's reasoning models (Magistral,
and ``reasoning_effort`` on Mistral Small / Medium) stream ``delta.content`` as a list of chunks:
``{"type": "text", "text": …}`` for the answer and ``{"type": "thinking", "thinking": [{"type":
"text", "text": …}]}`` for the reasoning (its ``ThinkChunk``; ``closed`` only matters for prefixing).
Both forms are read here once, for the stream decoder and the whole-reply decoder alike, so a
caller of another dialect gets the text and the thinking whatever form the upstream used.
Parts that carry no text (Mistral's ``reference`` citations, images) are skipped with a warning
naming the type, once per process.
"""

from __future__ import annotations

from typing import Any, Literal

from gateway.dialects.common import warn_unknown

DIALECT = "openai-chat"

PartKind = Literal["text", "thinking"]

# part types that carry no text a caller reads, skipped without a warning
_SILENT = frozenset({"reference", "image_url", "input_audio", "audio"})


def _text_of(value: Any) -> str:
    """The text inside a thinking part: a string, a text part, or a list of text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        text = value.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(value, list):
        return "".join(_text_of(item) for item in value)
    return ""


def content_parts(content: Any) -> list[tuple[PartKind, str]]:
    """``content`` as (kind, text) pieces in order; empty pieces are left out."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    if not isinstance(content, list):
        return []
    pieces: list[tuple[PartKind, str]] = []
    for part in content:
        if isinstance(part, str):  # a bare string in the list: text
            if part:
                pieces.append(("text", part))
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "thinking":
            text = _text_of(part.get("thinking"))
            if text:
                pieces.append(("thinking", text))
        elif kind in ("text", "output_text", None):
            value = part.get("text")
            if isinstance(value, str) and value:
                pieces.append(("text", value))
        elif kind not in _SILENT:
            warn_unknown(DIALECT, f"content part type {kind!r}")
    return pieces
