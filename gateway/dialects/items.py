"""Output and input items that only their own dialect can express, across dialects.

A decoder keeps an item the IR has no kind for whole (``BlockStart.item`` / ``ToolCallPart.item`` /
``OpaquePart``, with the dialect it is written in): a server tool's call or result, or a client
tool call of a kind other than a function (a Responses ``custom_tool_call``, ``shell_call`` …). The
encoder or builder of that dialect writes it back verbatim, in its place in the order; a client
tool call reaches every other dialect as the function call its ``name`` / arguments spell; a
server item has no counterpart there and is left out — and reported: ``output_item:<type>`` /
``input_item:<type>`` in the access log's ``dropped`` (and the ``gateway_dropped_settings``
metric), as a setting an upstream could not carry is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.dialects.base import EncodeContext
from gateway.events import BlockStart, Event
from gateway.ir import ChatRequest, Message, OpaquePart


def item_type(item: dict[str, Any] | None) -> str:
    """The item's own type name (``web_search_call``, ``server_tool_use`` …); an item without a
    ``type`` (a Gemini part) is named by its first field (``executableCode``)."""
    if not isinstance(item, dict):
        return "unknown"
    kind = item.get("type")
    if isinstance(kind, str) and kind:
        return kind
    return next((k for k in item if k not in ("thought", "thoughtSignature")), "unknown")


def same(origin: str | None, dialect: str) -> bool:
    """Whether an item of ``origin`` is written back verbatim by ``dialect``'s encoder/builder."""
    return origin == dialect


def drop_output(ctx: EncodeContext, item: dict[str, Any] | None) -> None:
    """An output item this caller's dialect cannot express: left out, and named in ``dropped``."""
    name = f"output_item:{item_type(item)}"
    if name not in ctx.dropped:
        ctx.dropped.append(name)


def unshown(event: Event, dialect: str) -> str | None:
    """The ``dropped`` name of an opaque block a caller of ``dialect`` cannot be shown (a server
    item of another dialect: no encoder maps one), for an answer encoded once per reader (a
    detached generation) rather than once per request; ``None`` for any other event."""
    if type(event) is BlockStart and event.kind == "opaque" and event.origin != dialect:
        return f"output_item:{item_type(event.item)}"
    return None


def without_lost_items(req: ChatRequest, upstream_dialect: str) -> tuple[ChatRequest, list[str]]:
    """The request an upstream of ``upstream_dialect`` is built from, and what it never receives:
    the history's opaque items of another dialect (server tools' calls and results), reported as
    ``input_item:<type>``. They are taken out here, with a turn they leave empty (an assistant
    turn that only searched), so no builder sends an empty message; ``req`` itself is unchanged."""
    lost: list[str] = []
    messages: list[Message] = []
    for message in req.messages:
        kept = [p for p in message.content if not (isinstance(p, OpaquePart) and p.origin != upstream_dialect)]
        if len(kept) == len(message.content):
            messages.append(message)
            continue
        for part in message.content:
            if isinstance(part, OpaquePart) and part.origin != upstream_dialect:
                name = f"input_item:{item_type(part.item)}"
                if name not in lost:
                    lost.append(name)
        if kept:
            messages.append(Message(message.role, kept))
    if not lost:
        return req, []
    return replace(req, messages=messages), lost
