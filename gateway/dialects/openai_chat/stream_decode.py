"""Chat completion chunks (upstream SSE) → events.

One decoder per upstream response. Only choice 0 is translated (the gateway never asks for
``n > 1``; other choices are ignored with a warning). Block indices are given in order of first
appearance across text, thinking and tool blocks; switching between text and thinking, or starting
a tool call, closes the open content block. A tool call is keyed by its OpenAI ordinal
(``tool_calls[i].index``); a new ordinal closes the previous tool block, since OpenAI and the
compatible servers stream calls one after another.

``delta.reasoning_content`` (DeepSeek, vLLM) and ``delta.reasoning`` (OpenRouter, Ollama) become a
thinking block; ``delta.content`` is a string or, from Mistral's reasoning models, a list of
``text`` and ``thinking`` parts (``content_parts.py``), the thinking parts a thinking block; ``delta.refusal`` becomes text and turns a final ``stop`` into ``refusal``.
Azure's leading ``prompt_filter_results`` chunk (empty id, no choices) is skipped.
The stop reason and usage are held until ``data: [DONE]``, the only terminator. Usage is the chunk's
``usage``, else Groq's ``x_groq.usage`` or Moonshot's choice-level ``usage``. A server that
reports usage on content chunks (vLLM's ``continuous_usage_stats``) states the prompt's count
early: that goes out at once (input side only), before the chunk's deltas.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.common import new_id, warn_unknown
from gateway.dialects.kit import Blocks, bad_frame, frame_object, prompt_side
from gateway.events import (
    BlockKind,
    End,
    Event,
    MessageStart,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.sse import SSEFrame

from .content_parts import content_parts
from .errors import stream_error
from .stop_reasons import map_stop_reason
from .usage import convert_usage

DIALECT = "openai-chat"


def _usage_elsewhere(obj: dict[str, Any], choices: object) -> dict[str, Any] | None:
    """A stream's usage object where a vendor puts it instead of the chunk's ``usage``: Groq's
    ``x_groq.usage`` (on the last chunk), Moonshot's inside the last choice."""
    x_groq = obj.get("x_groq")
    usage: object = x_groq.get("usage") if isinstance(x_groq, dict) else None
    if not isinstance(usage, dict) and isinstance(choices, list) and choices and isinstance(choices[0], dict):
        usage = choices[0].get("usage")
    return usage if isinstance(usage, dict) else None


