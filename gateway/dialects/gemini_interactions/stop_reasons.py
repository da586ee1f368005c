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

Encode: ``stop`` / ``content_filter`` / ``refusal`` -> ``completed`` (the content is what it is; the
Interactions API has no filter status), ``tool_use`` -> ``requires_action``, ``length`` and
``pause`` -> ``incomplete``, ``error`` -> ``failed``. An upstream of this same dialect keeps its raw
status.
"""

from __future__ import annotations

from gateway.events import End

DIALECT = "gemini-interactions"

TERMINAL_OK = frozenset({"completed", "requires_action", "incomplete", "budget_exceeded", "requires_continuation"})

_DECODE = {
    "completed": "stop",
    "requires_action": "tool_use",
    "incomplete": "length",
    "budget_exceeded": "length",
    "requires_continuation": "pause",
}

_ENCODE = {
    "stop": "completed",
    "content_filter": "completed",
    "refusal": "completed",
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


def end_for_status(status: str, saw_function_call: bool = False) -> End:
    """The ``End`` for a non-failed terminal status (see the module docstring)."""
    reason = _DECODE.get(status, "stop")
    if reason == "stop" and saw_function_call:
        reason = "tool_use"
    return End(reason, status)  # type: ignore[arg-type]


def status_for_end(end: End | None, upstream_dialect: str) -> str:
    """The interaction ``status`` a caller sees for ``end``."""
    if end is None:
        return "completed"
    if upstream_dialect == DIALECT and end.raw_reason in _KNOWN and end.raw_reason not in ("in_progress", "queued", "idle"):
        return end.raw_reason  # type: ignore[return-value]
    return _ENCODE.get(end.reason, "completed")
