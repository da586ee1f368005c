"""A scripted fake upstream for coding-agent tests: answers by conversation state, in four dialects.

Unlike ``tests/support/fake_upstream.py`` (which replays fixed captures), this fake reads the
conversation the gateway sends it and plays a model that drives a coding agent through one task:

* **plain prompt** -> a fixed text, :data:`PLAIN_ANSWER`.
* **turn 1 of a file task** (a user text says ``read the file /abs/path``) -> one call of the
  agent's own file-reading tool, found in the ``tools`` list the request carries: Claude Code's
  ``Read {file_path}``, Gemini CLI's ``read_file {absolute_path | file_path}``, Codex's shell tool
  (``shell {command: ["cat", path]}``, ``exec_command {cmd: "cat path"}``, ``shell_command
  {command: "cat path"}``), whichever is offered.
* **turn 1 of an MCP task** (a user text says ``call the tool NAME with {json}``) -> one call of
  the offered tool ``NAME`` or ``mcp__<server>__NAME`` (how Claude Code names MCP tools).
* **turn 2** (the request holds a tool result) -> text that quotes the tool result:
  ``FILE SAYS: <result>``.

Thinking variant (the upstream model name contains ``--thinking``): turn 1 also carries a thinking
block with a signature, the way each API does it (Anthropic ``thinking`` + ``signature``; Responses
``reasoning`` item with ``encrypted_content``; Gemini ``thoughtSignature`` on the ``functionCall``
part; OpenAI chat ``reasoning_content``, which has no signature). On turn 2 the fake checks that the
signature came back where that API requires it and otherwise answers that API's real 400:

* Anthropic: ``messages.N.content.0.type: Expected `thinking` or `redacted_thinking`, but found
  `tool_use`. ...`` (or ``Invalid `signature` in `thinking` block`` for a wrong one);
* Responses: ``Item 'fc_...' of type 'function_call' was provided without its required
  'reasoning' item: 'rs_...'.`` (or ``The encrypted content for item rs_... could not be
  verified.``);
* Gemini: ``Function call is missing a thought_signature in functionCall parts. ...`` with status
  ``INVALID_ARGUMENT`` (or ``Corrupted thought signature.``).

Other real-API rejections worth reproducing (see :func:`validate`), each with the provider's own
message: Anthropic's ``messages.N.role: Input should be 'user' or 'assistant'`` for a ``system`` turn
inside ``messages`` (Claude Code reacts to exactly this one by folding those turns in), and, as a
current Claude (4.5 and later) does, ```temperature` and `top_p` cannot both be specified for this
model``; OpenAI's
``Invalid 'user': string too long`` (64 characters at most, Chat and Responses), function names
outside ``^[a-zA-Z0-9_-]{1,64}$`` and Responses ``call_id`` over 64; Anthropic tool names and
``tool_use`` ids outside their patterns; Gemini's ``Unknown name "..." at
'tools[0].function_declarations[N].parameters': Cannot find field.`` for JSON Schema keywords that
its OpenAPI-subset ``parameters`` does not have.

Cut variant (the model name contains ``--cut``): the same reply without its stream terminator,
then a clean close; a gateway must turn that into an error for the agent, never a clean ending.

Every request is recorded (:class:`Seen`: path, query, headers, body, what the fake decided) so
tests can assert on what the gateway sent upstream. Streaming endpoints are the point; the
non-streaming ones answer the same reply whole.
"""

from __future__ import annotations

import asyncio
import base64
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

PLAIN_ANSWER = "PLAIN-ANSWER-7d3f: hello from the scripted fake."
TOOL_ANSWER_PREFIX = "FILE SAYS: "
THINKING_TEXT = "The user wants the file read. I will call the read tool."

# Signatures the fake hands out (one per dialect; each looks like that provider's own).
ANTHROPIC_SIGNATURE = base64.b64encode(b"fake-anthropic-thinking-signature-0001").decode()
RESPONSES_ENCRYPTED = "gAAAAAB" + base64.urlsafe_b64encode(b"fake-openai-encrypted-reasoning-0001").decode().rstrip("=")
GEMINI_SIGNATURE = base64.b64encode(b"fake-gemini-thought-signature-0001").decode()