class ChatStreamDecoder:
    __slots__ = (
        "_started",
        "_done",
        "_blocks",
        "_content_kind",
        "_content_index",
        "_tools",
        "_tool_open",
        "_closed_tools",
        "_finish",
        "_usage",
        "_refusal",
        "_warned_choice",
        "_early_sent",
    )

    def __init__(self) -> None:
        self._started = False
        self._done = False
        self._blocks = Blocks()
        self._content_kind: BlockKind | None = None  # "text" | "thinking" while a content block is open
        self._content_index = -1
        self._tools: dict[int, int] = {}  # OpenAI tool ordinal -> block index
        self._tool_open: int | None = None  # ordinal of the open tool block
        self._closed_tools: set[int] = set()
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._refusal = False
        self._warned_choice = False
        self._early_sent = False  # the prompt's count went out ahead of the final usage

    # -- SSE frames -------------------------------------------------------------------------
    def feed(self, frame: SSEFrame) -> list[Event]:
        if self._done:
            return []
        data = frame.data
        if data[:6] == "[DONE]":
            return self._finish_stream()
        obj = frame_object(frame)
        if obj is None:
            self._done = True
            return [bad_frame(frame, DIALECT)]
        error = obj.get("error")
        if error:
            self._done = True
            return [stream_error(error)]
        events: list[Event] = []
        choices = obj.get("choices")
        if not self._started:
            if not choices and not obj.get("id") and not isinstance(obj.get("usage"), dict):
                return []  # Azure's prompt_filter_results preamble
            self._started = True
            events.append(MessageStart(obj.get("id") or new_id("chatcmpl-"), obj.get("model") or ""))
        wire_usage = obj.get("usage")
        if not isinstance(wire_usage, dict):
            wire_usage = _usage_elsewhere(obj, choices)
        if wire_usage is not None:
            usage = self._usage = convert_usage(wire_usage)
            if usage is not None and choices and not self._early_sent and usage.input is not None:
                self._early_sent = True
                events.append(prompt_side(usage))
        if choices:
            for choice in choices:
                if not isinstance(choice, dict):
                    continue
                if choice.get("index", 0) != 0:
                    if not self._warned_choice:
                        self._warned_choice = True
                        warn_unknown(DIALECT, "choice index > 0 (n > 1 is not supported; only choice 0 is relayed)")
                    continue
                delta = choice.get("delta")
                if delta:
                    self._delta(delta, events)
                finish = choice.get("finish_reason")
                if finish and isinstance(finish, str):
                    self._finish = finish
        return events

    def close(self) -> list[Event]:
        if self._done:
            return []
        self._done = True
        return [StreamError("truncated", "upstream stream ended without data: [DONE]", 502)]

    # -- one choice delta -------------------------------------------------------------------
    def _delta(self, delta: dict[str, Any], events: list[Event]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):
            events.append(ThinkingDelta(self._content("thinking", events), reasoning))
        content = delta.get("content")
        if content:
            if isinstance(content, str):
                events.append(TextDelta(self._content("text", events), content))
            else:  # a list of parts (Mistral's reasoning models): text and thinking, in order
                for kind, text in content_parts(content):
                    if kind == "thinking":
                        events.append(ThinkingDelta(self._content("thinking", events), text))
                    else:
                        events.append(TextDelta(self._content("text", events), text))
        refusal = delta.get("refusal")
        if refusal and isinstance(refusal, str):
            self._refusal = True
            events.append(TextDelta(self._content("text", events), refusal))
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            for call in tool_calls:
                if isinstance(call, dict):
                    self._tool_call(call, events)

    def _content(self, kind: BlockKind, events: list[Event]) -> int:
        """The index of the open ``kind`` content block, opening one (and closing others) if needed."""
        if self._content_kind == kind:
            return self._content_index
        self._close_content(events)
        self._close_tool(events)
        index = self._blocks.start(kind, events)
        self._content_kind, self._content_index = kind, index
        return index

    def _close_content(self, events: list[Event]) -> None:
        if self._content_kind is not None:
            self._blocks.stop(self._content_index, events)
            self._content_kind = None

    def _close_tool(self, events: list[Event]) -> None:
        if self._tool_open is not None:
            self._blocks.stop(self._tools[self._tool_open], events)
            self._closed_tools.add(self._tool_open)
            self._tool_open = None

    def _tool_call(self, call: dict[str, Any], events: list[Event]) -> None:
        function = call.get("function") or {}
        ordinal = call.get("index")
        if not isinstance(ordinal, int):
            # some compatible servers omit ``index``: a new id means a new call
            if call.get("id") or self._tool_open is None:
                ordinal = len(self._tools)
            else:
                ordinal = self._tool_open
        index = self._tools.get(ordinal)
        if index is None:
            self._close_content(events)
            self._close_tool(events)
            call_id = call.get("id") or new_id("call_")
            index = self._blocks.start("tool_call", events, id=call_id, name=function.get("name") or "")
            self._tools[ordinal] = index
            self._tool_open = ordinal
        elif ordinal in self._closed_tools:
            warn_unknown(DIALECT, "arguments for a tool call after a later one started (dropped)")
            return
        arguments = function.get("arguments")
        if arguments and isinstance(arguments, str):
            events.append(ToolArgsDelta(index, arguments))
        elif isinstance(arguments, dict):  # a few compatible servers send an object
            events.append(ToolArgsDelta(index, orjson.dumps(arguments).decode()))

    def usage_so_far(self) -> Usage | None:
        return self._usage

    # -- terminator -------------------------------------------------------------------------
    def _finish_stream(self) -> list[Event]:
        self._done = True
        events: list[Event] = []
        if not self._started:
            self._started = True
            events.append(MessageStart(new_id("chatcmpl-"), ""))
        self._close_content(events)
        self._close_tool(events)
        self._blocks.stop_all(events)
        events.append(self._usage or Usage())
        if self._finish is None:
            warn_unknown(DIALECT, "stream without finish_reason")
        events.append(End(map_stop_reason(self._finish, refusal=self._refusal), self._finish))
        return events
