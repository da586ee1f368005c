"""Events → ``chat.completion.chunk`` SSE frames for a Chat caller.

Every chunk is ``data: {"id","object","created","model","choices":[{"index":0,"delta",
"logprobs":null,"finish_reason"}]}`` (+ ``"usage":null`` when the caller asked for
``stream_options.include_usage``). The fixed parts are pre-encoded once per stream; per event only
the delta is dumped. The first chunk's delta is ``{"role":"assistant","content":""}``.

* text → ``delta.content``; thinking → ``delta.reasoning_content`` (DeepSeek/vLLM convention).
* a tool block → ``delta.tool_calls[{index: ordinal, id, type, function{name, arguments:""}}]``
  first, then ``{index, function{arguments}}`` fragments; ordinals count tool blocks from 0.
* ``End`` → a chunk with an empty delta and the finish reason, then (with include_usage, or
  ``stream_usage = "always"``) exactly one ``choices: []`` usage chunk, then ``data: [DONE]``. An
  upstream that reported no usage at all gets no usage chunk rather than one of zeros (the access
  log marks it ``usage_missing``).
* ``StreamError`` → ``data: {"error": {...}}`` and nothing after it: the openai SDK raises
  ``APIError`` on a chunk with an ``error`` key, and a raw reader never sees ``[DONE]``, so a
  failed stream is never mistaken for a finished one.

Signatures: a ``SignatureDelta`` is packed (``signatures.for_caller``) and appended to the id of
the next tool call emitted (``<id>~gw~…``), see the package docstring. Gemini upstreams attach the
signature to the function call itself and send calls whole, so for them a tool call is held until
its ``BlockStop`` (no latency lost) and takes its own signature.
"""

from __future__ import annotations

import time

import orjson

from gateway.dialects.base import EncodeContext
from gateway.dialects.common import new_id
from gateway.dialects.items import drop_output
from gateway.dialects.signatures import PREFIX, for_caller, pack
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

from .errors import error_object
from .stop_reasons import refusal_notice
from .stop_reasons import render_stop_reason as to_finish
from .usage import render_usage as to_chat

DIALECT = "openai-chat"
DONE = b"data: [DONE]\n\n"


def packed_signature(upstream_dialect: str, raw: str) -> str:
    """The ``gw~<origin>~<raw>`` form appended to tool call ids (always packed, so it is findable)."""
    packed = for_caller(DIALECT, upstream_dialect, raw)
    return packed if packed.startswith(PREFIX) else pack(upstream_dialect, raw)


class _Tool:
    __slots__ = ("ordinal", "id", "name", "signature", "sent", "held")

    def __init__(self, ordinal: int, id: str, name: str) -> None:
        self.ordinal = ordinal
        self.id = id
        self.name = name
        self.signature: str | None = None
        self.sent = False  # header fragment written
        self.held: list[str] = []  # argument fragments waiting for the header (Gemini upstreams)


