"""Bedrock Converse ``stopReason`` → the gateway's normalised stop reasons.

Converse states the reason on ``messageStop`` (streams) or beside ``output`` (whole replies); the
values are the ``StopReason`` enum of botocore's bedrock-runtime model. A guardrail or content
filter stopping the answer is ``content_filter``; a model that wrote output Bedrock could not parse
(``malformed_*``) ended in ``error``. No caller speaks Converse, so there is no way back.
"""

from __future__ import annotations

from gateway.dialects.common import warn_unknown
from gateway.events import StopReason

DIALECT = "bedrock-converse"

FROM_WIRE: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "malformed_model_output": "error",
    "malformed_tool_use": "error",
}


def map_stop_reason(raw: str | None, *, tool_called: bool = False, refusal: bool = False) -> StopReason:
    """The normalised reason for a Converse ``stopReason`` (unknown ones read as ``stop``; Converse
    names tool use and filtering itself, so the hints change nothing)."""
    if raw is None:
        return "stop"
    reason = FROM_WIRE.get(raw)
    if reason is None:
        warn_unknown(DIALECT, f"stopReason {raw!r}")
        return "stop"
    return reason
