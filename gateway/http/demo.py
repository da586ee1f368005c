"""The built-in ``demo`` provider: deterministic answers with no network, so ``make run`` works bare.

A stand-in is just another transport (as in httpx): the provider speaks ``openai-chat`` through
``DemoTransport``, which answers from ``demo_events`` (below), and the rest of the pipeline is the
one every provider goes through.

It answers in events, like any decoded upstream: a short text that quotes the last user message;
when tools are offered (and the last turn is not a tool result) a call of the first tool with
arguments filled from its schema; after a tool result, a sentence quoting the result. Text arrives
in several fragments so streaming is visible. An embeddings call (``/embeddings``) gets
deterministic vectors (``demo_embeddings``): 16 numbers from a hash of each input unless
``dimensions`` asks for another size, so an embeddings client works against the bare demo too.
"""

from __future__ import annotations

import base64
import hashlib
import time
from array import array
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from gateway.dialects.base import Identity, RequestMeta
from gateway.dialects.common import new_id
from gateway.dialects.registry import codec_for
from gateway.events import BlockStart, BlockStop, End, Event, MessageStart, StopReason, TextDelta, ToolArgsDelta, Usage
from gateway.ir import ChatRequest, Message, TextPart, ToolResultPart


def _last_user_text(req: ChatRequest) -> str:
    for message in reversed(req.messages):
        if message.role == "user":
            texts = [p.text for p in message.content if isinstance(p, TextPart)]
            if texts:
                return " ".join(texts)
    return ""


def _last_tool_result(req: ChatRequest) -> ToolResultPart | None:
    """The first tool result of the caller's last turn: the messages after the last assistant one
    (a wire format such as Chat's puts a turn's results and its text in separate messages)."""
    turn: list[Message] = []
    for message in reversed(req.messages):
        if message.role == "assistant":
            break
        turn.insert(0, message)
    return next((p for m in turn for p in m.content if isinstance(p, ToolResultPart)), None)


def _placeholder(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if schema.get("enum"):
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
    reason: StopReason = "stop"
    if limit is not None and limit < len(fragments):
        fragments, reason = fragments[:limit], "length"
    events.append(BlockStart(0, "text"))
    events += [TextDelta(0, f) for f in fragments]
    events += [BlockStop(0), Usage(input=input_tokens, output=len(fragments)), End(reason, None)]
    return events


# ---------------------------------------------------------------------------------------- transport
# The demo provider is an ordinary provider of the ``openai-chat`` dialect whose network is this
# transport (as ``httpx.MockTransport`` stands in for one): it reads the call the codec built, and
# answers the events above as an OpenAI chat stream, which the normal pipeline decodes (the event
# source, the codec, the fast path for a Chat caller). Nothing else in the gateway knows it is a demo.

KIND = "demo"  # ``transport = "demo"``; a provider's ``dialect = "demo"`` means this (settings.py)
DIALECT = "openai-chat"  # the wire format the stand-in answers in
BASE_URL = "http://demo.invalid"  # never resolved: every call ends in DemoTransport
IDENTITY = Identity(otel_provider="gateway.demo")  # gen_ai.provider.name of its spans; no prices
PROVIDER = {"name": KIND, "dialect": KIND}  # in the configuration used without a file (settings.py)
ROUTES = ({"model": KIND, "provider": KIND}, {"model": KIND + "-*", "provider": KIND})
_FINISH = {"stop": "stop", "length": "length", "tool_use": "tool_calls"}


def chat_frames(events: list[Event], created: int) -> list[bytes]:
    """The demo's events as OpenAI chat chunks: one frame per event, usage in its own
    ``choices: []`` chunk (only the three totals, so nothing unreported reads as 0), then ``[DONE]``."""
    frames: list[bytes] = []
    head: dict[str, Any] = {}
    tools: dict[int, int] = {}  # block index -> tool_calls index
    last_usage: dict[str, int] | None = None

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> None:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        frames.append(b"data: " + orjson.dumps({**head, "choices": choices, **extra}) + b"\n\n")

    for event in events:
        if isinstance(event, MessageStart):
            head.update(
                {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": created, "model": event.model}
            )
            chunk({"role": "assistant", "content": ""})
        elif isinstance(event, TextDelta):
            chunk({"content": event.text})
        elif isinstance(event, BlockStart) and event.kind == "tool_call":
            tools[event.index] = len(tools)
            call = {
                "index": tools[event.index],
                "id": event.id,
                "type": "function",
                "function": {"name": event.name, "arguments": ""},
            }
            chunk({"tool_calls": [call]})
        elif isinstance(event, ToolArgsDelta):
            chunk({"tool_calls": [{"index": tools[event.index], "function": {"arguments": event.fragment}}]})
        elif isinstance(event, Usage):
            usage = {"prompt_tokens": event.input or 0, "completion_tokens": event.output or 0}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            last_usage = usage
        elif isinstance(event, End):
            chunk({}, _FINISH.get(event.reason, "stop"))
            if last_usage is not None:
                chunk(None, usage=last_usage)
    frames.append(b"data: [DONE]\n\n")
    return frames


class _Frames(httpx.AsyncByteStream):
    """The answer frame by frame, as a socket would bring it (streaming stays visible)."""

    def __init__(self, frames: list[bytes]) -> None:
        self._frames = frames

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for frame in self._frames:
            yield frame

    async def aclose(self) -> None:
        return None


DEMO_DIMENSIONS = 16


def demo_embeddings(body: dict[str, Any]) -> bytes:
    """An OpenAI embeddings answer for ``body``: per input, ``dimensions`` (else 16) numbers in
    [-1, 1) from SHA-256 of the input, exact in float32; base64 when asked; a token a word."""
    value = body.get("input")
    inputs = value if isinstance(value, list) and value and not isinstance(value[0], int) else [value]
    size = body.get("dimensions") or DEMO_DIMENSIONS
    data = []
    for i, item in enumerate(inputs):
        seed = orjson.dumps(item)
        digest = b"".join(hashlib.sha256(seed + bytes([n])).digest() for n in range(-(-size // 32)))
        vector = [(b - 128) / 128 for b in digest[:size]]
        embedding: Any = vector
        if body.get("encoding_format") == "base64":
            embedding = base64.b64encode(array("f", vector).tobytes()).decode()
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(len(t) if isinstance(t, list) else len(str(t).split()) for t in inputs)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return orjson.dumps({"object": "list", "data": data, "model": body.get("model"), "usage": usage})


class DemoTransport(httpx.AsyncBaseTransport):
    """The demo provider's network: answers every call from ``demo_events``, never a socket."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if request.url.path.endswith("/embeddings"):
            answer = demo_embeddings(body)
            return httpx.Response(200, headers={"content-type": "application/json"}, content=answer, request=request)
        req = codec_for(DIALECT).parse_request(body, RequestMeta())
        frames = chat_frames(demo_events(req, req.model), int(time.time()))
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Frames(frames), request=request
        )
