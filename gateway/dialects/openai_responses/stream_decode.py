"""Responses SSE (``event: <type>`` + ``data: <json>``) -> events.

Output items are tracked by ``output_index`` (and ``item_id`` for events that carry only that):

* ``message`` items: each content part (``output_text`` / ``refusal``) is its own text block,
  opened on ``content_part.added`` or its first delta;
* ``function_call`` items: a tool_call block opened on ``output_item.added``;
* ``reasoning`` items: a thinking block opened lazily (first summary/reasoning delta, or the
  ``encrypted_content`` on ``output_item.done``, which is final: it changes between ``added`` and
  ``done``), so reasoning items with nothing to show produce nothing;
* every other item (a client tool call of another kind: ``custom_tool_call``, ``shell_call`` …; a
  server tool's ``web_search_call``, ``mcp_call`` …; unknown types): one block opened on its
  ``output_item.done`` carrying the final item whole (``BlockStart.item``, items.py) — a
  ``tool_call`` block with its function-call spelling for a client tool call, else ``opaque``; the
  item's own progress events (``custom_tool_call_input.delta``, ``mcp_call.in_progress`` …) are
  read by nobody: the done item says it all.

``.done`` events carry the full text: anything beyond what the deltas said is emitted then, so an
upstream that skips deltas still yields the whole answer — only when the deltas are its prefix.
A final text that disagrees with the deltas already sent is not spliced on (that would put its
tail after a different beginning, mid-word): what was streamed stands and the mismatch is logged
as a warning naming the provider. The terminator is one of
``response.completed`` / ``.incomplete`` / ``.failed``; an ``error`` event ends the stream at once
(the ``response.failed`` that follows it is then ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.dialects.common import new_id, warn_unknown, warn_upstream
from gateway.dialects.kit import Blocks, as_dict, as_list, bad_frame, final_rest, frame_object
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

from .errors import kind_for_code, lasting_code
from .items import OWN_ITEMS, client_call
from .stop_reasons import COMPLETED, map_stop_reason
from .usage import convert_usage

DIALECT = "openai-responses"

_IGNORED = frozenset(
    {
        "response.in_progress",
        "response.queued",
        "response.output_text.annotation.added",
        "response.reasoning_summary_part.done",
        "response.content_part.done",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
    }
)


def mismatch(what: str, sent: str, final: str) -> None:
    """A ``.done`` event whose full text is not the deltas' text: the deltas stand (see ``final_rest``)."""
    warn_upstream(
        DIALECT,
        f"final {what}",
        f"the final {what} ({len(final)} chars) is not what its deltas said ({len(sent)} chars);"
        " kept what was streamed",
    )


class _Part:
    """One text content part of a message item: its block and the deltas sent to it (joined only
    when a ``.done`` event states the full text, to check the deltas are its prefix)."""

    __slots__ = ("block", "sent")

    def __init__(self, block: int) -> None:
        self.block = block
        self.sent: list[str] = []


class _Item:
    """One output item: its kind and the block(s) it opened."""

    __slots__ = ("kind", "block", "parts", "emitted", "sent", "signature", "sep", "closed")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.block: int | None = None  # function_call / reasoning block index
        self.parts: dict[int, _Part] = {}  # message: content_index -> its text block
        self.emitted = 0  # chars of arguments / thinking emitted
        self.sent: list[str] = []  # the argument fragments emitted, for the final arguments' check
        self.signature: str | None = None
        self.sep = False  # the next thinking delta starts a new summary part
        self.closed = False


def tool_name(item: dict[str, Any]) -> tuple[str, str | None]:
    """A ``function_call``'s (name, namespace), kept apart: the namespace is OpenAI's grouping (a
    Codex ``namespace`` tool, tool search), not part of the name a caller of another dialect
    declared; a Responses encoder writes it back beside the name."""
    name = item.get("name")
    ns = item.get("namespace")
    return (name if isinstance(name, str) else ""), (ns if isinstance(ns, str) and ns else None)


