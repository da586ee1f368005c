"""Chat ``finish_reason`` ⇄ the gateway's normalised stop reasons.

Chat has four finish reasons (plus the legacy ``function_call``). A refusal is not a finish
reason in Chat: OpenAI streams the refusal text in ``delta.refusal`` and finishes with plain
``stop`` (see captures-public/openai-chat/refusal.sse). Another dialect's refusal (Anthropic
``stop_reason: "refusal"``, often with no text at all) must not look like a clean answer, so it is
encoded as ``content_filter`` with ``REFUSAL_NOTICE`` in the message's ``refusal`` (whole.py,
stream_encode.py): a Chat client checks one or the other. ``pause`` (Anthropic ``pause_turn``) and ``error`` have no Chat spelling either and become ``stop``.
"""

from __future__ import annotations

from gateway.dialects.common import warn_unknown
from gateway.events import End, StopReason

DIALECT = "openai-chat"

FROM_WIRE: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}

TO_WIRE: dict[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "pause": "stop",
    "error": "stop",
}

REFUSAL_NOTICE = "The model declined to answer this request."


def refusal_notice(end: End | None, same_dialect: bool) -> str | None:
    """The message's ``refusal`` for an answer another dialect ended as a refusal, else None."""
    return REFUSAL_NOTICE if end is not None and end.reason == "refusal" and not same_dialect else None


FINISH_REASONS = frozenset(("stop", "length", "tool_calls", "content_filter", "function_call"))


def map_stop_reason(raw: str | None, *, tool_called: bool = False, refusal: bool = False) -> StopReason:
    """The normalised reason for a Chat ``finish_reason`` (Chat says ``tool_calls`` itself, so
    ``tool_called`` changes nothing).

    ``refusal`` is True when the answer streamed in ``delta.refusal``: Chat then still says ``stop``,
    but other dialects have a refusal stop reason, so it is surfaced as one.
    """
    if raw is None:
        return "stop"
    reason = FROM_WIRE.get(raw)
    if reason is None:
        warn_unknown(DIALECT, f"finish_reason {raw!r}")
        reason = "stop"
    if refusal and reason == "stop":
        return "refusal"
    return reason


def render_stop_reason(end: End, same_dialect: bool) -> str:
    """The ``finish_reason`` a Chat caller sees; the raw value when the upstream speaks Chat too."""
    if same_dialect and end.raw_reason is not None and end.raw_reason in FINISH_REASONS:
        return end.raw_reason
    return TO_WIRE.get(end.reason, "stop")
