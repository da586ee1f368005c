"""A loopback upstream answering whole answers of the documented item shapes, whole or streamed.

Each answer is written once, as the provider's whole object (``WHOLE[dialect][scenario]``); a
``stream: true`` request gets the same answer as that provider streams it, built from the whole
object by the provider's own event sequence (Responses ``output_item.added`` / ``.done`` per item,
a ``custom_tool_call``'s input as ``custom_tool_call_input.delta``; Anthropic ``content_block_start``
with a ``server_tool_use``'s input as ``input_json_delta``; Interactions ``step.start`` /
``step.stop``, a server step's content in a ``step.delta`` of its type). The scenario is the part of the model name after ``--``. Every request body is kept
in ``received``.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from tests.support.fake_upstream import read_request

PATCH = "*** Begin Patch\n*** Add File: text.txt\n+text\n*** End Patch\n"

RESPONSES_ITEMS: list[dict[str, Any]] = [
    {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [
            {
                "type": "output_text",
                "text": "On it.",
                "annotations": [
                    {
                        "type": "url_citation",
                        "start_index": 0,
                        "end_index": 6,
                        "url": "https://example.com/text",
                        "title": "text",
                    }
                ],
                "logprobs": [],
            }
        ],
    },
    {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "text"}},
    {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_patch",
        "name": "apply_patch",
        "input": PATCH,
    },
    {
        "id": "sh_1",
        "type": "shell_call",
        "status": "completed",
        "call_id": "call_shell",
        "action": {"commands": ["ls -la", "echo text"], "timeout_ms": 10000, "max_output_length": 2000},
    },
    {
        "id": "lsh_1",
        "type": "local_shell_call",
        "status": "completed",
        "call_id": "call_local",
        "action": {"type": "exec", "command": ["ls", "-la"], "env": {"TEXT": "text"}, "timeout_ms": 5000},
    },
    {
        "id": "apc_1",
        "type": "apply_patch_call",
        "status": "completed",
        "call_id": "call_apply",
        "operation": {"type": "update_file", "path": "text.py", "diff": "@@\n-text\n+text = 1\n"},
    },
    {
        "id": "mcp_1",
        "type": "mcp_call",
        "status": "completed",
        "server_label": "text",
        "name": "lookup",
        "arguments": '{"q": "text"}',
        "output": "found",
        "error": None,
    },
    {"id": "fut_1", "type": "future_item", "status": "completed", "payload": {"nested": [1, 2.5, "text"]}},
]
# What each client tool call is as a function call, for a caller of another dialect (items.py)
RESPONSES_CALLS = [
    ("apply_patch", {"input": PATCH}),
    ("shell", RESPONSES_ITEMS[3]["action"]),
    ("local_shell", RESPONSES_ITEMS[4]["action"]),
    ("apply_patch", RESPONSES_ITEMS[5]["operation"]),
]
RESPONSES_SERVER = ["web_search_call", "mcp_call", "future_item"]

ANTHROPIC_BLOCKS: list[dict[str, Any]] = [
    {"type": "text", "text": "Searching."},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "text"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/text",
                "title": "text",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2Q",
                "page_age": "April 30, 2025",
            }
        ],
    },
    {"type": "server_tool_use", "id": "srvtoolu_2", "name": "bash_code_execution", "input": {"command": "ls"}},
    {
        "type": "bash_code_execution_tool_result",
        "tool_use_id": "srvtoolu_2",
        "content": {
            "type": "bash_code_execution_result",
            "stdout": "text\n",
            "stderr": "",
            "return_code": 0,
            "content": [],
        },
    },
    {
        "type": "mcp_tool_use",
        "id": "mcptoolu_1",
        "name": "lookup",
        "server_name": "text",
        "input": {"q": "text"},
    },
    {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_1",
        "is_error": False,
        "content": [{"type": "text", "text": "found"}],
    },
    {
        "type": "text",
        "text": " Done.",
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://example.com/text",
                "title": "text",
                "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
                "cited_text": "text",
            }
        ],
    },
]
ANTHROPIC_SERVER = [
    "server_tool_use",
    "web_search_tool_result",
    "bash_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
]

INTERACTIONS_STEPS: list[dict[str, Any]] = [
    {"type": "google_search_call", "id": "gs_1", "arguments": {"queries": ["text"]}, "search_type": "web_search"},
    {
        "type": "google_search_result",
        "call_id": "gs_1",
        "result": [{"search_suggestions": "<div class='text'>text</div>"}],
        "signature": "c2lnbmF0dXJl",
    },
    {"type": "model_output", "content": [{"type": "text", "text": "Searched: text."}]},
]
INTERACTIONS_SERVER = ["google_search_call", "google_search_result"]

GEMINI_PARTS: list[dict[str, Any]] = [
    {"text": "Running code."},
    {"executableCode": {"language": "PYTHON", "code": "print('text')"}},
    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "text\n"}},
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    {"text": "Ran it."},
]
GEMINI_SERVER = ["executableCode", "codeExecutionResult", "inlineData"]


def responses_whole(model: str, patch: str = PATCH) -> dict[str, Any]:
    output = copy.deepcopy(RESPONSES_ITEMS)
    output[2]["input"] = patch
    return {
        "id": "resp_items",
        "object": "response",
        "created_at": 1764800000,
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": 40,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 30,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 70,
        },
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def anthropic_whole(model: str) -> dict[str, Any]:
    return {
        "id": "msg_items",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": copy.deepcopy(ANTHROPIC_BLOCKS),
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 40,
            "output_tokens": 30,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def interactions_whole(model: str) -> dict[str, Any]:
    return {
        "id": "v1_items",
        "status": "completed",
        "steps": copy.deepcopy(INTERACTIONS_STEPS),
        "usage": {"total_input_tokens": 40, "total_output_tokens": 30, "total_tool_use_tokens": 5, "total_tokens": 75},
        "created": "2026-12-01T00:00:00Z",
        "updated": "2026-12-01T00:00:01Z",
        "object": "interaction",
        "model": model,
    }


def gemini_whole(model: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": copy.deepcopy(GEMINI_PARTS)}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 30, "totalTokenCount": 70},
        "modelVersion": model,
        "responseId": "gem_items",
    }


def gemini_stream(whole: dict[str, Any]) -> bytes:
    """One chunk per part, the finish reason and usage on the last (Gemini's SSE, CRLF-separated)."""
    parts = whole["candidates"][0]["content"]["parts"]
    out = []
    for i, part in enumerate(parts):
        cand: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        chunk: dict[str, Any] = {
            "candidates": [cand],
            "modelVersion": whole["modelVersion"],
            "responseId": whole["responseId"],
        }
        if i == len(parts) - 1:
            cand["finishReason"] = "STOP"
            chunk["usageMetadata"] = whole["usageMetadata"]
        out.append(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")
    return b"".join(out)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def responses_stream(whole: dict[str, Any]) -> bytes:
    shell = {**whole, "status": "in_progress", "output": [], "usage": None}
    out = [_sse("response.created", {"type": "response.created", "response": shell})]
    for i, item in enumerate(whole["output"]):
        added = {**item, "status": "in_progress"}
        if item["type"] == "message":
            added["content"] = []
        if item["type"] == "custom_tool_call":
            added["input"] = ""
        out.append(
            _sse("response.output_item.added", {"type": "response.output_item.added", "output_index": i, "item": added})
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            head = {"item_id": item["id"], "output_index": i, "content_index": 0}
            out.append(
                _sse("response.content_part.added", {"type": "response.content_part.added", **head, "part": part})
            )
            out.append(
                _sse("response.output_text.delta", {"type": "response.output_text.delta", **head, "delta": text})
            )
            out.append(_sse("response.output_text.done", {"type": "response.output_text.done", **head, "text": text}))
        elif item["type"] == "custom_tool_call":
            head = {"item_id": item["id"], "output_index": i}
            half = len(item["input"]) // 2
            for piece in (item["input"][:half], item["input"][half:]):
                out.append(
                    _sse(
                        "response.custom_tool_call_input.delta",
                        {"type": "response.custom_tool_call_input.delta", **head, "delta": piece},
                    )
                )
            out.append(
                _sse(
                    "response.custom_tool_call_input.done",
                    {"type": "response.custom_tool_call_input.done", **head, "input": item["input"]},
                )
            )
        elif item["type"] == "mcp_call":
            head = {"item_id": item["id"], "output_index": i}
            out.append(_sse("response.mcp_call.in_progress", {"type": "response.mcp_call.in_progress", **head}))
            out.append(_sse("response.mcp_call.completed", {"type": "response.mcp_call.completed", **head}))
        out.append(
            _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": item})
        )
    out.append(_sse("response.completed", {"type": "response.completed", "response": whole}))
    return b"".join(out)


def anthropic_stream(whole: dict[str, Any]) -> bytes:
    start = {**whole, "content": [], "stop_reason": None, "usage": {**whole["usage"], "output_tokens": 1}}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(whole["content"]):
        if block["type"] == "text":
            out.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                )
            )
            for citation in block.get("citations") or []:
                delta = {"type": "citations_delta", "citation": citation}
                out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
            delta = {"type": "text_delta", "text": block["text"]}
            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        elif block["type"] == "server_tool_use":  # its input streamed (the SDK accumulates it)
            head = {**block, "input": {}}
            out.append(_sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": head}))
            text = orjson.dumps(block["input"]).decode()
            for piece in (text[:5], text[5:]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        else:  # a tool result block: whole in its start
            out.append(_sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    out.append(_sse("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 30}}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def interactions_stream(whole: dict[str, Any]) -> bytes:
    def ev(kind: str, data: dict[str, Any]) -> bytes:
        return _sse(kind, {**data, "event_type": kind})

    shell = {"id": whole["id"], "status": "in_progress", "object": "interaction", "model": whole["model"]}
    out = [ev("interaction.created", {"interaction": shell})]
    for i, step in enumerate(whole["steps"]):
        if step["type"] == "model_output":
            out.append(ev("step.start", {"index": i, "step": {"type": "model_output"}}))
            out.append(ev("step.delta", {"index": i, "delta": {"type": "text", "text": step["content"][0]["text"]}}))
        else:  # a server tool's step: its shell, then its content as one delta of its type
            shell = {k: v for k, v in step.items() if k in ("type", "id", "call_id", "search_type")}
            rest = {k: v for k, v in step.items() if k not in shell}
            out.append(ev("step.start", {"index": i, "step": shell}))
            out.append(ev("step.delta", {"index": i, "delta": {"type": step["type"], **rest}}))
        out.append(ev("step.stop", {"index": i}))
    done = {k: v for k, v in whole.items() if k != "steps"}
    out.append(ev("interaction.completed", {"interaction": done}))
    return b"".join(out) + b"event: done\ndata: [DONE]\n\n"


class ItemsUpstream:
    """The ASGI app: Responses, Anthropic and Interactions upstreams answering the item scenarios."""

    def __init__(self, patch: str = PATCH) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.patch = patch  # the custom_tool_call's input

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        body = orjson.loads(raw) if raw else {}
        path = scope["path"]
        self.received.append((path, body))
        model = str(body.get("model", ""))
        if path.endswith("/responses"):
            whole, streamed = responses_whole(model, self.patch), responses_stream
        elif path.endswith("/messages"):
            whole, streamed = anthropic_whole(model), anthropic_stream
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            model = path.split("/models/", 1)[1].rsplit(":", 1)[0]
            whole = gemini_whole(model)
            if ":streamGenerateContent" in path:
                await _send(send, "text/event-stream", gemini_stream(whole))
            else:
                await _send(send, "application/json", orjson.dumps(whole))
            return
        elif path.endswith("/interactions"):
            whole, streamed = interactions_whole(model), interactions_stream
        elif path.endswith("/chat/completions"):  # a tool result turn's answer
            whole = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }
            chunk = {
                **whole,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
            }
            if body.get("stream"):
                await _send(send, "text/event-stream", b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n")
            else:
                await _send(send, "application/json", orjson.dumps(whole))
            return
        else:
            await _send(send, "application/json", b'{"error": "no such endpoint"}', 404)
            return
        if body.get("stream"):
            await _send(send, "text/event-stream", streamed(whole))
        else:
            await _send(send, "application/json", orjson.dumps(whole))


async def _send(send: Any, content_type: str, body: bytes, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type.encode())]})
    await send({"type": "http.response.body", "body": body})
