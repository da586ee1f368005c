"""Session affinity: which conversation a request belongs to, so it can stay on one target.

Provider prompt caches are per deployment: a conversation balanced request by request pays the
cache write again on every target. The session is, in order: the ``x-session-id`` header, the
caller's user (OpenAI ``user``, Anthropic ``metadata.user_id`` — the parsers put both in
``ChatRequest.user``), else ``previous_response_id`` / ``previous_interaction_id``.
"""

from __future__ import annotations

from gateway.ir import ChatRequest


def session_of(req: ChatRequest) -> str | None:
    if req.session:
        return req.session
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
