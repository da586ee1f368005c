"""A loopback Anthropic, Chat and Gemini upstream whose model calls one of the function tools it was given.

Which one, and with what arguments, is the scenario (the model name's part after ``--``, see
``CALLS``): Codex's custom ``apply_patch`` tool arrives as a function of one ``input`` string, the
built-in shell / local_shell / apply_patch tools as functions of their action's fields. A request
whose last turn carries a tool result is answered with the text ``done``. Streams send the
arguments in small fragments, cutting through escapes, the way the providers stream them
(Anthropic ``input_json_delta``, Chat ``tool_calls[].function.arguments``; Gemini sends a call whole). Every request body is
kept in ``received``.
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.support.fake_upstream import read_request

PATCH = '*** Begin Patch\n*** Add File: text.txt\n+"text" \\ é\n*** End Patch\n'
SHELL = {"commands": ["ls -la", "cat text.txt"], "timeout_ms": 1000}
LOCAL_SHELL = {"command": ["ls", "-la"], "env": {"HOME": "/tmp"}}
OPERATION = {"type": "create_file", "path": "text.txt", "diff": "+text\n"}
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "custom": ("apply_patch", {"input": PATCH}),
    "shell": ("shell", SHELL),
    "local_shell": ("local_shell", LOCAL_SHELL),
    "apply_patch": ("apply_patch", OPERATION),
    "exec": ("functions__exec", {"input": "console.log(1)"}),
}
STEP = 5  # the arguments' fragment size in a stream


def _answered(body: dict[str, Any]) -> bool:
    if "contents" in body:  # Gemini
        parts = (body["contents"] or [{}])[-1].get("parts") or []
        return any("functionResponse" in p for p in parts)
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") == "tool":
        return True
    content = last.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "tool_result" for p in content)


def _pieces(text: str) -> list[str]:
    return [text[i : i + STEP] for i in range(0, len(text), STEP)]


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def anthropic(model: str, call: tuple[str, dict[str, Any]] | None, stream: bool) -> tuple[str, bytes]:
    usage = {"input_tokens": 10, "output_tokens": 5}
    block: dict[str, Any] = (
        {"type": "tool_use", "id": "toolu_1", "name": call[0], "input": call[1]}
        if call
        else {"type": "text", "text": "done"}
    )
    stop = "tool_use" if call else "end_turn"
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "stop_sequence": None}
    if not stream:
        whole = {**message, "content": [block], "stop_reason": stop, "usage": usage}
        return "application/json", orjson.dumps(whole)
    out = _sse({"type": "message_start", "message": {**message, "content": [], "stop_reason": None, "usage": usage}})
    if call:
        out += _sse({"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}})
        for piece in _pieces(orjson.dumps(call[1]).decode()):
            out += _sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
    else:
        out += _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        out += _sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}})
    out += _sse({"type": "content_block_stop", "index": 0})
    out += _sse({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}})
    return "text/event-stream", out + _sse({"type": "message_stop"})


def chat(model: str, call: tuple[str, dict[str, Any]] | None, stream: bool) -> tuple[str, bytes]:
    base = {"id": "chatcmpl-1", "created": 1, "model": model}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    finish = "tool_calls" if call else "stop"
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": None if call else "done"}
        if call:
            fn = {"name": call[0], "arguments": orjson.dumps(call[1]).decode()}
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": fn}]
        whole = {
            **base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return "application/json", orjson.dumps(whole)

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        body = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }
        return _sse(body)

    out = chunk({"role": "assistant", "content": None if call else ""})
    if call:
        first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": call[0], "arguments": ""}}
        out += chunk({"tool_calls": [first]})
        for piece in _pieces(orjson.dumps(call[1]).decode()):
            out += chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    else:
        out += chunk({"content": "done"})
    out += chunk({}, finish)
    out += _sse({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return "text/event-stream", out + b"data: [DONE]\n\n"


def gemini(model: str, call: tuple[str, dict[str, Any]] | None, stream: bool) -> tuple[str, bytes]:
    """Gemini sends a function call whole, in one chunk."""
    part: dict[str, Any] = {"functionCall": {"name": call[0], "args": call[1]}} if call else {"text": "done"}
    whole = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": model,
    }
    if stream:
        return "text/event-stream", _sse(whole)
    return "application/json", orjson.dumps(whole)


class FreeformUpstream:
    """The ASGI app: ``/v1/messages``, ``/v1/chat/completions``, Gemini's ``generateContent``
    and a plain whole ``/v1/responses`` answer."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        body = orjson.loads(raw) if raw else {}
        path = scope["path"]
        self.received.append((path, body))
        model = str(body.get("model", ""))
        if "/models/" in path:
            model = path.split("/models/", 1)[1].rsplit(":", 1)[0]
        call = None if _answered(body) else CALLS.get(model.rsplit("--", 1)[-1])
        stream = bool(body.get("stream"))
        if path.endswith("/messages"):
            content_type, out = anthropic(model, call, stream)
        elif path.endswith("/chat/completions"):
            content_type, out = chat(model, call, stream)
        elif path.endswith("/responses") and not stream:  # a plain answer (a turn continued there)
            text = {"type": "output_text", "text": "done", "annotations": []}
            message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [text]}
            usage = {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11}
            whole = {"id": "resp_up", "object": "response", "status": "completed", "model": model, "output": [message]}
            content_type, out = "application/json", orjson.dumps({**whole, "usage": usage})
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            content_type, out = gemini(model, call, ":streamGenerateContent" in path)
        else:
            content_type, out = "application/json", b'{"error": "no such endpoint"}'
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})