class ChatStreamEncoder:
    def __init__(self, ctx: EncodeContext) -> None:
        self._ctx = ctx
        self._same = ctx.upstream_dialect == DIALECT
        self._hold_tools = ctx.upstream_dialect.startswith("gemini")
        self._include_usage = bool(ctx.request.include_usage)
        self._id = new_id("chatcmpl-")
        self._created = int(time.time())
        self._prefix = b""
        self._suffix = b""
        self._started = False
        self._finished = False
        self._tools: dict[int, _Tool] = {}  # block index -> tool
        self._ordinals = 0
        self._signature = ""  # raw signature waiting for the next tool call
        self._signature_index = -1  # the block it came from (a newer block's signature replaces it)
        self._usage = Usage()
        self._build_frames()

    def _build_frames(self) -> None:
        head = orjson.dumps(
            {"id": self._id, "object": "chat.completion.chunk", "created": self._created, "model": self._ctx.model}
        )
        self._head = head[:-1]  # without the closing brace
        self._prefix = b"data: " + self._head + b',"choices":[{"index":0,"delta":'
        tail = b',"logprobs":null,"finish_reason":null}]'
        self._usage_null = b',"usage":null' if self._include_usage else b""
        self._suffix = tail + self._usage_null + b"}\n\n"

    def _chunk(self, delta: bytes) -> bytes:
        return self._prefix + delta + self._suffix

    def _start(self, upstream_id: str | None = None) -> bytes:
        self._started = True
        if self._same and upstream_id:
            self._id = upstream_id
            self._build_frames()
        return self._chunk(b'{"role":"assistant","content":""}')

    def encode(self, event: Event) -> bytes:
        if self._finished:
            return b""
        if not self._started and type(event) is not MessageStart and type(event) is not StreamError:
            return self._start() + self.encode(event)
        if type(event) is TextDelta:
            return self._chunk(b'{"content":' + orjson.dumps(event.text) + b"}") if event.text else b""
        if type(event) is ToolArgsDelta:
            return self._args(event)
        if type(event) is ThinkingDelta:
            return self._chunk(b'{"reasoning_content":' + orjson.dumps(event.text) + b"}") if event.text else b""
        if type(event) is BlockStart:
            return self._block_start(event)
        if type(event) is BlockStop:
            return self._block_stop(event)
        if type(event) is SignatureDelta:
            return self._signature_delta(event)
        if type(event) is Usage:
            self._usage = event
            return b""
        if type(event) is MessageStart:
            return b"" if self._started else self._start(event.id)
        if type(event) is End:
            return self._end(event)
        if type(event) is StreamError:
            return self._error(event)
        return b""

    def keepalive(self) -> bytes:
        return COMMENT_KEEPALIVE

    # -- tool calls -------------------------------------------------------------------------
    def _block_start(self, event: BlockStart) -> bytes:
        if event.kind != "tool_call":
            if event.kind == "opaque":
                drop_output(self._ctx, event.item)  # a server tool's item: no Chat form
            return b""
        tool = _Tool(self._ordinals, event.id or new_id("call_"), event.name or "")
        self._ordinals += 1
        self._tools[event.index] = tool
        if self._hold_tools:
            return b""
        return self._header(tool)

    def _header(self, tool: _Tool) -> bytes:
        tool.sent = True
        call_id = tool.id
        signature = tool.signature or self._signature
        if signature:
            call_id = f"{call_id}~{packed_signature(self._ctx.upstream_dialect, signature)}"
            if not tool.signature:
                self._signature, self._signature_index = "", -1
        call = {
            "index": tool.ordinal,
            "id": call_id,
            "type": "function",
            "function": {"name": tool.name, "arguments": ""},
        }
        return self._chunk(b'{"tool_calls":[' + orjson.dumps(call) + b"]}")

    def _fragment(self, tool: _Tool, fragment: str) -> bytes:
        return self._chunk(
            b'{"tool_calls":[{"index":%d,"function":{"arguments":' % tool.ordinal + orjson.dumps(fragment) + b"}}]}"
        )

    def _args(self, event: ToolArgsDelta) -> bytes:
        tool = self._tools.get(event.index)
        if tool is None or not event.fragment:
            return b""
        if not tool.sent:
            tool.held.append(event.fragment)
            return b""
        return self._fragment(tool, event.fragment)

    def _block_stop(self, event: BlockStop) -> bytes:
        tool = self._tools.get(event.index)
        if tool is None or tool.sent:
            return b""
        return self._flush(tool)

    def _flush(self, tool: _Tool) -> bytes:
        out = self._header(tool)
        if tool.held:
            out += self._fragment(tool, "".join(tool.held))
            tool.held = []
        return out

    def _signature_delta(self, event: SignatureDelta) -> bytes:
        tool = self._tools.get(event.index)
        if tool is not None and not tool.sent:
            tool.signature = (tool.signature or "") + event.signature
        elif event.index == self._signature_index:
            self._signature += event.signature
        else:
            self._signature, self._signature_index = event.signature, event.index
        return b""

    # -- the end ----------------------------------------------------------------------------
    def _end(self, event: End) -> bytes:
        self._finished = True
        out = b"".join(self._flush(t) for t in self._tools.values() if not t.sent)
        finish = to_finish(event, self._same)
        notice = refusal_notice(event, self._same)
        if notice is not None:  # another dialect's refusal: said in the message's refusal, not only the finish
            out += (
                b"data: "
                + self._head
                + b',"choices":[{"index":0,"delta":{"refusal":'
                + orjson.dumps(notice)
                + b'},"logprobs":null,"finish_reason":null}]'
                + self._usage_null
                + b"}\n\n"
            )
        out += (
            b"data: "
            + self._head
            + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"'
            + finish.encode()
            + b'"}]'
            + self._usage_null
            + b"}\n\n"
        )
        usage = self._usage
        if self._include_usage and (usage.input is not None or usage.output is not None):
            out += b"data: " + self._head + b',"choices":[],"usage":' + orjson.dumps(to_chat(self._usage)) + b"}\n\n"
        return out + DONE

    def _error(self, event: StreamError) -> bytes:
        self._finished = True
        body = {"error": error_object(event.kind, event.message, event.raw, self._same)}
        return b"data: " + orjson.dumps(body) + b"\n\n"