class ResponsesStreamDecoder:
    __slots__ = ("_started", "_finished", "_blocks", "_items", "_by_id", "_saw_call", "_usage")

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._blocks = Blocks()
        self._items: dict[int, _Item] = {}
        self._by_id: dict[str, int] = {}
        self._saw_call = False
        self._usage: Usage | None = None  # the latest usage a response.* event stated

    # ------------------------------------------------------------------ protocol

    def feed(self, frame: SSEFrame) -> list[Event]:
        if self._finished:
            return []
        data = frame_object(frame)
        if data is None:
            self._finished = True
            return [bad_frame(frame, DIALECT)]
        kind = data.get("type")
        if not isinstance(kind, str) or not kind:
            kind = frame.event or ""
        out: list[Event] = []
        if not self._started and kind != "error":
            self._start(data.get("response"), out)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, data, out)
        elif kind not in _IGNORED and not self._of_kept_item(data):
            warn_unknown(DIALECT, f"stream event {kind!r}")
        return out

    def close(self) -> list[Event]:
        if self._finished:
            return []
        self._finished = True
        return [StreamError("truncated", "upstream stream ended without response.completed", 502)]

    def usage_so_far(self) -> Usage | None:
        return self._usage

    # ------------------------------------------------------------------ helpers

    def _start(self, response: object, out: list[Event]) -> None:
        self._started = True
        if isinstance(response, dict):
            out.append(MessageStart(str(response.get("id") or new_id("resp_")), str(response.get("model") or "")))
        else:
            out.append(MessageStart(new_id("resp_"), ""))

    def _item(self, data: dict[str, Any]) -> _Item | None:
        idx = data.get("output_index")
        if isinstance(idx, int):
            item = self._items.get(idx)
            if item is not None:
                return item
        item_id = data.get("item_id")
        if isinstance(item_id, str) and item_id in self._by_id:
            return self._items.get(self._by_id[item_id])
        return None

    def _of_kept_item(self, data: dict[str, Any]) -> bool:
        """An event of an item kept whole at its done (its progress: nothing to translate)."""
        item = self._item(data)
        return item is not None and item.kind == "other"

    def _open(
        self,
        kind: BlockKind,
        out: list[Event],
        call_id: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
    ) -> int:
        return self._blocks.start(kind, out, id=call_id, name=name, namespace=namespace)

    def _text_part(self, data: dict[str, Any], out: list[Event]) -> _Part | None:
        item = self._item(data)
        if item is None:
            idx = data.get("output_index")
            if not isinstance(idx, int):
                return None
            item = self._items[idx] = _Item("message")
        if item.kind != "message" or item.closed:  # nothing reaches an item after its output_item.done
            return None
        ci = data.get("content_index")
        if not isinstance(ci, int):
            ci = 0
        part = item.parts.get(ci)
        if part is None:
            part = item.parts[ci] = _Part(self._open("text", out))
        return part

    def _thinking(self, item: _Item, text: str, out: list[Event]) -> None:
        if not text or item.closed:
            return
        if item.block is None:
            item.block = self._open("thinking", out)
        elif item.sep:
            text = "\n\n" + text
        item.sep = False
        item.emitted += len(text)
        out.append(ThinkingDelta(item.block, text))

    def _close_all(self, out: list[Event]) -> None:
        for item in self._items.values():
            self._close_item(item, out)
        self._blocks.stop_all(out)  # none left open, unless the upstream skipped an item's done

    def _close_item(self, item: _Item, out: list[Event]) -> None:
        if item.closed:
            return
        item.closed = True
        for part in item.parts.values():
            self._blocks.stop(part.block, out)
        if item.block is not None:
            if item.signature:
                out.append(SignatureDelta(item.block, item.signature))
            self._blocks.stop(item.block, out)

    # ------------------------------------------------------------------ handlers

    def _item_added(self, data: dict[str, Any], out: list[Event]) -> None:
        idx, raw = data.get("output_index"), data.get("item")
        if not isinstance(idx, int) or not isinstance(raw, dict):
            warn_unknown(DIALECT, "output_item.added without output_index/item")
            return
        kind = raw.get("type")
        item = _Item(kind if kind in OWN_ITEMS else "other")
        self._items[idx] = item
        if isinstance(raw.get("id"), str):
            self._by_id[raw["id"]] = idx
        if kind == "function_call":
            self._saw_call = True
            item.block = self._open(
                "tool_call", out, str(raw.get("call_id") or raw.get("id") or new_id("call_")), *tool_name(raw)
            )
            args = raw.get("arguments")
            if isinstance(args, str) and args:
                item.emitted = len(args)
                item.sent.append(args)
                out.append(ToolArgsDelta(item.block, args))
        elif kind == "reasoning":
            enc = raw.get("encrypted_content")
            if isinstance(enc, str) and enc:
                item.signature = enc

    def _part_added(self, data: dict[str, Any], out: list[Event]) -> None:
        part = data.get("part")
        if isinstance(part, dict) and part.get("type") not in ("output_text", "refusal"):
            warn_unknown(DIALECT, f"content part {part.get('type')!r}")
            return
        p = self._text_part(data, out)
        text = part.get("text") if isinstance(part, dict) else None
        if p is not None and isinstance(text, str) and text:
            p.sent.append(text)
            out.append(TextDelta(p.block, text))

    def _text_delta(self, data: dict[str, Any], out: list[Event]) -> None:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return
        p = self._text_part(data, out)
        if p is not None:
            p.sent.append(delta)
            out.append(TextDelta(p.block, delta))

    def _text_done(self, data: dict[str, Any], out: list[Event]) -> None:
        text = data.get("text")
        if not isinstance(text, str):
            text = data.get("refusal")
        if not isinstance(text, str):
            return
        p = self._text_part(data, out)
        if p is None or not text:
            return
        sent = "".join(p.sent)
        rest = final_rest(sent, text)
        if rest is None:
            mismatch("output text", sent, text)
        elif rest:
            p.sent = [text]
            out.append(TextDelta(p.block, rest))

    def _args_delta(self, data: dict[str, Any], out: list[Event]) -> None:
        item = self._item(data)
        delta = data.get("delta")
        if (
            item is None
            or item.block is None
            or item.kind != "function_call"
            or item.closed
            or not isinstance(delta, str)
            or not delta
        ):
            return
        item.emitted += len(delta)
        item.sent.append(delta)
        out.append(ToolArgsDelta(item.block, delta))

    def _args_done(self, data: dict[str, Any], out: list[Event]) -> None:
        item = self._item(data)
        args = data.get("arguments")
        if (
            item is not None
            and item.block is not None
            and item.kind == "function_call"
            and not item.closed
            and isinstance(args, str)
            and args
        ):
            sent = "".join(item.sent)
            rest = final_rest(sent, args)
            if rest is None:
                mismatch("function call arguments", sent, args)
            elif rest:
                item.sent, item.emitted = [args], len(args)
                out.append(ToolArgsDelta(item.block, rest))

    def _summary_part_added(self, data: dict[str, Any], out: list[Event]) -> None:
        item = self._item(data)
        if item is not None and item.kind == "reasoning" and item.emitted:
            item.sep = True

    def _reasoning_delta(self, data: dict[str, Any], out: list[Event]) -> None:
        item = self._item(data)
        delta = data.get("delta")
        if item is not None and item.kind == "reasoning" and isinstance(delta, str):
            self._thinking(item, delta, out)

    def _item_done(self, data: dict[str, Any], out: list[Event]) -> None:
        idx, raw = data.get("output_index"), data.get("item")
        if not isinstance(raw, dict):
            return
        item = self._items.get(idx) if isinstance(idx, int) else None
        if item is None:  # done without added: treat it as both
            self._item_added(data, out)
            item = self._items.get(idx) if isinstance(idx, int) else None
            if item is None:
                return
        kind = item.kind
        if kind == "message" and not item.parts:
            for ci, part in enumerate(as_list(raw.get("content"))):
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                    if isinstance(text, str) and text:
                        self._text_done({"output_index": idx, "content_index": ci, "text": text}, out)
        elif kind == "function_call":
            self._args_done({"output_index": idx, "arguments": raw.get("arguments")}, out)
        elif kind == "reasoning":
            enc = raw.get("encrypted_content")
            if isinstance(enc, str) and enc:
                item.signature = enc
            if not item.emitted:
                texts = [s.get("text") for s in as_list(raw.get("summary")) if isinstance(s, dict)]
                if not any(texts):
                    texts = [c.get("text") for c in as_list(raw.get("content")) if isinstance(c, dict)]
                self._thinking(item, "\n\n".join(t for t in texts if isinstance(t, str) and t), out)
            if item.block is None and item.signature:
                item.block = self._open("thinking", out)
        elif kind == "other" and not item.closed:
            self._kept_item(item, raw, out)
        self._close_item(item, out)

    def _kept_item(self, item: _Item, raw: dict[str, Any], out: list[Event]) -> None:
        """An item the IR has no kind for, whole (items.py): a client tool call also as a function call."""
        call = client_call(raw)
        if call is None:
            item.block = self._blocks.start("opaque", out, item=raw, origin=DIALECT)
            return
        self._saw_call = True
        call_id, name, args = call
        item.block = self._blocks.start("tool_call", out, id=call_id, name=name, item=raw, origin=DIALECT)
        out.append(ToolArgsDelta(item.block, args))

    def _completed(self, data: dict[str, Any], out: list[Event]) -> None:
        self._finish(data, out)
        out.append(End(map_stop_reason(COMPLETED, tool_called=self._saw_call), COMPLETED))

    def _incomplete(self, data: dict[str, Any], out: list[Event]) -> None:
        self._finish(data, out)
        details = as_dict(data.get("response")).get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        reason = reason if isinstance(reason, str) else None
        out.append(End(map_stop_reason(reason), reason))

    def _finish(self, data: dict[str, Any], out: list[Event]) -> None:
        self._finished = True
        output = as_list(as_dict(data.get("response")).get("output"))
        for idx, item in self._items.items():  # a kept item whose output_item.done never came
            final = output[idx] if 0 <= idx < len(output) else None
            if item.kind == "other" and not item.closed and isinstance(final, dict):
                self._kept_item(item, final, out)
        self._close_all(out)
        response = data.get("response")
        usage = convert_usage(response.get("usage")) if isinstance(response, dict) else None
        if usage is not None:
            self._usage = usage
            out.append(usage)

    def _failed(self, data: dict[str, Any], out: list[Event]) -> None:
        self._finished = True
        response = as_dict(data.get("response"))
        if response.get("status") == "cancelled":  # how a cancelled response's stream ends (see stream_encode)
            usage = convert_usage(response.get("usage"))
            if usage is not None:
                out.append(usage)
            out.append(StreamError("cancelled", "the response was cancelled", 499, "cancelled"))
            return
        err = as_dict(response.get("error"))
        code = err.get("code") if isinstance(err.get("code"), str) else None
        kind, status = kind_for_code(code)
        usage = convert_usage(response.get("usage"))  # a failed response still states what it used
        if usage is not None:
            self._usage = usage
            out.append(usage)
        message = str(err.get("message") or "the response failed")
        out.append(StreamError(kind, message, status, code or "server_error", lasting_code(code)))

    def _error(self, data: dict[str, Any], out: list[Event]) -> None:
        if not self._started:
            self._start(None, out)
        self._finished = True
        inner = data.get("error")
        err = inner if isinstance(inner, dict) else data
        code = err.get("code") if isinstance(err.get("code"), str) else None
        typ = err.get("type") if isinstance(err.get("type"), str) and err.get("type") != "error" else None
        raw = code or typ
        kind, status = kind_for_code(raw)
        message = str(err.get("message") or "upstream stream error")
        out.append(StreamError(kind, message, status, raw or "server_error", lasting_code(code) or lasting_code(typ)))

    def _nothing(self, data: dict[str, Any], out: list[Event]) -> None:
        return None


