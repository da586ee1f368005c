"""``auto_cache``: prompt-cache breakpoints for requests whose caller placed none.

An OpenAI or Gemini caller cannot say ``cache_control``, so its long agent conversation routed to
Claude would be billed in full on every turn. With a provider's ``auto_cache = true`` the built
Messages body (so Bedrock's and Vertex's Claude too: the same body) gets, when it carries no
``cache_control`` anywhere:

* one breakpoint at the end of the stable prefix: the last system block, else the last tool
  (tools come before the system prompt in Anthropic's cache order);
* one on the last block of the last message (this turn's writes, read by the next turn);
* one on the last block of the user message before the last one, so this request reads what the
  previous turn wrote even when more than 20 blocks (Anthropic's lookback) came in between.

Each only when the prefix up to it reaches the model's minimum cacheable length
(``models.min_cacheable_tokens``; about 4 characters a token, as the gateway's other estimates):
a shorter one would be ignored anyway. At most 3 of Anthropic's 4. A caller's own
``cache_control`` anywhere means the caller manages its cache: nothing is added or moved.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.anthropic.models import min_cacheable_tokens

BREAKPOINT = {"type": "ephemeral"}
_UNMARKABLE = frozenset(("thinking", "redacted_thinking"))  # Anthropic refuses cache_control on these
_MEDIA_CHARS = 6400  # an image or a document: ~1600 tokens, what a small one is billed


def place_breakpoints(body: dict[str, Any], model: str) -> None:
    tools = body.get("tools") or []
    system = body.get("system")
    messages = body.get("messages") or []
    if _has_cache_control(body, tools, system, messages):
        return
    floor = min_cacheable_tokens(model) * 4  # in characters
    chars = sum(len(orjson.dumps(t)) for t in tools)
    if isinstance(system, str):
        system = body["system"] = [{"type": "text", "text": system}]
    if system:
        chars += sum(_chars(b) for b in system)
        if chars >= floor:
            system[-1]["cache_control"] = dict(BREAKPOINT)
    elif tools and chars >= floor:
        tools[-1]["cache_control"] = dict(BREAKPOINT)
    ends: list[int] = []  # the prefix length at the end of each message
    for message in messages:
        content = message.get("content")
        chars += len(content) if isinstance(content, str) else sum(_chars(b) for b in content or ())
        ends.append(chars)
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    marks = [len(messages) - 1] if messages else []
    if len(users) >= 2 and users[-2] != len(messages) - 1:
        marks.append(users[-2])
    for i in marks:
        if ends[i] >= floor:
            _mark_last_block(messages[i])


def _has_cache_control(body: dict[str, Any], tools: list[Any], system: Any, messages: list[Any]) -> bool:
    if "cache_control" in body or any(isinstance(t, dict) and "cache_control" in t for t in tools):
        return True
    if isinstance(system, list) and any(isinstance(b, dict) and "cache_control" in b for b in system):
        return True
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and _marked(b) for b in content):
            return True
    return False


def _marked(block: dict[str, Any]) -> bool:
    if "cache_control" in block:
        return True
    inner = block.get("content")  # a tool_result's own blocks
    return isinstance(inner, list) and any(isinstance(b, dict) and "cache_control" in b for b in inner)


def _mark_last_block(message: dict[str, Any]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        if content:
            message["content"] = [{"type": "text", "text": content, "cache_control": dict(BREAKPOINT)}]
        return
    for block in reversed(content or []):
        if block.get("type") in _UNMARKABLE or (block.get("type") == "text" and not block.get("text")):
            continue
        block["cache_control"] = dict(BREAKPOINT)
        return


def _chars(block: Any) -> int:
    """About how many characters of prompt ``block`` is (text as text, media at a flat rate)."""
    if not isinstance(block, dict):
        return len(str(block))
    kind = block.get("type")
    if kind == "text":
        return len(block.get("text") or "")
    if kind == "thinking":
        return len(block.get("thinking") or "")
    if kind in ("image", "document"):
        return _MEDIA_CHARS
    if kind == "tool_result":
        inner = block.get("content")
        return len(inner) if isinstance(inner, str) else sum(_chars(b) for b in inner or ())
    return len(orjson.dumps(block))
