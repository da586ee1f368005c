"""Responses status / ``incomplete_details.reason`` <-> canonical stop reasons.

Responses has no stop reason field: a finished response is ``completed`` (the caller infers tool use
from ``function_call`` items), ``incomplete`` with a reason, or ``failed``.
"""

from __future__ import annotations

from gateway.events import End

DIALECT = "openai-responses"

_INCOMPLETE_TO_REASON = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def end_for_completed(saw_function_call: bool) -> End:
    return End("tool_use" if saw_function_call else "stop", "completed")


def end_for_incomplete(reason: str | None) -> End:
    """Unknown incomplete reasons read as ``length``: the answer was cut, which is what matters."""
    return End(_INCOMPLETE_TO_REASON.get(reason or "", "length"), reason)  # type: ignore[arg-type]


def terminal_for_end(end: End, upstream_dialect: str) -> tuple[str, str | None]:
    """(status, incomplete reason) to show a Responses caller for an ``End``.

    A same-dialect upstream's own incomplete reason is kept verbatim.
    """
    if end.reason == "length":
        if upstream_dialect == DIALECT and end.raw_reason and end.raw_reason != "completed":
            return "incomplete", end.raw_reason
        return "incomplete", "max_output_tokens"
    if end.reason == "content_filter":
        if upstream_dialect == DIALECT and end.raw_reason and end.raw_reason != "completed":
            return "incomplete", end.raw_reason
        return "incomplete", "content_filter"
    return "completed", None
