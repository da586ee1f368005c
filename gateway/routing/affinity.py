"""Session affinity: which conversation a request belongs to, so it can stay on one target.

Provider prompt caches are per deployment: a conversation balanced request by request pays the
cache write again on every target. The session is, in order: a session header
(``x-session-id``, Claude Code's ``x-claude-code-session-id``, Codex's ``session_id``), OpenAI's
``prompt_cache_key``, the caller's user (OpenAI ``user``, Anthropic ``metadata.user_id`` — the parsers put both in
``ChatRequest.user``), else ``previous_response_id`` / ``previous_interaction_id``.
"""

from __future__ import annotations

from gateway.ir import ChatRequest

# The headers agents name their session in: the gateway's own, Claude Code's, Codex's (lower-cased)
SESSION_HEADERS = ("x-session-id", "x-claude-code-session-id", "session_id")


def session_header(headers: dict[str, str]) -> str | None:
    """The caller's session from its headers (the first of ``SESSION_HEADERS`` it sent)."""
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def session_of(req: ChatRequest) -> str | None:
    if req.session:
        return req.session
    if req.prompt_cache_key:
        return "k:" + req.prompt_cache_key
    if req.user:
        return "u:" + req.user
    metadata = req.metadata
    if metadata:
        user = metadata.get("user_id")
        if isinstance(user, str) and user:
            return "u:" + user
    if req.previous_id:
        return "p:" + req.previous_id
    return None


def pin_key(route: str, session: str) -> str:
    """Store key of one session's target on one route (a route's targets are its own)."""
    return f"aff:{route}:{session}"
