"""Folding a stream of events into one whole reply.

Non-streaming callers get the same pipeline as streaming ones: the upstream's events (decoded from
SSE or from a JSON body) are accumulated here into a ``Reply``, which each dialect renders as its
final object. Decoders of whole bodies go the other way (body → ``Reply`` → ``unfold`` → events),
so the pipeline after them is the streaming one and this stays the only accumulator of events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.events import (
    BlockKind,
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


@dataclass(slots=True)
class ReplyBlock:
    kind: BlockKind
    text: str = ""  # text, thinking text, or tool arguments JSON text
    id: str | None = None
    name: str | None = None
    signature: str | None = None
    data: str | None = None  # redacted_thinking payload
    namespace: str | None = None  # a tool call's namespace (BlockStart.namespace)
    item: dict[str, Any] | None = None  # the upstream's own item (BlockStart.item)
    origin: str | None = None  # the dialect ``item`` is written in

    @property
    def arguments(self) -> str:
        """Tool arguments as JSON text; an empty stream of fragments means ``{}``."""
        return self.text if self.text.strip() else "{}"


@dataclass(slots=True)
class Reply:
    id: str = ""
    model: str = ""
    blocks: list[ReplyBlock] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    end: End | None = None
    error: StreamError | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks if b.kind == "text")


class ReplyBuilder:
    """Feed events in stream order; ``reply`` holds the result so far."""

    def __init__(self) -> None:
        self.reply = Reply()
        self._by_index: dict[int, ReplyBlock] = {}

    def add(self, event: Event) -> None:
        r = self.reply
        if isinstance(event, (TextDelta, ThinkingDelta)):
            block = self._by_index.get(event.index)
            if block is not None:
                block.text += event.text
        elif isinstance(event, ToolArgsDelta):
            block = self._by_index.get(event.index)
            if block is not None:
                block.text += event.fragment
        elif isinstance(event, BlockStart):
            block = ReplyBlock(
                event.kind,
                id=event.id,
                name=event.name,
                data=event.data,
                namespace=event.namespace,
                item=event.item,
                origin=event.origin,
            )
            self._by_index[event.index] = block
            r.blocks.append(block)
        elif isinstance(event, SignatureDelta):
            block = self._by_index.get(event.index)
            if block is not None:
                block.signature = (block.signature or "") + event.signature
        elif isinstance(event, Usage):
            r.usage = event
        elif isinstance(event, MessageStart):
            r.id, r.model = event.id, event.model
        elif isinstance(event, End):
            r.end = event
        elif isinstance(event, StreamError):
            r.error = event
        elif isinstance(event, BlockStop):
            pass

    def extend(self, events: list[Event]) -> None:
        for event in events:
            self.add(event)


def fold(events: list[Event]) -> Reply:
    builder = ReplyBuilder()
    builder.extend(events)
    return builder.reply


def unfold(reply: Reply) -> list[Event]:
    """The events of a whole reply, in stream order (used by whole-body decoders and the demo)."""
    events: list[Event] = [MessageStart(reply.id, reply.model)]
    for index, block in enumerate(reply.blocks):
        events.append(
            BlockStart(index, block.kind, block.id, block.name, block.data, block.namespace, block.item, block.origin)
        )
        if block.text:
            if block.kind == "text":
                events.append(TextDelta(index, block.text))
            elif block.kind == "thinking":
                events.append(ThinkingDelta(index, block.text))
            elif block.kind in ("tool_call", "opaque"):
                events.append(ToolArgsDelta(index, block.text))
        if block.signature:
            events.append(SignatureDelta(index, block.signature))
        events.append(BlockStop(index))
    events.append(reply.usage)
    if reply.error is not None:
        events.append(reply.error)
    elif reply.end is not None:
        events.append(reply.end)
    return events