_Handler = Callable[[ResponsesStreamDecoder, dict[str, Any], list[Event]], None]

_HANDLERS: dict[str, _Handler] = {
    "response.created": ResponsesStreamDecoder._nothing,
    "response.output_item.added": ResponsesStreamDecoder._item_added,
    "response.content_part.added": ResponsesStreamDecoder._part_added,
    "response.output_text.delta": ResponsesStreamDecoder._text_delta,
    "response.refusal.delta": ResponsesStreamDecoder._text_delta,
    "response.output_text.done": ResponsesStreamDecoder._text_done,
    "response.refusal.done": ResponsesStreamDecoder._text_done,
    "response.function_call_arguments.delta": ResponsesStreamDecoder._args_delta,
    "response.function_call_arguments.done": ResponsesStreamDecoder._args_done,
    "response.reasoning_summary_part.added": ResponsesStreamDecoder._summary_part_added,
    "response.reasoning_summary_text.delta": ResponsesStreamDecoder._reasoning_delta,
    "response.reasoning_text.delta": ResponsesStreamDecoder._reasoning_delta,
    "response.reasoning_summary_text.done": ResponsesStreamDecoder._nothing,
    "response.reasoning_text.done": ResponsesStreamDecoder._nothing,
    "response.output_item.done": ResponsesStreamDecoder._item_done,
    "response.completed": ResponsesStreamDecoder._completed,
    "response.incomplete": ResponsesStreamDecoder._incomplete,
    "response.failed": ResponsesStreamDecoder._failed,
    "error": ResponsesStreamDecoder._error,
}