TOOL_CALL_ID = {
    "anthropic": "toolu_01FakeRead0000000000001",
    "openai-chat": "call_fakeread0001",
    "openai-responses": "call_fakeread0001",
}
RESPONSES_FC_ID = "fc_fakeread0001"
RESPONSES_RS_ID = "rs_fakereason0001"

READ_PATTERN = re.compile(r"read the file (/[^\s'\"`]+)", re.IGNORECASE)
# an MCP task: "call the tool NAME with {json}" -> one call of the offered tool named NAME (or, as
# Claude Code names MCP tools, "mcp__<server>__NAME"), with those arguments
CALL_PATTERN = re.compile(r"call the tool ([A-Za-z0-9_.-]+) with (\{.*?\})", re.IGNORECASE)

# Tools the fake knows how to call, in order of preference, with how to fill their arguments.
READ_TOOLS = ("Read", "read_file", "ReadFile", "read")
SHELL_TOOLS = ("shell", "exec_command", "shell_command", "container.exec", "local_shell", "run_shell_command", "Bash")


@dataclass
class Seen:
    """One request the fake received, and what it made of it."""

    dialect: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    model: str = ""
    stream: bool = False
    tool_names: list[str] = field(default_factory=list)
    tool_result: str | None = None  # the last tool result in the conversation, as text
    signature_back: str | None = None  # the signature the request carried back (thinking tasks)
    action: str = ""  # plain | tool_call | tool_answer | error:<status> | count
    error: str | None = None  # the error message the fake answered, if any
    status: int = 200


# --------------------------------------------------------------------------------------------
# Reading a request, per dialect


def dialect_of(path: str) -> str | None:
    if path.endswith("/messages/count_tokens"):
        return "anthropic-count"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    if ":countTokens" in path:
        return "gemini-count"
    return None


def _text_of(content: Any) -> str:
    """Flatten any dialect's content (string, list of blocks/parts, dict) to plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c) for c in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content", "result", "llmContent"):
            if key in content:
                return _text_of(content[key])
        return orjson.dumps(content).decode()
    return str(content)


def user_texts(dialect: str, body: dict[str, Any]) -> list[str]:
    """Every user-authored text in the conversation (system reminders included)."""
    out: list[str] = []
    if dialect == "anthropic":
        for m in body.get("messages") or []:
            if m.get("role") != "user":
                continue
            c = m.get("content")
            if isinstance(c, str):
                out.append(c)
            else:
                out += [b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text"]
    elif dialect == "openai-chat":
        for m in body.get("messages") or []:
            if m.get("role") == "user":
                out.append(_text_of(m.get("content")))
    elif dialect == "openai-responses":
        items = body.get("input")
        if isinstance(items, str):
            return [items]
        for it in items or []:
            if it.get("role") == "user" and it.get("type", "message") == "message":
                out.append(_text_of(it.get("content")))
    elif dialect == "gemini":
        for c in body.get("contents") or []:
            if c.get("role", "user") == "user":
                out += [p["text"] for p in c.get("parts") or [] if isinstance(p.get("text"), str)]
    return out


def tool_result(dialect: str, body: dict[str, Any]) -> str | None:
    """The last tool result in the conversation, as text; None when there is none."""
    found: str | None = None
    if dialect == "anthropic":
        for m in body.get("messages") or []:
            c = m.get("content")
            if m.get("role") == "user" and isinstance(c, list):
                for b in c:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        found = _text_of(b.get("content"))
    elif dialect == "openai-chat":
        for m in body.get("messages") or []:
            if m.get("role") == "tool":
                found = _text_of(m.get("content"))
    elif dialect == "openai-responses":
        items = body.get("input")
        for it in items if isinstance(items, list) else []:
            if it.get("type") in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
                found = _text_of(it.get("output"))
    elif dialect == "gemini":
        for c in body.get("contents") or []:
            for p in c.get("parts") or []:
                if "functionResponse" in p:
                    found = _text_of((p["functionResponse"] or {}).get("response"))
    return found


def tools_offered(dialect: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(name, JSON-schema properties)`` for every function tool in the request."""
    out: list[tuple[str, dict[str, Any]]] = []

    def props(schema: Any) -> dict[str, Any]:
        return (schema or {}).get("properties") or {} if isinstance(schema, dict) else {}

    for t in body.get("tools") or []:
        if dialect == "anthropic":
            if "name" in t:
                out.append((t["name"], props(t.get("input_schema"))))
        elif dialect == "openai-chat":
            fn = t.get("function") or {}
            if fn.get("name"):
                out.append((fn["name"], props(fn.get("parameters"))))
        elif dialect == "openai-responses":
            if t.get("type") == "function" and t.get("name"):
                out.append((t["name"], props(t.get("parameters"))))
            elif t.get("type") == "namespace":
                for sub in t.get("tools") or []:
                    if sub.get("name"):
                        out.append(
                            (
                                f"{t.get('name')}.{sub['name']}" if t.get("name") else sub["name"],
                                props(sub.get("parameters")),
                            )
                        )
            elif t.get("name"):
                out.append((t["name"], {}))
        elif dialect == "gemini":
            for d in t.get("functionDeclarations") or t.get("function_declarations") or []:
                schema = d.get("parametersJsonSchema") or d.get("parameters_json_schema") or d.get("parameters")
                out.append((d.get("name", ""), props(schema)))
    return out


