"""Gemini ``finishReason`` ⇄ the normalised stop reasons of ``gateway.events.End``.

Gemini ends a turn that called functions with plain ``STOP``; the decoder turns that into
``tool_use`` when a ``functionCall`` was streamed (see stream_decode.py), and the encoder sends
``STOP`` for ``tool_use`` (what the Gemini SDK expects).

``MALFORMED_FUNCTION_CALL`` (and ``UNEXPECTED_TOOL_CALL`` …) are complete, well-formed streams
that produced no usable answer: they become ``End(reason="error")`` rather than a
``StreamError``, so usage is still reported and a Gemini caller gets the raw reason back.
"""

from __future__ import annotations

from gateway.dialects.common import warn_unknown
from gateway.events import End, StopReason

FROM_WIRE: dict[str, StopReason] = {
    "STOP": "stop",
    "OTHER": "stop",
    "FINISH_REASON_UNSPECIFIED": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "LANGUAGE": "error",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "MISSING_THOUGHT_SIGNATURE": "error",
    "NO_IMAGE": "error",
    "IMAGE_OTHER": "error",
}

# promptFeedback.blockReason (no candidates at all): the prompt itself was refused.
BLOCK_REASONS = frozenset(
    {"SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY", "BLOCK_REASON_UNSPECIFIED"}
)

TO_WIRE: dict[str, str] = {
    "stop": "STOP",
    "tool_use": "STOP",
    "pause": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    # Gemini has no refusal reason; a model refusal is closest to a safety stop.
    "refusal": "SAFETY",
    "error": "OTHER",
}


def map_stop_reason(raw: str | None, *, tool_called: bool = False, refusal: bool = False) -> StopReason:
    """The normalised reason for a ``finishReason`` (none, or an unknown one, reads as ``stop``).

    ``tool_called``: a ``functionCall`` was streamed; Gemini then still says ``STOP``. Gemini has no
    refusal signal beside its safety reasons, so ``refusal`` changes nothing."""
    if raw is None:
        reason: StopReason = "stop"
    else:
        known = FROM_WIRE.get(raw)
        if known is None:
            warn_unknown("gemini", f"finishReason {raw}")
            known = "stop"
        reason = known
    if reason == "stop" and tool_called:
        return "tool_use"
    return reason


def render_stop_reason(end: End, same_dialect: bool) -> str:
    """The caller-facing ``finishReason``: the upstream's own value when it was Gemini too."""
    if same_dialect and end.raw_reason:
        return end.raw_reason
    return TO_WIRE.get(end.reason, "STOP")
