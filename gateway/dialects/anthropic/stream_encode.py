"""Events → Anthropic Messages SSE for an Anthropic caller.

The caller always gets Anthropic's exact shape::

    message_start (usage!) · [content_block_start · content_block_delta… · content_block_stop]…
    · message_delta (stop_reason, stop_sequence, cumulative usage) · message_stop

Rules the SDKs depend on, and how they are kept whatever the upstream:

* ``message_start`` always carries ``usage``. It is written lazily, at the first event that is not
  ``MessageStart``/``Usage``, so an upstream that states input usage up front (Anthropic's
  ``message_start``, Gemini's first chunk: the decoders emit it before the first block) shows it
  there; otherwise zeros. ``message_delta`` carries the final usage (unknown input/cache fields
  are left out so the SDK keeps the ``message_start`` values; ``output_tokens`` is required).
* One block at a time, indices 0..n-1 in emission order. The SDK appends a block on
  ``content_block_start`` and addresses deltas by ``content[index]``, so indices are assigned
  when a block is written, never taken from upstream indices (which may have gaps).
* Interleaved upstream blocks (OpenAI parallel tool calls may stream side by side): the choice is
  to BUFFER, never to split. While one block is open on the wire, a block that starts later is
  queued with its deltas; when the open block stops, queued blocks are written in order of their
  start (start, the buffered deltas merged into one delta, and stop if already stopped). No block
  is ever split in two or reordered relative to its start, so every tool call keeps one id and one
  complete argument string. ``End`` closes/flushes whatever is still open or queued.
* A thinking block's signature is written as ONE ``signature_delta`` right before its
  ``content_block_stop`` (the SDK keeps only the last ``signature_delta`` it sees), packed with
  ``signatures.for_caller`` when the upstream is another dialect.
* ``End`` is written as ``message_delta`` + ``message_stop`` (End only comes after the final
  ``Usage``). ``StreamError`` → ``event: error`` ``{type: error, error: {type, message}}`` and
  nothing after it: the SDK raises on it.
"""

from __future__ import annotations

import orjson

from gateway.dialects.base import EncodeContext
from gateway.dialects.common import new_id
from gateway.dialects.items import drop_output, same
from gateway.dialects.signatures import for_caller
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

from .errors import error_body
from .stop_reasons import render_stop_reason as stop_to_anthropic
from .usage import render_usage as usage_to_anthropic

DIALECT = "anthropic"
PING = b'event: ping\ndata: {"type": "ping"}\n\n'
MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

# delta kinds per block kind: (delta type, field name)
_DELTA = {
    "text": (b"text_delta", b"text"),
    "tool_call": (b"input_json_delta", b"partial_json"),
    "thinking": (b"thinking_delta", b"thinking"),
}


class _Block:
    __slots__ = ("kind", "id", "name", "data", "item", "index", "prefix", "buffer", "signature", "stopped")

    def __init__(self, event: BlockStart) -> None:
        self.kind = event.kind
        self.id = event.id
        self.name = event.name
        self.data = event.data
        # an Anthropic upstream's own block (server_tool_use, web_search_tool_result …): verbatim,
        # its streamed input as input_json_delta
        self.item = event.item if same(event.origin, DIALECT) else None
        self.index = -1  # caller index once written
        self.prefix = b""  # pre-encoded head of this block's delta frames
        self.buffer: list[str] = []  # deltas waiting while queued
        self.signature = ""
        self.stopped = False


def _merge_usage(old: Usage, new: Usage) -> Usage:
    """Field-wise latest known value (cumulative reports; a later ``None`` does not erase)."""
    return Usage(
        new.input if new.input is not None else old.input,
        new.output if new.output is not None else old.output,
        new.cache_read if new.cache_read is not None else old.cache_read,
        new.cache_write if new.cache_write is not None else old.cache_write,
        new.reasoning if new.reasoning is not None else old.reasoning,
        new.tool_use if new.tool_use is not None else old.tool_use,
    )


