"""Interaction ``status`` <-> normalised stop reasons.

The Interactions API has no finish-reason field: the final ``status`` of the interaction is the stop
reason. Mapping (decode):

* ``completed`` -> ``stop`` (``tool_use`` when the turn produced a function_call step: a caller of
  another dialect must see a tool-use stop even if the upstream said ``completed``);
* ``requires_action`` -> ``tool_use`` (the model called a client function);
* ``incomplete`` / ``budget_exceeded`` -> ``length``;
* ``requires_continuation`` -> ``pause`` (per-request decode limit: the turn may be continued);
* ``failed`` -> a ``StreamError`` (kind ``api_error``); ``cancelled`` -> a ``StreamError`` of kind
  ``cancelled`` (status 499): a cancelled generation is not a finished answer, so callers of other
  dialects must not mistake it for one. Both are decided in the decoders, not here.

Encode: ``stop`` / ``content_filter`` -> ``completed`` (the content is what it is; the
Interactions API has no filter status), ``refusal`` -> ``incomplete`` (its closest status: a
refusal, often with no content, must not read as a clean success), ``tool_use`` -> ``requires_action``, ``length`` and
``pause`` -> ``incomplete``, ``error`` -> ``failed``. An upstream of this same dialect keeps its raw
status.
"""

from __future__ import annotations

from gateway.events import End, StopReason

TERMINAL_OK = frozenset({"completed", "requires_action", "incomplete", "budget_exceeded", "requires_continuation"})

FROM_WIRE: dict[str, StopReason] = {
    "completed": "stop",
    "requires_action": "tool_use",
    "incomplete": "length",
    "budget_exceeded": "length",
    "requires_continuation": "pause",
}

TO_WIRE: dict[str, str] = {
    "stop": "completed",
    "content_filter": "completed",
    "refusal": "incomplete",  # the model declined: not a finished answer (no refusal status exists)
    "tool_use": "requires_action",
    "length": "incomplete",
    "pause": "incomplete",
    "error": "failed",
}

# Statuses a caller's SDK knows (InteractionStatus); a raw value outside it is not echoed.
_KNOWN = frozenset(
    {
        "in_progress",
        "requires_action",
        "completed",
        "incomplete",
        "failed",
        "cancelled",
        "budget_exceeded",
        "queued",
        "idle",
        "requires_continuation",
    }
)


def map_stop_reason(raw: str | None, *, tool_called: bool = False, refusal: bool = False) -> StopReason:
    """The normalised reason for a non-failed terminal ``status`` (see the module docstring); none,
    or an unknown one, reads as ``stop``. The Interactions API has no refusal signal: ``refusal``
    changes nothing."""
    reason = FROM_WIRE.get(raw or "", "stop")
    if reason == "stop" and tool_called:
        return "tool_use"
    return reason


_NOT_FINAL = frozenset({"in_progress", "queued", "idle"})


def render_stop_reason(end: End, same_dialect: bool) -> str:
    """The interaction ``status`` a caller sees for ``end``."""
    raw = end.raw_reason
    if same_dialect and raw is not None and raw in _KNOWN and raw not in _NOT_FINAL:
        return raw
    return TO_WIRE.get(end.reason, "completed")
