"""The built-in ``demo`` provider: deterministic answers with no network, so ``make run`` works bare.

It answers in events, like any decoded upstream: a short text that quotes the last user message;
when tools are offered (and the last turn is not a tool result) a call of the first tool with
arguments filled from its schema; after a tool result, a sentence quoting the result. Text arrives
in several fragments so streaming is visible.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.events import BlockStart, BlockStop, End, Event, MessageStart, TextDelta, ToolArgsDelta, Usage
from gateway.ir import ChatRequest, TextPart, ToolResultPart


def _last_user_text(req: ChatRequest) -> str:
    for message in reversed(req.messages):
        if message.role == "user":
            texts = [p.text for p in message.content if isinstance(p, TextPart)]
            if texts:
                return " ".join(texts)
    return ""


def _last_tool_result(req: ChatRequest) -> ToolResultPart | None:
    if not req.messages:
        return None
    for part in req.messages[-1].content:
        if isinstance(part, ToolResultPart):
            return part
    return None


def _placeholder(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), "demo")


def _arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or list(properties)[:1]
    return {name: _placeholder(properties.get(name) or {}) for name in required if isinstance(name, str)}


def _words(text: str) -> list[str]:
    pieces = text.split(" ")
    return [p + " " for p in pieces[:-1]] + [pieces[-1]]


def demo_events(req: ChatRequest, model: str) -> list[Event]:
    events: list[Event] = [MessageStart("demo-" + format(abs(hash(_last_user_text(req))) % 10**12, "012d"), model)]
    result = _last_tool_result(req)
    prompt = _last_user_text(req)
    input_tokens = max(1, sum(len(p.text) for m in req.messages for p in m.content if isinstance(p, TextPart)) // 4)
    if req.tools and result is None and (req.tool_choice is None or req.tool_choice.mode != "none"):
        tool = req.tools[0]
        if req.tool_choice is not None and req.tool_choice.mode == "tool":
            tool = next((t for t in req.tools if t.name == req.tool_choice.name), tool)
        args = orjson.dumps(_arguments(tool.parameters)).decode()
        events += [
            BlockStart(0, "text"),
            TextDelta(0, f"Calling {tool.name}."),
            BlockStop(0),
            BlockStart(1, "tool_call", id="call_demo_1", name=tool.name),
            ToolArgsDelta(1, args[: len(args) // 2]),
            ToolArgsDelta(1, args[len(args) // 2 :]),
            BlockStop(1),
            Usage(input=input_tokens, output=12),
            End("tool_use", None),
        ]
        return events
    if result is not None:
        shown = " ".join(p.text for p in result.content if isinstance(p, TextPart))[:200]
        text = f"The tool returned: {shown}"
    else:
        text = f"Hello from the demo provider! You said: {prompt[:200]}" if prompt else "Hello from the demo provider!"
    fragments = _words(text)
    limit = req.max_tokens
    reason = "stop"
    if limit is not None and limit < len(fragments):
        fragments, reason = fragments[:limit], "length"
    events.append(BlockStart(0, "text"))
    events += [TextDelta(0, f) for f in fragments]
    events += [BlockStop(0), Usage(input=input_tokens, output=len(fragments)), End(reason, None)]  # type: ignore[arg-type]
    return events
