"""Whole Interaction resources: upstream JSON -> events, and ``Reply`` -> the caller's resource.

A POST answers only the generated steps; a GET answers the whole timeline starting with
``user_input``: decoding skips input-side steps (``user_input``, ``function_result``) so either
shape decodes to the model's answer. The encoded resource (``encode_whole``) is what a POST
answers: ``{id, status, steps, usage, created, updated, object, model}``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects import signatures
from gateway.dialects.base import EncodeContext
from gateway.dialects.common import new_id
from gateway.dialects.items import drop_output
from gateway.events import End, Event
from gateway.reply import Reply, ReplyBlock, unfold

from .errors import code_for
from .stop_reasons import map_stop_reason, render_stop_reason
from .stream_decode import content_text, failure_for_status, summary_text
from .stream_encode import iso_now
from .usage import convert_usage, render_usage

DIALECT = "gemini-interactions"
_INPUT_STEPS = frozenset({"user_input", "function_result"})


def decode_whole(body: dict[str, Any]) -> list[Event]:
    reply = Reply(id=str(body.get("id") or new_id("v1_")), model=str(body.get("model") or body.get("agent") or ""))
    status = str(body.get("status") or "completed")
    failure = failure_for_status(status, body)
    if failure is None and isinstance(body.get("error"), dict) and not body.get("steps"):
        failure = failure_for_status("failed", {"error": body["error"]})
    saw_call = False
    for step in body.get("steps") or []:
        if not isinstance(step, dict):
            continue
        typ = step.get("type")
        if typ == "model_output":
            text = content_text(step.get("content"))
            if text:
                reply.blocks.append(ReplyBlock("text", text))
        elif typ == "thought":
            sig = step.get("signature") if isinstance(step.get("signature"), str) else None
            text = summary_text(step.get("summary"))
            if text or sig:
                reply.blocks.append(ReplyBlock("thinking", text, signature=sig or None))
        elif typ == "function_call":
            saw_call = True
            args = step.get("arguments")
            reply.blocks.append(
                ReplyBlock(
                    "tool_call",
                    orjson.dumps(args).decode() if isinstance(args, dict) else "",
                    id=str(step.get("id") or new_id("call_", 8)),
                    name=str(step.get("name") or ""),
                )
            )
        elif typ not in _INPUT_STEPS:  # a server tool's step (google_search_call / _result …): kept whole
            reply.blocks.append(ReplyBlock("opaque", item=step, origin=DIALECT))
    usage = convert_usage(body.get("usage"))
    if usage is not None:
        reply.usage = usage
    if failure is not None:
        reply.error = failure
    else:
        reply.end = End(map_stop_reason(status, tool_called=saw_call), status)
    events = unfold(reply)
    if usage is None:
        events = [e for e in events if e is not reply.usage]
    return events


def steps_for_reply(reply: Reply, ctx: EncodeContext) -> list[dict[str, Any]]:
    """The generated steps of a reply, as the caller sees them."""
    steps: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.item is not None and block.origin == DIALECT:  # the upstream's own step, verbatim
            steps.append(block.item)
        elif block.kind == "opaque":
            drop_output(ctx, block.item)
        elif block.kind == "text":
            steps.append({"type": "model_output", "content": [{"type": "text", "text": block.text}]})
        elif block.kind == "thinking":
            step: dict[str, Any] = {"type": "thought"}
            if block.signature:
                step["signature"] = signatures.for_caller(DIALECT, ctx.upstream_dialect, block.signature)
            th = ctx.request.thinking
            if block.text and not (th is not None and th.include_thoughts is False):
                step["summary"] = [{"type": "text", "text": block.text}]
            if len(step) > 1:
                steps.append(step)
        elif block.kind == "tool_call":
            value = orjson.loads(block.arguments) if _is_object(block.arguments) else {"_raw": block.arguments}
            steps.append(
                {
                    "type": "function_call",
                    "id": block.id or new_id("call_", 8),
                    "name": block.name or "",
                    "arguments": value,
                }
            )
    return steps


def _is_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def encode_whole(
    reply: Reply, ctx: EncodeContext, interaction_id: str | None = None, created: str | None = None
) -> dict[str, Any]:
    now = iso_now()
    cancelled = reply.error is not None and reply.error.kind == "cancelled"  # a status, not a failure
    if cancelled:
        status = "cancelled"
    elif reply.error is not None:
        status = "failed"
    else:
        status = (
            render_stop_reason(reply.end, ctx.upstream_dialect == DIALECT) if reply.end is not None else "completed"
        )
    obj: dict[str, Any] = {
        "id": interaction_id or ctx.response_id or new_id("v1_"),
        "status": status,
        "steps": steps_for_reply(reply, ctx),
        "usage": render_usage(reply.usage),
        "created": created or now,
        "updated": now,
        "object": "interaction",
        "model": ctx.model,
    }
    if reply.error is not None and not cancelled:
        obj["errors"] = [
            {"code": code_for(reply.error.kind, reply.error.raw, ctx.upstream_dialect), "message": reply.error.message}
        ]
    return obj
