"""Whole Responses objects: upstream JSON -> events, and ``Reply`` -> the caller's response object.

``response_object`` is also what the stream encoder puts in ``response.created`` /
``.completed`` / …, so streaming and non-streaming callers see the same object.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.dialects import signatures
from gateway.dialects.base import EncodeContext
from gateway.dialects.common import new_id
from gateway.dialects.items import drop_output
from gateway.dialects.kit import as_list
from gateway.events import End, Event, StreamError
from gateway.ir import ChatRequest
from gateway.reply import Reply, ReplyBlock, unfold

from .client_tools import NATIVE_KEY, native_item
from .errors import error_type_code, kind_for_code
from .items import client_call
from .stop_reasons import COMPLETED, map_stop_reason, render_stop_reason
from .stream_decode import tool_name
from .usage import convert_usage, render_usage

DIALECT = "openai-responses"


# --------------------------------------------------------------------------- decode


def decode_whole(body: dict[str, Any]) -> list[Event]:
    err = body.get("error")
    if body.get("status") == "failed" or (isinstance(err, dict) and not body.get("output")):
        e = err if isinstance(err, dict) else {}
        code = (
            e.get("code")
            if isinstance(e.get("code"), str)
            else e.get("type")
            if isinstance(e.get("type"), str)
            else None
        )
        kind, status = kind_for_code(code)
        return [StreamError(kind, str(e.get("message") or "the response failed"), status, code or "server_error")]
    reply = Reply(id=str(body.get("id") or new_id("resp_")), model=str(body.get("model") or ""))
    saw_call = False
    for item in as_list(body.get("output")):
        if not isinstance(item, dict):
            continue
        item_type = item.get("type")
        if item_type == "message":
            for part in as_list(item.get("content")):
                if isinstance(part, dict):
                    part_type = part.get("type")
                    part_text = (
                        part.get("text")
                        if part_type == "output_text"
                        else part.get("refusal")
                        if part_type == "refusal"
                        else None
                    )
                    if isinstance(part_text, str):
                        # with its annotations (web search's url_citation …): the part kept,
                        # its text the block's
                        cited = part if part_type == "output_text" and part.get("annotations") else None
                        reply.blocks.append(
                            ReplyBlock("text", part_text, item=cited, origin=DIALECT if cited else None)
                        )
        elif item_type == "function_call":
            saw_call = True
            args = item.get("arguments")
            name, namespace = tool_name(item)
            reply.blocks.append(
                ReplyBlock(
                    "tool_call",
                    args if isinstance(args, str) else "",
                    id=str(item.get("call_id") or item.get("id") or ""),
                    name=name,
                    namespace=namespace,
                )
            )
        elif item_type == "reasoning":
            texts = [s.get("text") for s in as_list(item.get("summary")) if isinstance(s, dict)]
            if not any(texts):
                texts = [c.get("text") for c in as_list(item.get("content")) if isinstance(c, dict)]
            text = "\n\n".join(t for t in texts if isinstance(t, str) and t)
            enc = item.get("encrypted_content") if isinstance(item.get("encrypted_content"), str) else None
            if text or enc:
                reply.blocks.append(ReplyBlock("thinking", text, signature=enc or None))
        else:  # kept whole, in its place (items.py): a client tool call is also a function call
            call = client_call(item)
            if call is not None:
                saw_call = True
                call_id, name, args = call
                reply.blocks.append(ReplyBlock("tool_call", args, id=call_id, name=name, item=item, origin=DIALECT))
            else:
                reply.blocks.append(ReplyBlock("opaque", item=item, origin=DIALECT))
    usage = convert_usage(body.get("usage"))
    if usage is not None:
        reply.usage = usage
    if body.get("status") == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        reason = reason if isinstance(reason, str) else None
        reply.end = End(map_stop_reason(reason), reason)
    else:
        reply.end = End(map_stop_reason(COMPLETED, tool_called=saw_call), COMPLETED)
    events = unfold(reply)
    if usage is None:
        events = [e for e in events if e is not reply.usage]
    return events


# --------------------------------------------------------------------------- encode


def _tools_echo(req: ChatRequest) -> list[dict[str, Any]]:
    out = []
    native: dict[str, dict[str, Any]] = req.extras.get(DIALECT, {}).get(NATIVE_KEY) or {}
    namespaces: dict[str, Any] = req.extras.get(DIALECT, {}).get("tool_namespaces") or {}
    for t in req.tools:
        if t.name in native and t.name not in namespaces:  # a custom / shell / apply_patch tool, as declared
            out.append(native[t.name])
            continue
        tool: dict[str, Any] = {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": t.strict if t.strict is not None else False,
        }
        out.append(tool)
    return out


def _tool_choice_echo(req: ChatRequest) -> Any:
    c = req.tool_choice
    if c is None:
        return "auto"
    if c.mode == "tool" and c.name:
        return {"type": "function", "name": c.name}
    return c.mode


def response_object(ctx: EncodeContext, resp_id: str, created_at: int, status: str) -> dict[str, Any]:
    """A Responses ``response`` object with the fields the SDK's ``Response`` model requires."""
    req = ctx.request
    t = req.thinking
    extras = req.extras.get(DIALECT, {})
    return {
        "id": resp_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": bool(req.background),
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": req.max_tokens,
        "model": ctx.model,
        "output": [],
        "parallel_tool_calls": req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
        "previous_response_id": req.previous_id,
        "reasoning": {"effort": t.effort if t else None, "summary": extras.get("reasoning_summary")},
        "store": req.store is not False,
        "temperature": req.temperature if req.temperature is not None else 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": _tool_choice_echo(req),
        "tools": _tools_echo(req),
        "top_p": req.top_p if req.top_p is not None else 1.0,
        "truncation": "disabled",
        "usage": None,
        "user": req.user,
        "metadata": req.metadata or {},
    }