def pick_read_call(tools: list[tuple[str, dict[str, Any]]], path: str) -> tuple[str, dict[str, Any]] | None:
    """The call of the agent's own file-reading tool that reads ``path`` (None: no such tool)."""
    by_name = dict(tools)
    for name in READ_TOOLS:
        if name in by_name:
            p = by_name[name]
            key = next((k for k in ("file_path", "absolute_path", "path", "filename") if k in p), "file_path")
            return name, {key: path}
    for name in SHELL_TOOLS:
        if name in by_name:
            p = by_name[name]
            if "command" in p:
                if p["command"].get("type") == "array":
                    return name, {"command": ["cat", path]}
                return name, {"command": f"cat {path}"}
            if "cmd" in p:
                return name, {"cmd": f"cat {path}"}
            return name, {"command": ["cat", path]}
    return None


def pick_named_call(tools: list[tuple[str, dict[str, Any]]], name: str, args: str) -> tuple[str, dict[str, Any]] | None:
    """The call of the offered tool ``name`` (or ``mcp__<server>__name``) with the JSON ``args``."""
    for offered, _ in tools:
        if offered == name or offered.endswith("__" + name):
            try:
                return offered, orjson.loads(args)
            except orjson.JSONDecodeError:
                return None
    return None


def thinking_enabled(dialect: str, body: dict[str, Any]) -> bool:
    if dialect == "anthropic":
        return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    return True


# --------------------------------------------------------------------------------------------
# The reply: a list of parts, rendered per dialect (stream or whole)


@dataclass
class Reply:
    parts: list[dict[str, Any]]  # {"type": "thinking"|"text"|"tool", ...}
    stop: str  # "end" | "tool"


def _sse(event: str | None, data: Any) -> bytes:
    payload = orjson.dumps(data)
    return (f"event: {event}\n".encode() if event else b"") + b"data: " + payload + b"\n\n"


def anthropic_stream(model: str, reply: Reply) -> list[bytes]:
    msg_id = f"msg_fake{int(time.time() * 1000) % 10**10:010d}"
    frames = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 50,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    for i, part in enumerate(reply.parts):
        if part["type"] == "thinking":
            frames.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                )
            )
            text = part["text"]
            for chunk in (text[: len(text) // 2], text[len(text) // 2 :]):
                frames.append(
                    _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "thinking_delta", "thinking": chunk},
                        },
                    )
                )
            frames.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "signature_delta", "signature": part["signature"]},
                    },
                )
            )
        elif part["type"] == "text":
            frames.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                )
            )
            text = part["text"]
            for chunk in (text[: len(text) // 2], text[len(text) // 2 :]):
                frames.append(
                    _sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": chunk}},
                    )
                )
        else:
            frames.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "tool_use", "id": part["id"], "name": part["name"], "input": {}},
                    },
                )
            )
            args = orjson.dumps(part["args"]).decode()
            for chunk in (args[:5], args[5:]):
                frames.append(
                    _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": chunk},
                        },
                    )
                )
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    frames.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if reply.stop == "tool" else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
    )
    frames.append(_sse("message_stop", {"type": "message_stop"}))
    return frames


