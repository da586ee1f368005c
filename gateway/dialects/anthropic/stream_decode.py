"""Anthropic Messages SSE frames → events.

The wire: ``message_start`` (id, model, input usage) · per block ``content_block_start`` /
``content_block_delta``… / ``content_block_stop`` · ``message_delta`` (stop reason + cumulative
usage) · ``message_stop`` (the terminator) · ``ping`` anywhere · ``error`` (in-stream failure).

Choices made here:

* The frame's ``type`` inside the JSON decides (the ``event:`` line is redundant and may be absent);
  the JSON may be padded with spaces (real captures are), orjson does not care.
* Blocks the IR has no kind for (``server_tool_use``, ``web_search_tool_result``,
  ``code_execution_tool_result``, ``mcp_tool_use`` …, unknown types) are ``opaque`` blocks carrying
  the start block whole (gateway/dialects/items.py); a ``server_tool_use``'s ``input_json_delta``
  are their ``ToolArgsDelta``s. Blocks are numbered 0..n-1 in order of appearance.
* Blocks already inside ``message_start.message.content`` (programmatic tool calling puts
  ``tool_use`` blocks there) are events too, as if each had its own ``content_block_start``.
* The stop reason of ``message_delta`` is held until ``message_stop``: ``End`` only follows the
  terminator. Blocks still open at ``message_stop`` (Anthropic omits ``content_block_stop`` when
  max_tokens cuts a tool input) get a ``BlockStop`` first.
* ``message_delta`` usage is merged with ``message_start`` usage field by field (newer API
  versions repeat input counts there, older ones only send ``output_tokens``); never summed.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.common import new_id, warn_unknown
from gateway.dialects.kit import Blocks, bad_frame, frame_object
from gateway.events import (
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
from gateway.framing.sse import SSEFrame

from .errors import stream_error
from .stop_reasons import map_stop_reason
from .usage import UsageState

DIALECT = "anthropic"


class AnthropicStreamDecoder:
    __slots__ = ("_started", "_done", "_usage", "_seen", "_blocks", "_live", "_stop_reason", "_stop_sequence")

    def __init__(self) -> None:
        self._started = False
        self._done = False
        self._usage = UsageState()
        self._seen: set[int] = set()  # upstream indices started, skipped ones included
        self._blocks = Blocks()  # keyed by the upstream index
        self._live = self._blocks.live  # read per delta (the same dict, never replaced)
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None

    # -- entry points -------------------------------------------------------------------------
    def feed(self, frame: SSEFrame) -> list[Event]:
        if self._done:
            return []
        data = frame_object(frame)
        if data is None:
            self._done = True
            return self._lead([bad_frame(frame, DIALECT)])
        etype = data.get("type")
        if not isinstance(etype, str):
            etype = frame.event or ""
        if etype == "content_block_delta":
            return self._delta(data)
        if etype == "ping":
            return []
        if etype == "content_block_start":
            return self._lead(self._block_start(data))
        if etype == "content_block_stop":
            return self._block_stop(data)
        if etype == "message_start":
            return self._message_start(data)
        if etype == "message_delta":
            return self._message_delta(data)
        if etype == "message_stop":
            return self._message_stop()
        if etype == "error":
            self._done = True
            return self._lead([stream_error(data)])
        warn_unknown(DIALECT, f"stream event {etype!r}")
        return []

    def close(self) -> list[Event]:
        if self._done:
            return []
        self._done = True
        return self._lead([StreamError("truncated", "anthropic stream ended without message_stop", 502)])

    def usage_so_far(self) -> Usage | None:
        state = self._usage
        if (
            state.input_tokens is None
            and state.output_tokens is None
            and state.cache_read is None
            and state.cache_write is None
        ):
            return None
        return state.canonical()

    # -- helpers ------------------------------------------------------------------------------
    def _lead(self, events: list[Event]) -> list[Event]:
        """Prefix a synthesized MessageStart when the upstream skipped message_start."""
        if self._started:
            return events
        self._started = True
        return [MessageStart(new_id("msg_"), ""), *events]

    def _message_start(self, data: dict[str, Any]) -> list[Event]:
        if self._started:
            return []
        self._started = True
        message = data.get("message")
        if not isinstance(message, dict):
            message = {}
        mid = message.get("id")
        model = message.get("model")
        events: list[Event] = [
            MessageStart(mid if isinstance(mid, str) else new_id("msg_"), model if isinstance(model, str) else "")
        ]
        usage = self._usage.update(message.get("usage"))
        if usage is not None:
            events.append(usage)
        # Programmatic tool calling can put whole blocks (a ``tool_use`` the code execution made)
        # in the start message itself: each is a block like one opened by content_block_start, at
        # its position; it is complete, so it stops at once unless deltas for its index follow.
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else []):
            events += self._block_start({"index": position, "content_block": block})
        return events

    def _block_start(self, data: dict[str, Any]) -> list[Event]:
        upstream = data.get("index")
        block = data.get("content_block")
        if not isinstance(block, dict) or not isinstance(upstream, int):
            warn_unknown(DIALECT, "content_block_start without index/content_block")
            return []
        self._seen.add(upstream)
        blocks = self._blocks
        events: list[Event] = []
        btype = block.get("type")
        if btype == "text":
            index = blocks.start("text", events, key=upstream)
            text = block.get("text")
            if isinstance(text, str) and text:
                events.append(TextDelta(index, text))
        elif btype == "tool_use":
            call_id = block.get("id")
            name = block.get("name")
            call_id = call_id if isinstance(call_id, str) else new_id("toolu_")
            index = blocks.start(
                "tool_call", events, key=upstream, id=call_id, name=name if isinstance(name, str) else ""
            )
            tool_input = block.get("input")
            if isinstance(tool_input, dict) and tool_input:
                events.append(ToolArgsDelta(index, orjson.dumps(tool_input).decode()))
        elif btype == "thinking":
            index = blocks.start("thinking", events, key=upstream)
            text = block.get("thinking")
            if isinstance(text, str) and text:
                events.append(ThinkingDelta(index, text))
            signature = block.get("signature")
            if isinstance(signature, str) and signature:
                events.append(SignatureDelta(index, signature))
        elif btype == "redacted_thinking":
            payload = block.get("data")
            blocks.start("redacted_thinking", events, key=upstream, data=payload if isinstance(payload, str) else "")
        else:  # a server tool's block: kept whole, for an Anthropic caller (items.py)
            blocks.start("opaque", events, key=upstream, item=block, origin=DIALECT)
        return events

    def _delta(self, data: dict[str, Any]) -> list[Event]:
        upstream = data.get("index")
        try:
            index = self._live.get(upstream)
        except TypeError:  # an unhashable "index" (a list, an object) names no block
            return []
        if index is None:  # never started, skipped, or stopped
            if upstream not in self._seen:
                warn_unknown(DIALECT, "content_block_delta for a block that never started")
            return []
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return []
        dtype = delta.get("type")
        if dtype == "text_delta":
            text = delta.get("text")
            return [TextDelta(index, text)] if isinstance(text, str) and text else []
        if dtype == "input_json_delta":
            fragment = delta.get("partial_json")
            return [ToolArgsDelta(index, fragment)] if isinstance(fragment, str) and fragment else []
        if dtype == "thinking_delta":
            text = delta.get("thinking")
            return [ThinkingDelta(index, text)] if isinstance(text, str) and text else []
        if dtype == "signature_delta":
            signature = delta.get("signature")
            return [SignatureDelta(index, signature)] if isinstance(signature, str) and signature else []
        if dtype != "citations_delta":
            warn_unknown(DIALECT, f"content_block_delta type {dtype!r}")
        return []

    def _block_stop(self, data: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        try:
            self._blocks.stop(data.get("index"), events)
        except TypeError:
            pass
        return events

    def _message_delta(self, data: dict[str, Any]) -> list[Event]:
        delta = data.get("delta")
        if isinstance(delta, dict):
            reason = delta.get("stop_reason")
            if isinstance(reason, str):
                self._stop_reason = reason
            sequence = delta.get("stop_sequence")
            if isinstance(sequence, str):
                self._stop_sequence = sequence
        usage = self._usage.update(data.get("usage"))
        events: list[Event] = [usage] if usage is not None else []
        return self._lead(events) if events else events

    def _message_stop(self) -> list[Event]:
        self._done = True
        events: list[Event] = []
        self._blocks.stop_all(events)
        events.append(End(map_stop_reason(self._stop_reason), self._stop_reason, self._stop_sequence))
        return self._lead(events)