def message_item(
    item_id: str, text: str, status: str = "completed", part: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``message`` item of one ``output_text`` part; ``part``: a Responses upstream's own part
    (its annotations kept), with ``text``."""
    content = (
        {**part, "text": text} if part else {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    )
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [content]}


def call_item(
    item_id: str,
    call_id: str,
    name: str,
    arguments: str,
    namespaces: dict[str, Any],
    status: str = "completed",
    namespace: str | None = None,
) -> dict[str, Any]:
    """A ``function_call`` item: ``namespace`` is the upstream's own (a Responses upstream's
    namespaced call); else a namespace tool the caller declared, flattened in the IR, is restored."""
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }
    ns = namespaces.get(name)
    if namespace:
        item["namespace"] = namespace
    elif ns:
        item["name"], item["namespace"] = ns["name"], ns["namespace"]
    return item


def reasoning_item(item_id: str, text: str, signature: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }
    if signature:
        item["encrypted_content"] = signature
    return item


def finish_object(
    obj: dict[str, Any],
    output: list[dict[str, Any]],
    reply_end: Any,
    error: StreamError | None,
    usage: Any,
    upstream_dialect: str,
) -> None:
    """Fill the terminal fields: status, output, usage, incomplete_details or error."""
    obj["output"] = output
    if error is not None and error.kind == "cancelled":  # a status of the response, not a failure
        obj["status"] = "cancelled"
        obj["usage"] = render_usage(usage)
        return
    if error is not None:
        typ, code = error_type_code(error.kind, error.raw, upstream_dialect)
        obj["status"] = "failed"
        obj["error"] = {"code": code or typ, "message": error.message}
        return
    status, reason = render_stop_reason(reply_end, upstream_dialect == DIALECT)
    obj["status"] = status
    obj["usage"] = render_usage(usage)
    if reason is not None:
        obj["incomplete_details"] = {"reason": reason}
    else:
        obj["completed_at"] = int(time.time())


def encode_whole(reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
    resp_id = ctx.response_id or (reply.id if reply.id.startswith("resp_") else new_id("resp_"))
    obj = response_object(ctx, resp_id, int(time.time()), "completed")
    namespaces = ctx.request.extras.get(DIALECT, {}).get("tool_namespaces") or {}
    native: dict[str, dict[str, Any]] = ctx.request.extras.get(DIALECT, {}).get(NATIVE_KEY) or {}
    output: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.kind == "text" and block.item is not None and block.origin == DIALECT:
            output.append(message_item(new_id("msg_"), block.text, part=block.item))  # an annotated text
        elif block.item is not None and block.origin == DIALECT:  # the upstream's own item, verbatim
            output.append(block.item)
        elif block.kind == "opaque":
            drop_output(ctx, block.item)
        elif block.kind == "text":
            output.append(message_item(new_id("msg_"), block.text))
        elif block.kind == "tool_call" and block.name in native and not block.namespace:  # client_tools.py
            ns = (namespaces.get(block.name) or {}).get("namespace")
            output.append(native_item(native[block.name], block.id or new_id("call_"), block.arguments, namespace=ns))
        elif block.kind == "tool_call":
            output.append(
                call_item(
                    new_id("fc_"),
                    block.id or new_id("call_"),
                    block.name or "",
                    block.arguments,
                    namespaces,
                    namespace=block.namespace,
                )
            )
        elif block.kind == "thinking":
            sig = signatures.for_caller(DIALECT, ctx.upstream_dialect, block.signature) if block.signature else None
            if block.text or sig:
                output.append(reasoning_item(new_id("rs_"), block.text, sig))
    finish_object(obj, output, reply.end or End("stop"), reply.error, reply.usage, ctx.upstream_dialect)
    return obj
