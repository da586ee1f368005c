"""Anthropic ``stop_reason`` ⇄ the gateway's normalised stop reasons.

Anthropic puts ``stop_reason`` on ``message_delta`` (streams) or on the message (whole replies).
A caller of the same dialect as the upstream gets the raw value back unchanged, so a reason this
table does not know (Anthropic adds them) still round-trips.
"""

from __future__ import annotations

from gateway.dialects.common import warn_unknown
from gateway.events import End, StopReason

DIALECT = "anthropic"

FROM_WIRE: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
    "pause_turn": "pause",
    "refusal": "refusal",
}

TO_WIRE: dict[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_use": "tool_use",
    "content_filter": "refusal",  # Anthropic's closest: the model declined
    "refusal": "refusal",
    "pause": "pause_turn",
    "error": "end_turn",
}


def map_stop_reason(raw: str | None, *, tool_called: bool = False, refusal: bool = False) -> StopReason:
    """The normalised reason for an Anthropic ``stop_reason`` (unknown ones read as ``stop``).

    Anthropic names tool use and refusals itself, so ``tool_called`` and ``refusal`` (the shared
    signature's hints for dialects that do not) change nothing here."""
    if raw is None:
        return "stop"
    reason = FROM_WIRE.get(raw)
    if reason is None:
        warn_unknown(DIALECT, f"stop_reason {raw!r}")
        return "stop"
    return reason


def render_stop_reason(end: End, same_dialect: bool) -> str:
    """The ``stop_reason`` shown to an Anthropic caller."""
    if same_dialect and end.raw_reason:
        return end.raw_reason
    if end.reason == "stop" and end.stop_sequence:
        return "stop_sequence"
    return TO_WIRE.get(end.reason, "end_turn")
