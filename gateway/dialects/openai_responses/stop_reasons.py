"""Responses status / ``incomplete_details.reason`` <-> canonical stop reasons.

Responses has no stop reason field: a finished response is ``completed`` (the caller infers tool use
from ``function_call`` items), ``incomplete`` with a reason, or ``failed``.
"""

from __future__ import annotations

from gateway.events import End, StopReason

COMPLETED = "completed"  # the raw reason of an ``End`` for a completed response

FROM_WIRE: dict[str, StopReason] = {  # incomplete_details.reason
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def map_stop_reason(raw: str | None, *, tool_called: bool = False, refusal: bool = False) -> StopReason:
    """The normalised reason for how a response ended: ``raw`` is ``"completed"`` for a completed
    response (``tool_use`` when it holds a function_call, as the caller infers from its items), else
    the ``incomplete_details.reason`` of an incomplete one, ``None`` when it gave none. Unknown
    incomplete reasons read as ``length``: the answer was cut, which is what matters. Responses
    streams refusals as ``refusal`` parts of a completed message: ``refusal`` changes nothing."""
    if raw == COMPLETED:
        return "tool_use" if tool_called else "stop"
    return FROM_WIRE.get(raw or "", "length")


def render_stop_reason(end: End, same_dialect: bool) -> tuple[str, str | None]:
    """(status, incomplete reason) to show a Responses caller for an ``End``.

    A same-dialect upstream's own incomplete reason is kept verbatim.
    """
    if end.reason == "length":
        if same_dialect and end.raw_reason and end.raw_reason != COMPLETED:
            return "incomplete", end.raw_reason
        return "incomplete", "max_output_tokens"
    if end.reason == "refusal" and not same_dialect:
        # another dialect's refusal (Anthropic ``stop_reason: "refusal"``): the response did not
        # complete; ``content_filter`` is the one incomplete reason OpenAI documents for it
        return "incomplete", "content_filter"
    if end.reason == "content_filter":
        if same_dialect and end.raw_reason and end.raw_reason != COMPLETED:
            return "incomplete", end.raw_reason
        return "incomplete", "content_filter"
    return COMPLETED, None