def anthropic_whole(model: str, reply: Reply) -> dict[str, Any]:
    content = []
    for part in reply.parts:
        if part["type"] == "thinking":
            content.append({"type": "thinking", "thinking": part["text"], "signature": part["signature"]})
        elif part["type"] == "text":
            content.append({"type": "text", "text": part["text"]})
        else:
            content.append({"type": "tool_use", "id": part["id"], "name": part["name"], "input": part["args"]})
    return {
        "id": "msg_fakewhole",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.stop == "tool" else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }


def chat_stream(model: str, reply: Reply, include_usage: bool) -> list[bytes]:
    base = {
        "id": "chatcmpl-fake0001",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return (
            b"data: "
            + orjson.dumps(
                {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            )
            + b"\n\n"
        )

    frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
    tool_index = 0
    for part in reply.parts:
        if part["type"] == "thinking":
            text = part["text"]
            frames += [
                chunk({"reasoning_content": text[: len(text) // 2]}),
                chunk({"reasoning_content": text[len(text) // 2 :]}),
            ]
        elif part["type"] == "text":
            text = part["text"]
            frames += [chunk({"content": text[: len(text) // 2]}), chunk({"content": text[len(text) // 2 :]})]
        else:
            args = orjson.dumps(part["args"]).decode()
            frames.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": tool_index,
                                "id": part["id"],
                                "type": "function",
                                "function": {"name": part["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for piece in (args[:5], args[5:]):
                frames.append(chunk({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]}))
            tool_index += 1
    frames.append(chunk({}, "tool_calls" if reply.stop == "tool" else "stop"))
    if include_usage:
        frames.append(
            b"data: "
            + orjson.dumps(
                {**base, "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}}
            )
            + b"\n\n"
        )
    frames.append(b"data: [DONE]\n\n")
    return frames


def chat_whole(model: str, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    texts = [p["text"] for p in reply.parts if p["type"] == "text"]
    if texts:
        message["content"] = "".join(texts)
    thinking = [p["text"] for p in reply.parts if p["type"] == "thinking"]
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    calls = [
        {
            "id": p["id"],
            "type": "function",
            "function": {"name": p["name"], "arguments": orjson.dumps(p["args"]).decode()},
        }
        for p in reply.parts
        if p["type"] == "tool"
    ]
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-fakewhole",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.stop == "tool" else "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }


def _responses_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n, part in enumerate(reply.parts):
        if part["type"] == "thinking":
            items.append(
                {
                    "id": RESPONSES_RS_ID,
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": part["text"]}],
                    "encrypted_content": part["signature"],
                }
            )
        elif part["type"] == "text":
            items.append(
                {
                    "id": f"msg_fake{n:04d}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": part["text"], "annotations": [], "logprobs": []}],
                }
            )
        else:
            items.append(
                {
                    "id": RESPONSES_FC_ID,
                    "type": "function_call",
                    "status": "completed",
                    "arguments": orjson.dumps(part["args"]).decode(),
                    "call_id": part["id"],
                    "name": part["name"],
                }
            )
    return items


def _responses_envelope(
    model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": "resp_fake0001",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "metadata": {},
    }


RESPONSES_USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 70,
}


def responses_stream(model: str, reply: Reply) -> list[bytes]:
    seq = 0
    frames: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        nonlocal seq
        frames.append(_sse(kind, {"type": kind, **data, "sequence_number": seq}))
        seq += 1

    emit("response.created", response=_responses_envelope(model, "in_progress", [], None))
    emit("response.in_progress", response=_responses_envelope(model, "in_progress", [], None))
    items = _responses_items(reply)
    for idx, item in enumerate(items):
        iid = item["id"]
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            emit("response.output_item.added", output_index=idx, item={"id": iid, "type": "reasoning", "summary": []})
            emit(
                "response.reasoning_summary_part.added",
                item_id=iid,
                output_index=idx,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                emit(
                    "response.reasoning_summary_text.delta", item_id=iid, output_index=idx, summary_index=0, delta=piece
                )
            emit("response.reasoning_summary_text.done", item_id=iid, output_index=idx, summary_index=0, text=text)
            emit(
                "response.reasoning_summary_part.done",
                item_id=iid,
                output_index=idx,
                summary_index=0,
                part={"type": "summary_text", "text": text},
            )
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=idx, item={**item, "status": "in_progress", "content": []})
            emit(
                "response.content_part.added",
                item_id=iid,
                output_index=idx,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            )
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                emit(
                    "response.output_text.delta",
                    item_id=iid,
                    output_index=idx,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit("response.output_text.done", item_id=iid, output_index=idx, content_index=0, text=text, logprobs=[])
            emit("response.content_part.done", item_id=iid, output_index=idx, content_index=0, part=item["content"][0])
        else:
            args = item["arguments"]
            emit(
                "response.output_item.added", output_index=idx, item={**item, "status": "in_progress", "arguments": ""}
            )
            for piece in (args[:5], args[5:]):
                emit("response.function_call_arguments.delta", item_id=iid, output_index=idx, delta=piece)
            emit("response.function_call_arguments.done", item_id=iid, output_index=idx, arguments=args)
        emit("response.output_item.done", output_index=idx, item=item)
    emit("response.completed", response=_responses_envelope(model, "completed", items, RESPONSES_USAGE))
    return frames


def responses_whole(model: str, reply: Reply) -> dict[str, Any]:
    return _responses_envelope(model, "completed", _responses_items(reply), RESPONSES_USAGE)


def _gemini_parts(reply: Reply) -> list[list[dict[str, Any]]]:
    """The reply as Gemini chunks' part lists (thought text, then the signed call or text)."""
    chunks: list[list[dict[str, Any]]] = []
    signature = None
    for part in reply.parts:
        if part["type"] == "thinking":
            chunks.append([{"text": part["text"], "thought": True}])
            signature = part["signature"]
        elif part["type"] == "text":
            text = part["text"]
            first = {"text": text[: len(text) // 2]}
            if signature:  # Gemini puts the signature on the first part after the thoughts
                first["thoughtSignature"], signature = signature, None
            chunks += [[first], [{"text": text[len(text) // 2 :]}]]
        else:
            call: dict[str, Any] = {"functionCall": {"name": part["name"], "args": part["args"]}}
            if signature:
                call["thoughtSignature"], signature = signature, None
            chunks.append([call])
    return chunks


GEMINI_USAGE = {"promptTokenCount": 50, "candidatesTokenCount": 20, "totalTokenCount": 70}


def gemini_stream(model: str, reply: Reply) -> list[bytes]:
    chunks = _gemini_parts(reply)
    frames = []
    for n, parts in enumerate(chunks):
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if n == len(chunks) - 1:
            cand["finishReason"] = "STOP"
        body = {
            "candidates": [cand],
            "usageMetadata": GEMINI_USAGE,
            "modelVersion": model,
            "responseId": "fakeGeminiResp0001",
        }
        frames.append(b"data: " + orjson.dumps(body) + b"\r\n\r\n")
    return frames


def gemini_whole(model: str, reply: Reply) -> dict[str, Any]:
    parts = [p for chunk in _gemini_parts(reply) for p in chunk]
    return {
        "candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": GEMINI_USAGE,
        "modelVersion": model,
        "responseId": "fakeGeminiResp0001",
    }


def cut_terminator(dialect: str, frames: list[bytes]) -> list[bytes]:
    """The same stream without its terminator, then a clean close (captures/SCENARIOS.md ``no_terminator``):
    Anthropic without ``message_stop``, chat without ``[DONE]``, Responses without
    ``response.completed``, Gemini without the chunk's ``finishReason``."""
    if dialect == "anthropic":
        return [f for f in frames if not f.startswith(b"event: message_stop")]
    if dialect == "openai-chat":
        return [f for f in frames if not f.startswith(b"data: [DONE]")]
    if dialect == "openai-responses":
        return [f for f in frames if not f.startswith(b"event: response.completed")]
    last = orjson.loads(frames[-1][len(b"data: ") :].strip())
    for cand in last.get("candidates") or []:
        cand.pop("finishReason", None)
    return [*frames[:-1], b"data: " + orjson.dumps(last) + b"\r\n\r\n"]


# --------------------------------------------------------------------------------------------
# Errors in each API's own shape


def anthropic_error(message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
        "request_id": "req_fake0001",
    }


def openai_error(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    if code is None and "string too long" in message:
        code = "string_above_max_length"
        param = message.split("'")[1]
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def gemini_error(message: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


ANTHROPIC_NEEDS_THINKING = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is "
    "enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` "
    "and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this "
    "requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
GEMINI_NEEDS_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, "
    "and missing thought_signature may lead to degraded model performance. Additional data, function call "
    "`default_api:{name}` , position {pos}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures "
    "for more details."
)


def check_signature(dialect: str, body: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(signature found, error message or None)`` for turn 2 of a thinking task."""
    if dialect == "anthropic":
        messages = body.get("messages") or []
        # The assistant turn holding the tool call: the one before the last tool_result.
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            c = m.get("content")
            if (
                m.get("role") == "assistant"
                and isinstance(c, list)
                and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in c)
            ):
                first = c[0] if c else {}
                if first.get("type") not in ("thinking", "redacted_thinking"):
                    if not thinking_enabled(dialect, body):
                        return None, None  # the real API accepts this when thinking is off
                    return None, ANTHROPIC_NEEDS_THINKING.format(i=i, found=first.get("type"))
                sig = first.get("signature") or first.get("data")
                if sig != ANTHROPIC_SIGNATURE:
                    return sig, f"messages.{i}.content.0: Invalid `signature` in `thinking` block"
                return sig, None
        return None, None
    if dialect == "openai-responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        reasoning = [it for it in items if it.get("type") == "reasoning"]
        calls = [it for it in items if it.get("type") == "function_call"]
        if not reasoning:
            fc = calls[0].get("id") if calls else None
            return (
                None,
                f"Item '{fc or RESPONSES_FC_ID}' of type 'function_call' was provided without its required 'reasoning' item: '{RESPONSES_RS_ID}'.",
            )
        sig = reasoning[-1].get("encrypted_content")
        if sig != RESPONSES_ENCRYPTED:
            return (
                sig,
                f"The encrypted content for item {reasoning[-1].get('id') or RESPONSES_RS_ID} could not be verified.",
            )
        return sig, None
    if dialect == "gemini":
        contents = body.get("contents") or []
        for i in range(len(contents) - 1, -1, -1):
            parts = contents[i].get("parts") or []
            calls = [(n, p) for n, p in enumerate(parts) if "functionCall" in p]
            if contents[i].get("role") == "model" and calls:
                n, first = calls[0]
                sig = first.get("thoughtSignature") or first.get("thought_signature")
                if not sig:
                    return None, GEMINI_NEEDS_SIGNATURE.format(name=first["functionCall"].get("name"), pos=n + 1)
                if sig != GEMINI_SIGNATURE:
                    return sig, "Corrupted thought signature."
                return sig, None
        return None, None
    return None, None  # openai-chat: reasoning_content carries no signature


# --------------------------------------------------------------------------------------------
# Validation a real provider does before it answers (only rules with a known, quoted message)

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANTHROPIC_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
# The fields of Gemini's ``Schema`` (the OpenAPI subset that ``parameters`` takes).
GEMINI_SCHEMA_FIELDS = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
    "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
    "default", "items", "minimum", "maximum",
}  # fmt: skip


def _gemini_schema_problem(schema: Any, where: str) -> str | None:
    if not isinstance(schema, dict):
        return None
    for key, value in schema.items():
        if key not in GEMINI_SCHEMA_FIELDS:
            return f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': Cannot find field."
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                problem = _gemini_schema_problem(sub, f"{where}.properties[{name}].value")
                if problem:
                    return problem
        elif key == "items":
            problem = _gemini_schema_problem(value, f"{where}.items")
            if problem:
                return problem
        elif key == "anyOf" and isinstance(value, list):
            for n, sub in enumerate(value):
                problem = _gemini_schema_problem(sub, f"{where}.any_of[{n}]")
                if problem:
                    return problem
    return None


def _too_long(field: str, value: Any, limit: int = 64) -> str | None:
    if isinstance(value, str) and len(value) > limit:
        return f"Invalid '{field}': string too long. Expected a string with maximum length {limit}, but got a string with length {len(value)} instead."
    return None


def validate(dialect: str, body: dict[str, Any]) -> str | None:
    """The real API's 400 message for a request it would refuse, or None."""
    if dialect == "anthropic":
        # The fake plays a current Claude (Sonnet/Haiku 4.5 and later), which refuses the pair.
        if body.get("temperature") is not None and body.get("top_p") is not None:
            return "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
        for i, m in enumerate(body.get("messages") or []):
            if m.get("role") not in ("user", "assistant"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant'"
            for j, b in enumerate(m.get("content") if isinstance(m.get("content"), list) else []):
                if (
                    isinstance(b, dict)
                    and b.get("type") == "tool_use"
                    and not ANTHROPIC_TOOL_ID.match(str(b.get("id", "")))
                ):
                    return f"messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        for i, t in enumerate(body.get("tools") or []):
            if (
                "name" in t
                and not t.get("type", "custom").startswith(("bash_", "text_editor_", "web_search_", "computer_"))
                and not ANTHROPIC_TOOL_NAME.match(t["name"])
            ):
                return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        return None
    if dialect in ("openai-chat", "openai-responses"):
        problem = _too_long("user", body.get("user")) or _too_long("safety_identifier", body.get("safety_identifier"))
        if problem:
            return problem
        for i, t in enumerate(body.get("tools") or []):
            fn = t.get("function") if dialect == "openai-chat" else t
            field = f"tools[{i}].function.name" if dialect == "openai-chat" else f"tools[{i}].name"
            if t.get("type") == "function" and not OPENAI_NAME.match(str((fn or {}).get("name", ""))):
                return f"Invalid '{field}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
        if dialect == "openai-responses" and isinstance(body.get("input"), list):
            for i, it in enumerate(body["input"]):
                problem = _too_long(f"input[{i}].call_id", it.get("call_id"))
                if problem:
                    return problem
        return None
    if dialect == "gemini":
        for i, t in enumerate(body.get("tools") or []):
            for j, d in enumerate(t.get("functionDeclarations") or []):
                if "parameters" in d and "parametersJsonSchema" in d:
                    return f"tools[{i}].function_declarations[{j}]: parameters and parameters_json_schema cannot both be set."
                problem = _gemini_schema_problem(
                    d.get("parameters"), f"tools[{i}].function_declarations[{j}].parameters"
                )
                if problem:
                    return problem
    return None


# --------------------------------------------------------------------------------------------
# The server


@dataclass
class ScriptedUpstream:
    """ASGI app: the scripted model. ``seen`` records every request; ``lock`` guards it."""

    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def reset(self) -> None:
        with self.lock:
            self.seen.clear()

    def requests(self, model_part: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if model_part is None or model_part in s.model]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        path = scope["path"]
        query = scope.get("query_string", b"").decode()
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        dialect = dialect_of(path) or "?"
        seen = Seen(dialect, path, query, headers, body)
        with self.lock:
            self.seen.append(seen)
        status, payload, frames = self.answer(seen)
        seen.status = status
        if frames is None:
            data = orjson.dumps(payload)
            await send(
                {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": data})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        for frame in frames:  # one write per event: the gateway sees a real stream
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def answer(self, seen: Seen) -> tuple[int, Any, list[bytes] | None]:
        """Decide the reply: ``(status, whole JSON body, stream frames or None)``."""
        d, body = seen.dialect, seen.body
        if d == "anthropic-count":
            seen.action = "count"
            return 200, {"input_tokens": 100}, None
        if d == "gemini-count":
            seen.action = "count"
            return 200, {"totalTokens": 100}, None
        if d == "?":
            seen.action = "error:404"
            return 404, {"error": f"the scripted fake has no endpoint {seen.path}"}, None
        if d == "gemini":
            target = seen.path.split("/models/", 1)[1]
            seen.model = target.rsplit(":", 1)[0]
            seen.stream = ":streamGenerateContent" in seen.path
        else:
            seen.model = str(body.get("model", ""))
            seen.stream = bool(body.get("stream"))
        seen.tool_names = [name for name, _ in tools_offered(d, body)]
        thinking = "--thinking" in seen.model

        def fail(message: str) -> tuple[int, Any, None]:
            seen.action, seen.error = "error:400", message
            if d == "anthropic":
                return 400, anthropic_error(message), None
            if d == "gemini":
                return 400, gemini_error(message), None
            return 400, openai_error(message, "input" if d == "openai-responses" else "messages"), None

        problem = validate(d, body)
        if problem:
            return fail(problem)

        result = tool_result(d, body)
        seen.tool_result = result
        if result is not None:
            if thinking:
                sig, problem = check_signature(d, body)
                seen.signature_back = sig
                if problem:
                    return fail(problem)
            seen.action = "tool_answer"
            reply = Reply([{"type": "text", "text": TOOL_ANSWER_PREFIX + result.strip()[:2000]}], "end")
        else:
            path = None
            for text in user_texts(d, body):
                found = READ_PATTERN.search(text)
                if found:
                    path = found.group(1).rstrip(".,;:")
            call = pick_read_call(tools_offered(d, body), path) if path else None
            for text in user_texts(d, body):
                asked = CALL_PATTERN.search(text)
                if asked and call is None:
                    call = pick_named_call(tools_offered(d, body), asked.group(1), asked.group(2))
            if call is not None:
                seen.action = "tool_call"
                name, args = call
                parts: list[dict[str, Any]] = []
                if thinking:
                    sig = {
                        "anthropic": ANTHROPIC_SIGNATURE,
                        "openai-responses": RESPONSES_ENCRYPTED,
                        "gemini": GEMINI_SIGNATURE,
                    }.get(d)
                    parts.append({"type": "thinking", "text": THINKING_TEXT, "signature": sig})
                parts.append(
                    {"type": "tool", "id": TOOL_CALL_ID.get(d, "call_fakeread0001"), "name": name, "args": args}
                )
                reply = Reply(parts, "tool")
            else:
                seen.action = "plain" if path is None else "plain:no-read-tool"
                reply = Reply([{"type": "text", "text": PLAIN_ANSWER}], "end")
        return self.render(seen, reply)

    @staticmethod
    def render(seen: Seen, reply: Reply) -> tuple[int, Any, list[bytes] | None]:
        status, whole, frames = ScriptedUpstream._render(seen, reply)
        if frames is not None and "--cut" in seen.model:
            seen.action += "+cut"
            frames = cut_terminator(seen.dialect, frames)
        return status, whole, frames

    @staticmethod
    def _render(seen: Seen, reply: Reply) -> tuple[int, Any, list[bytes] | None]:
        d, model = seen.dialect, seen.model
        if d == "anthropic":
            return (
                (200, None, anthropic_stream(model, reply))
                if seen.stream
                else (200, anthropic_whole(model, reply), None)
            )
        if d == "openai-chat":
            include_usage = bool((seen.body.get("stream_options") or {}).get("include_usage"))
            return (
                (200, None, chat_stream(model, reply, include_usage))
                if seen.stream
                else (200, chat_whole(model, reply), None)
            )
        if d == "openai-responses":
            return (
                (200, None, responses_stream(model, reply))
                if seen.stream
                else (200, responses_whole(model, reply), None)
            )
        return (200, None, gemini_stream(model, reply)) if seen.stream else (200, gemini_whole(model, reply), None)
