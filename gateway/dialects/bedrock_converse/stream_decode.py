"""ConverseStream events → gateway events.

The platform's eventstream framer hands over one ``SSEFrame`` per eventstream message: ``event``
is the message's ``:event-type`` and ``data`` its JSON payload (an exception message arrives with
its ``:exception-type`` as the event). The wire, in order: ``messageStart`` {role} · per block
``contentBlockStart`` {contentBlockIndex, start: {toolUse: {toolUseId, name}}} (tool blocks only) ·
``contentBlockDelta`` {contentBlockIndex, delta: {text} | {toolUse: {input}} | {reasoningContent:
{text} | {signature} | {redactedContent}}} · ``contentBlockStop`` · ``messageStop`` {stopReason,
additionalModelResponseFields} · ``metadata`` {usage, metrics} (the terminator). Payloads carry a
``p`` padding field, ignored.

Choices made here:

* Text and reasoning blocks arrive without ``contentBlockStart``: a block is opened by its first
  delta, its kind taken from that delta. Block indices are renumbered 0..n-1 in order of opening;
  a block of a kind the IR cannot carry (``toolResult``, ``image``, citations) is skipped.
* A delta of another kind on an open index (text after reasoning at the same index) closes that
  block and opens a new one, so a block never mixes kinds.
* ``End`` waits for ``metadata``: usage comes after ``messageStop``, and nothing may follow
  ``End``. ``messageStop`` closes the blocks still open. EOF after both is a clean end; EOF before
  ``metadata`` is truncation, even after ``messageStop`` (the usage was lost with the tail).
* Exception frames become a ``StreamError`` (errors.py); nothing follows them.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.common import new_id, warn_unknown
from gateway.dialects.kit import Blocks, bad_frame, frame_object
from gateway.events import (
    BlockKind,
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

from .errors import is_exception, stream_error
from .stop_reasons import map_stop_reason
from .usage import convert_usage

DIALECT = "bedrock-converse"
_SKIPPED = -1


def stop_sequence_of(fields: Any) -> str | None:
    """The matched stop sequence, where the model reports it (Claude: ``stop_sequence``)."""
    if isinstance(fields, dict):
        value = fields.get("stop_sequence")
        if isinstance(value, str) and value:
            return value
    return None


class ConverseStreamDecoder:
    __slots__ = ("_started", "_done", "_usage", "_blocks", "_live", "_kinds", "_stopped", "_reason", "_sequence")

    def __init__(self) -> None:
        self._started = False
        self._done = False
        self._usage: Usage | None = None
        self._blocks = Blocks()  # keyed by the upstream contentBlockIndex
        self._live = self._blocks.live  # read per delta (the same dict, never replaced)
        self._kinds: dict[int, BlockKind | None] = {}  # upstream index -> kind of its current block (None: skipped)
        self._stopped = False  # messageStop seen
        self._reason: str | None = None
        self._sequence: str | None = None

    # -- entry points -------------------------------------------------------------------------
    def feed(self, frame: SSEFrame) -> list[Event]:
        if self._done:
            return []
        event = frame.event or ""
        data = frame_object(frame)
        if event == "contentBlockDelta" and self._started and isinstance(data, dict):
            return self._delta(data)  # the hot path: most frames are deltas
        if is_exception(event):
            self._done = True
            return self._lead([stream_error(event, data)])
        if data is None:
            self._done = True
            return self._lead([bad_frame(frame, DIALECT)])
        if event == "contentBlockDelta":
            return self._lead(self._delta(data))
        if event == "contentBlockStart":
            return self._lead(self._block_start(data))
        if event == "contentBlockStop":
            return self._block_stop(data)
        if event == "messageStart":
            return self._lead([])
        if event == "messageStop":
            return self._lead(self._message_stop(data))
        if event == "metadata":
            return self._lead(self._metadata(data))
        warn_unknown(DIALECT, f"stream event {event!r}")
        return []

    def close(self) -> list[Event]:
        if self._done:
            return []
        self._done = True
        where = "after messageStop, before its metadata" if self._stopped else "before messageStop"
        return self._lead([StreamError("truncated", f"bedrock converse stream ended {where}", 502)])

    def usage_so_far(self) -> Usage | None:
        return self._usage

    # -- helpers ------------------------------------------------------------------------------
    def _lead(self, events: list[Event]) -> list[Event]:
        """Prefix the MessageStart (Converse's names no id or model: the gateway makes the id)."""
        if self._started:
            return events
        self._started = True
        return [MessageStart(new_id("msg_"), ""), *events]

    def _open(self, upstream: int, kind: BlockKind, **start: Any) -> tuple[int, list[Event]]:
        events: list[Event] = []
        index = self._blocks.start(kind, events, key=upstream, **start)  # a block open at that index ends first
        self._kinds[upstream] = kind
        return index, events

    def _block_start(self, data: dict[str, Any]) -> list[Event]:
        upstream = data.get("contentBlockIndex")
        start = data.get("start")
        if not isinstance(upstream, int) or not isinstance(start, dict):
            warn_unknown(DIALECT, "contentBlockStart without contentBlockIndex/start")
            return []
        tool = start.get("toolUse")
        if isinstance(tool, dict):
            call_id = tool.get("toolUseId")
            name = tool.get("name")
            return self._open(
                upstream,
                "tool_call",
                id=call_id if isinstance(call_id, str) else new_id("tooluse_"),
                name=name if isinstance(name, str) else "",
            )[1]
        if not any(key in start for key in ("toolResult", "image")):
            return []  # an empty or new start: the block's deltas will say what it is
        warn_unknown(DIALECT, f"content block start {sorted(start)!r}")
        events: list[Event] = []
        self._blocks.stop(upstream, events)
        self._kinds[upstream] = None
        return events

    def _index(self, upstream: int, kind: BlockKind) -> tuple[int, list[Event]]:
        """Our index for a delta of ``kind`` at ``upstream`` (opening the block if needed)."""
        if upstream in self._kinds:
            current = self._kinds[upstream]
            if current is None:
                return _SKIPPED, []
            if current == kind:
                return self._live[upstream], []
        return self._open(upstream, kind)

    def _delta(self, data: dict[str, Any]) -> list[Event]:
        upstream = data.get("contentBlockIndex")
        delta = data.get("delta")
        if not isinstance(upstream, int) or not isinstance(delta, dict):
            warn_unknown(DIALECT, "contentBlockDelta without contentBlockIndex/delta")
            return []
        text = delta.get("text")
        if isinstance(text, str):
            if not text:
                return []
            if self._kinds.get(upstream) == "text":  # the hot path
                return [TextDelta(self._live[upstream], text)]
            index, events = self._index(upstream, "text")
            return events + [TextDelta(index, text)] if index != _SKIPPED else []
        tool = delta.get("toolUse")
        if isinstance(tool, dict):
            if self._kinds.get(upstream) != "tool_call":
                warn_unknown(DIALECT, "toolUse delta for a block that never started")
                return []
            fragment = tool.get("input")
            return [ToolArgsDelta(self._live[upstream], fragment)] if isinstance(fragment, str) and fragment else []
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, dict):
            return self._reasoning(upstream, reasoning)
        if not any(key in delta for key in ("citation", "toolResult", "image")):
            warn_unknown(DIALECT, f"contentBlockDelta {sorted(delta)!r}")
        return []

    def _reasoning(self, upstream: int, reasoning: dict[str, Any]) -> list[Event]:
        redacted = reasoning.get("redactedContent")
        if isinstance(redacted, str):
            if self._kinds.get(upstream) == "redacted_thinking":
                warn_unknown(DIALECT, "second redactedContent delta in one block")
                return []
            return self._open(upstream, "redacted_thinking", data=redacted)[1]
        text = reasoning.get("text")
        if isinstance(text, str):
            if not text:
                return []
            index, events = self._index(upstream, "thinking")
            return events + [ThinkingDelta(index, text)] if index != _SKIPPED else []
        signature = reasoning.get("signature")
        if isinstance(signature, str) and signature:
            index, events = self._index(upstream, "thinking")
            return events + [SignatureDelta(index, signature)] if index != _SKIPPED else []
        return []

    def _block_stop(self, data: dict[str, Any]) -> list[Event]:
        upstream = data.get("contentBlockIndex")
        events: list[Event] = []
        if isinstance(upstream, int):
            self._kinds.pop(upstream, None)
            self._blocks.stop(upstream, events)
        return events

    def _close_blocks(self) -> list[Event]:
        events: list[Event] = []
        self._blocks.stop_all(events)
        self._kinds.clear()
        return events

    def _message_stop(self, data: dict[str, Any]) -> list[Event]:
        self._stopped = True
        reason = data.get("stopReason")
        self._reason = reason if isinstance(reason, str) else None
        self._sequence = stop_sequence_of(data.get("additionalModelResponseFields"))
        return self._close_blocks()

    def _metadata(self, data: dict[str, Any]) -> list[Event]:
        usage = convert_usage(data.get("usage"))
        events: list[Event] = []
        if usage is not None:
            self._usage = usage
            events.append(usage)
        if not self._stopped:
            return events  # usage ahead of messageStop: not the end yet
        self._done = True
        events += self._close_blocks()
        events.append(End(map_stop_reason(self._reason), self._reason, self._sequence))
        return events