class AnthropicStreamEncoder:
    def __init__(self, ctx: EncodeContext) -> None:
        self._ctx = ctx
        self._same = ctx.upstream_dialect == DIALECT
        self._id: str | None = None
        self._started = False
        self._finished = False
        self._usage = Usage()
        self._blocks: dict[int, _Block] = {}  # upstream event index -> block
        self._open: _Block | None = None
        self._queue: list[_Block] = []
        self._next = 0

    def keepalive(self) -> bytes:
        return PING

    # -- dispatch -----------------------------------------------------------------------------
    def encode(self, event: Event) -> bytes:
        if self._finished:
            return b""
        if type(event) is TextDelta or type(event) is ThinkingDelta:
            return self._delta(event.index, event.text)
        if type(event) is ToolArgsDelta:
            return self._delta(event.index, event.fragment)
        if type(event) is Usage:
            self._usage = _merge_usage(self._usage, event)
            return b""
        if type(event) is MessageStart:
            if self._id is None:
                self._id = event.id if self._same and event.id else new_id("msg_")
            return b""
        if type(event) is BlockStart:
            return self._block_start(event)
        if type(event) is BlockStop:
            return self._block_stop(event.index)
        if type(event) is SignatureDelta:
            block = self._blocks.get(event.index)
            if block is not None and block.kind == "thinking":
                block.signature += event.signature
            return b""
        if type(event) is End:
            return self._end(event)
        if type(event) is StreamError:
            return self._error(event)
        return b""

    # -- message ------------------------------------------------------------------------------
    def _message_start(self) -> bytes:
        self._started = True
        message: dict[str, object] = {
            "id": self._id or new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": self._ctx.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_to_anthropic(self._usage),
        }
        return b"event: message_start\ndata: " + orjson.dumps({"type": "message_start", "message": message}) + b"\n\n"

    def _end(self, event: End) -> bytes:
        out = b"" if self._started else self._message_start()
        out += self._flush_all()
        self._finished = True
        u = self._usage
        usage: dict[str, int] = {"output_tokens": u.output or 0}
        if u.input is not None:
            full = usage_to_anthropic(u)
            usage = {
                "input_tokens": full["input_tokens"],
                "cache_creation_input_tokens": full["cache_creation_input_tokens"],
                "cache_read_input_tokens": full["cache_read_input_tokens"],
                "output_tokens": full["output_tokens"],
            }
        delta = {"stop_reason": stop_to_anthropic(event, self._same), "stop_sequence": event.stop_sequence}
        out += (
            b"event: message_delta\ndata: "
            + orjson.dumps({"type": "message_delta", "delta": delta, "usage": usage})
            + b"\n\n"
        )
        return out + MESSAGE_STOP

    def _error(self, event: StreamError) -> bytes:
        self._finished = True
        body = error_body(event.kind, event.message, event.raw, self._same)
        return b"event: error\ndata: " + orjson.dumps(body) + b"\n\n"

    # -- blocks -------------------------------------------------------------------------------
    def _block_start(self, event: BlockStart) -> bytes:
        if event.kind == "opaque" and not same(event.origin, DIALECT):
            drop_output(self._ctx, event.item)  # no Anthropic form: its deltas find no block
            return b""
        block = _Block(event)
        self._blocks[event.index] = block
        if self._open is not None or self._queue:
            self._queue.append(block)
            return b""
        out = b"" if self._started else self._message_start()
        return out + self._write_start(block)

    def _write_start(self, block: _Block) -> bytes:
        """content_block_start for ``block``; it becomes the open block."""
        index = self._next
        self._next += 1
        block.index = index
        self._open = block
        dtype, field = _DELTA.get(block.kind, (b"text_delta", b"text"))
        if block.item is not None and block.kind == "text":  # a cited text: its text as deltas
            content: dict[str, object] = {**block.item, "text": ""}
        elif block.item is not None:
            content = block.item
            dtype, field = _DELTA["tool_call"]
        elif block.kind == "tool_call":
            content = {
                "type": "tool_use",
                "id": block.id or new_id("toolu_"),
                "name": block.name or "",
                "input": {},
            }
        elif block.kind == "thinking":
            content = {"type": "thinking", "thinking": "", "signature": ""}
        elif block.kind == "redacted_thinking":
            content = {
                "type": "redacted_thinking",
                "data": for_caller(DIALECT, self._ctx.upstream_dialect, block.data or ""),
            }
        else:
            content = {"type": "text", "text": ""}
        block.prefix = (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":'
            % (index, dtype, field)
        )
        return (
            b"event: content_block_start\ndata: "
            + orjson.dumps({"type": "content_block_start", "index": index, "content_block": content})
            + b"\n\n"
        )

    def _delta_frame(self, block: _Block, text: str) -> bytes:
        return block.prefix + orjson.dumps(text) + b"}}\n\n"

    def _delta(self, upstream_index: int, text: str) -> bytes:
        block = self._blocks.get(upstream_index)
        if block is None or not text or block.kind == "redacted_thinking":
            return b""
        if block is self._open:
            return self._delta_frame(block, text)
        if block.index < 0:
            block.buffer.append(text)
        return b""

    def _write_stop(self, block: _Block) -> bytes:
        out = b""
        if block.kind == "thinking" and block.signature:
            signature = for_caller(DIALECT, self._ctx.upstream_dialect, block.signature)
            out += (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":'
                % block.index
                + orjson.dumps(signature)
                + b"}}\n\n"
            )
        self._open = None
        return out + b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}\n\n' % block.index

    def _write_queued(self, block: _Block, close: bool) -> bytes:
        out = self._write_start(block)
        if block.buffer:
            out += self._delta_frame(block, "".join(block.buffer))
            block.buffer = []
        if close or block.stopped:
            out += self._write_stop(block)
        return out

    def _block_stop(self, upstream_index: int) -> bytes:
        block = self._blocks.get(upstream_index)
        if block is None or block.stopped:
            return b""
        block.stopped = True
        if block is not self._open:
            return b""  # queued: written (and closed) when its turn comes
        out = self._write_stop(block)
        while self._queue and self._open is None:
            out += self._write_queued(self._queue.pop(0), close=False)
        return out

    def _flush_all(self) -> bytes:
        out = b""
        if self._open is not None:
            self._open.stopped = True
            out += self._write_stop(self._open)
        while self._queue:
            out += self._write_queued(self._queue.pop(0), close=True)
        return out
