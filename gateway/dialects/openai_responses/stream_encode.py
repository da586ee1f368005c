"""Events -> the Responses SSE stream a Responses client expects.

Sequence: ``response.created``, ``response.in_progress``, then per block one output item with its
full lifecycle (``output_item.added`` … ``output_item.done``), then exactly one terminal event:
``response.completed``, ``response.incomplete`` or ``response.failed``. A ``StreamError`` is
written as an ``error`` event (the official SDKs raise on it) followed by ``response.failed``
(the terminal event). ``sequence_number`` counts every event from 0.

A cancellation (kind ``cancelled``, e.g. ``POST /v1/responses/{id}/cancel`` of a background
response someone is streaming) is a status, not an error: no ``error`` event (the SDK would raise
on it), the open items are closed (``output_item.done``) and the terminal
event carries the response with ``status: "cancelled"``, its output and usage so far. The API's
stream-event union has no cancelled event (``response.cancelled`` exists only as a webhook, and
the SDKs would misparse it), so the terminal event is the typed ``response.failed``, which every
SDK and client treats as the end of the stream and whose ``response.status`` says what happened.

Each block gets its own ``output_index`` when it starts, so blocks that interleave (parallel tool
calls streamed side by side) keep consistent indexes. Delta frames, the hot path, are built from
per-item pre-encoded byte prefixes.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.dialects import signatures
from gateway.dialects.base import EncodeContext
from gateway.dialects.common import new_id
from gateway.dialects.items import drop_output, same
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    Event,
    MessageStart,
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.sse import COMMENT_KEEPALIVE

from .client_tools import NATIVE_KEY, InputStream, native_item
from .errors import error_type_code
from .whole import call_item, finish_object, message_item, reasoning_item, response_object

DIALECT = "openai-responses"


class _Out:
    """One output item being streamed."""

    __slots__ = (
        "kind",
        "output_index",
        "item_id",
        "chunks",
        "call_id",
        "name",
        "namespace",
        "signature",
        "part_open",
        "prefix",
        "open",
        "item",
        "part",
        "native",
        "input",
    )

    def __init__(self, kind: str, output_index: int, item_id: str) -> None:
        self.kind = kind
        self.output_index = output_index
        self.item_id = item_id
        self.chunks: list[str] = []
        self.call_id = ""
        self.name = ""
        self.namespace: str | None = None
        self.signature: str | None = None
        self.part_open = False  # thinking: reasoning_summary_part.added was sent
        self.prefix = b""
        self.open = True
        self.item: dict[str, Any] | None = None  # an item written verbatim (kind "item")
        self.part: dict[str, Any] | None = None  # a text's own output_text part (its annotations)
        self.native: dict[str, Any] | None = None  # the caller's custom / shell … tool (client_tools.py)
        self.input: InputStream | None = None  # a custom tool's input, decoded from its arguments


def _delta_prefix(event_type: str, item_id: str, output_index: int, extra: str) -> bytes:
    return (
        f'event: {event_type}\ndata: {{"type":"{event_type}","item_id":"{item_id}","output_index":{output_index}{extra},"delta":'
    ).encode()


class ResponsesStreamEncoder:
    def __init__(self, ctx: EncodeContext) -> None:
        self._ctx = ctx
        self._seq = 0
        self._started = False
        self._done = False
        self._id = ctx.response_id or new_id("resp_")
        self._created_at = int(time.time())
        self._blocks: dict[int, _Out] = {}
        self._final: dict[int, dict[str, Any]] = {}  # output_index -> finished item
        self._next_output = 0
        self._usage: Usage | None = None
        self._namespaces: dict[str, Any] = ctx.request.extras.get(DIALECT, {}).get("tool_namespaces") or {}
        self._native: dict[str, dict[str, Any]] = ctx.request.extras.get(DIALECT, {}).get(NATIVE_KEY) or {}

    # ------------------------------------------------------------------ protocol

    def keepalive(self) -> bytes:
        return COMMENT_KEEPALIVE

    def encode(self, event: Event) -> bytes:
        if self._done:
            return b""
        if type(event) is TextDelta or type(event) is ThinkingDelta:
            return self._delta(event.index, event.text)
        if type(event) is ToolArgsDelta:
            return self._delta(event.index, event.fragment)
        out = b"" if self._started or type(event) is MessageStart else self._start()
        if type(event) is MessageStart:
            return self._start()
        if type(event) is BlockStart:
            return out + self._block_start(event)
        if type(event) is BlockStop:
            block = self._blocks.get(event.index)
            return out + (self._block_stop(block) if block is not None else b"")
        if type(event) is SignatureDelta:
            block = self._blocks.get(event.index)
            if block is not None:
                block.signature = (block.signature or "") + event.signature
            return out
        if type(event) is Usage:
            self._usage = event
            return out
        if type(event) is End:
            return out + self._end(event)
        if type(event) is StreamError:
            return out + self._error(event)
        return out

    # ------------------------------------------------------------------ frames

    def _frame(self, event_type: str, payload: dict[str, Any]) -> bytes:
        payload["sequence_number"] = self._seq
        self._seq += 1
        return b"event: " + event_type.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        obj = response_object(self._ctx, self._id, self._created_at, "in_progress")
        return self._frame("response.created", {"type": "response.created", "response": obj}) + self._frame(
            "response.in_progress", {"type": "response.in_progress", "response": obj}
        )

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.index in self._blocks:
            return b""
        if ev.kind == "opaque" and not same(ev.origin, DIALECT):
            drop_output(self._ctx, ev.item)  # its index maps to nothing
            return b""
        oi = self._next_output
        self._next_output += 1
        if ev.item is not None and same(ev.origin, DIALECT) and ev.kind != "text":  # the upstream's own item, verbatim
            block = _Out("item", oi, str(ev.item.get("id") or ""))
            block.item = ev.item
            self._blocks[ev.index] = block
            added = {**ev.item, "status": "in_progress"} if "status" in ev.item else ev.item
            return self._frame(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": oi, "item": added},
            )
        if ev.kind == "text":
            block = _Out("text", oi, new_id("msg_"))
            self._blocks[ev.index] = block
            if ev.item is not None and same(ev.origin, DIALECT):  # an annotated part: written at its end
                block.part = ev.item
            block.prefix = _delta_prefix("response.output_text.delta", block.item_id, oi, ',"content_index":0')
            item = {"id": block.item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            return self._frame(
                "response.output_item.added", {"type": "response.output_item.added", "output_index": oi, "item": item}
            ) + self._frame(
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "item_id": block.item_id,
                    "output_index": oi,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                },
            )
        if ev.kind == "tool_call" and ev.name in self._native and not ev.namespace:
            return self._native_start(ev, oi)
        if ev.kind == "tool_call":
            block = _Out("tool_call", oi, new_id("fc_"))
            block.call_id = ev.id or new_id("call_")
            block.name = ev.name or ""
            block.namespace = ev.namespace
            self._blocks[ev.index] = block
            block.prefix = _delta_prefix("response.function_call_arguments.delta", block.item_id, oi, "")
            item = call_item(
                block.item_id, block.call_id, block.name, "", self._namespaces, "in_progress", block.namespace
            )
            return self._frame(
                "response.output_item.added", {"type": "response.output_item.added", "output_index": oi, "item": item}
            )
        # thinking; redacted_thinking has no Responses form and is dropped (its index maps to nothing)
        if ev.kind != "thinking":
            self._next_output -= 1
            return b""
        block = _Out("thinking", oi, new_id("rs_"))
        self._blocks[ev.index] = block
        block.prefix = _delta_prefix("response.reasoning_summary_text.delta", block.item_id, oi, ',"summary_index":0')
        item = {"id": block.item_id, "type": "reasoning", "summary": []}
        return self._frame(
            "response.output_item.added", {"type": "response.output_item.added", "output_index": oi, "item": item}
        )

    def _native_start(self, ev: BlockStart, oi: int) -> bytes:
        """A function call of a custom / shell / apply_patch tool the caller declared: its own item."""
        tool = self._native[ev.name or ""]
        namespace = (self._namespaces.get(ev.name or "") or {}).get("namespace")
        item = native_item(tool, ev.id or new_id("call_"), "", "in_progress", namespace)
        block = _Out("native", oi, item["id"])
        block.namespace = namespace
        block.call_id, block.native = item["call_id"], tool
        if item["type"] == "custom_tool_call":
            block.input = InputStream()
            block.prefix = _delta_prefix("response.custom_tool_call_input.delta", block.item_id, oi, "")
        self._blocks[ev.index] = block
        return self._frame(
            "response.output_item.added", {"type": "response.output_item.added", "output_index": oi, "item": item}
        )

    def _native_stop(self, block: _Out) -> bytes:
        assert block.native is not None
        oi, item_id = block.output_index, block.item_id
        item = native_item(block.native, block.call_id, "".join(block.chunks), namespace=block.namespace)
        item["id"] = item_id
        self._final[oi] = item
        done = self._frame(
            "response.output_item.done", {"type": "response.output_item.done", "output_index": oi, "item": item}
        )
        if block.input is None:
            return done
        text, sent = item["input"], block.input.sent
        rest = text[len(sent) :] if text.startswith(sent) else ""
        out = self._input_delta(block, rest) if rest else b""
        return (
            out
            + self._frame(
                "response.custom_tool_call_input.done",
                {"type": "response.custom_tool_call_input.done", "item_id": item_id, "output_index": oi, "input": text},
            )
            + done
        )

    def _input_delta(self, block: _Out, text: str) -> bytes:
        seq = self._seq
        self._seq += 1
        return block.prefix + orjson.dumps(text) + b',"sequence_number":' + str(seq).encode() + b"}\n\n"

    def _delta(self, index: int, text: str) -> bytes:
        block = self._blocks.get(index)
        if block is None or not block.open or not text or block.item is not None:
            return b""
        if block.native is not None:  # the arguments are kept; a custom tool's input streams as itself
            block.chunks.append(text)
            new = block.input.feed(text) if block.input is not None else ""
            return self._input_delta(block, new) if new else b""
        out = b""
        if block.kind == "thinking" and not block.part_open:
            block.part_open = True
            out = self._frame(
                "response.reasoning_summary_part.added",
                {
                    "type": "response.reasoning_summary_part.added",
                    "item_id": block.item_id,
                    "output_index": block.output_index,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                },
            )
        block.chunks.append(text)
        seq = self._seq
        self._seq += 1
        tail = b',"logprobs":[],"sequence_number":' if block.kind == "text" else b',"sequence_number":'
        return out + block.prefix + orjson.dumps(text) + tail + str(seq).encode() + b"}\n\n"

    def _block_stop(self, block: _Out) -> bytes:
        if not block.open:
            return b""
        block.open = False
        oi, item_id = block.output_index, block.item_id
        text = "".join(block.chunks)
        if block.native is not None:
            return self._native_stop(block)
        if block.item is not None:
            self._final[oi] = block.item
            return self._frame(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": oi, "item": block.item},
            )
        if block.kind == "text":
            item = message_item(item_id, text, part=block.part)
            self._final[oi] = item
            return (
                self._frame(
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "item_id": item_id,
                        "output_index": oi,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    },
                )
                + self._frame(
                    "response.content_part.done",
                    {
                        "type": "response.content_part.done",
                        "item_id": item_id,
                        "output_index": oi,
                        "content_index": 0,
                        "part": item["content"][0],
                    },
                )
                + self._frame(
                    "response.output_item.done", {"type": "response.output_item.done", "output_index": oi, "item": item}
                )
            )
        if block.kind == "tool_call":
            args = text if text.strip() else "{}"
            item = call_item(item_id, block.call_id, block.name, args, self._namespaces, namespace=block.namespace)
            self._final[oi] = item
            return self._frame(
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item_id,
                    "output_index": oi,
                    "arguments": args,
                },
            ) + self._frame(
                "response.output_item.done", {"type": "response.output_item.done", "output_index": oi, "item": item}
            )
        sig = signatures.for_caller(DIALECT, self._ctx.upstream_dialect, block.signature) if block.signature else None
        item = reasoning_item(item_id, text, sig)
        self._final[oi] = item
        out = b""
        if block.part_open:
            out = self._frame(
                "response.reasoning_summary_text.done",
                {
                    "type": "response.reasoning_summary_text.done",
                    "item_id": item_id,
                    "output_index": oi,
                    "summary_index": 0,
                    "text": text,
                },
            ) + self._frame(
                "response.reasoning_summary_part.done",
                {
                    "type": "response.reasoning_summary_part.done",
                    "item_id": item_id,
                    "output_index": oi,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": text},
                },
            )
        return out + self._frame(
            "response.output_item.done", {"type": "response.output_item.done", "output_index": oi, "item": item}
        )

    def _output(self) -> list[dict[str, Any]]:
        return [self._final[i] for i in sorted(self._final)]

    def _end(self, end: End) -> bytes:
        out = b"".join(self._block_stop(b) for b in self._blocks.values() if b.open)
        self._done = True
        obj = response_object(self._ctx, self._id, self._created_at, "completed")
        finish_object(obj, self._output(), end, None, self._usage, self._ctx.upstream_dialect)
        event_type = "response.incomplete" if obj["status"] == "incomplete" else "response.completed"
        return out + self._frame(event_type, {"type": event_type, "response": obj})

    def _error(self, err: StreamError) -> bytes:
        if err.kind == "cancelled":
            out = b"".join(self._block_stop(b) for b in self._blocks.values() if b.open)
            self._done = True
            obj = response_object(self._ctx, self._id, self._created_at, "cancelled")
            finish_object(obj, self._output(), None, err, self._usage, self._ctx.upstream_dialect)
            return out + self._frame("response.failed", {"type": "response.failed", "response": obj})
        self._done = True
        typ, code = error_type_code(err.kind, err.raw, self._ctx.upstream_dialect)
        code = code or typ
        error_event = {
            "type": "error",
            "code": code,
            "message": err.message,
            "param": None,
            "error": {"type": typ, "code": code, "message": err.message, "param": None},
        }
        obj = response_object(self._ctx, self._id, self._created_at, "failed")
        finish_object(obj, self._output(), None, err, None, self._ctx.upstream_dialect)
        return self._frame("error", error_event) + self._frame(
            "response.failed", {"type": "response.failed", "response": obj}
        )
