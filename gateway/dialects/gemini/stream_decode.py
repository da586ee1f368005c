"""Gemini ``streamGenerateContent?alt=sse`` frames → events.

Each frame is a whole ``GenerateContentResponse`` holding only the newest increment (never
cumulative text). Gemini has no terminator: the body simply ends, so ``End`` comes from
``close()`` once a ``finishReason`` (or a ``promptFeedback.blockReason``) was seen; a body that
ends without one was cut off → ``StreamError("truncated")``.

Blocks:

* ``text`` parts: ``thought: true`` → a thinking block, else a text block; consecutive parts of
  the same kind continue the open block.
* ``functionCall``: arrives whole (Developer API) → ``BlockStart`` + ONE ``ToolArgsDelta`` +
  ``BlockStop``. Vertex ``streamFunctionCallArguments`` sends ``{name, willContinue: true}`` then
  ``partialArgs`` pieces (``jsonPath`` + value) and closes the call with an empty
  ``functionCall {}``: the pieces are assembled into an object and sent as one fragment.
* ``thoughtSignature`` on a thought part → ``SignatureDelta`` on that thinking block. On another
  part: if a thinking block is open right before it, the signature closes that block (one signed
  thinking block, exactly Anthropic's shape); otherwise a separate thinking block holding only
  the signature is emitted right before the part's block, so an Anthropic caller gets a signed
  thinking block before its ``tool_use``. The builder puts it back on the next part.
* any other part (``executableCode``, ``codeExecutionResult``, ``inlineData`` …): an ``opaque``
  block carrying the part whole (gateway/dialects/items.py), for a Gemini caller.

``usageMetadata`` repeats on every chunk: the last one is kept and emitted once, before ``End``
(or before a ``StreamError``). The prompt's counts are known from the first chunk that carries
them, so those go out at once too (``kit.prompt_side``, before that chunk's blocks): an Anthropic
caller's ``message_start`` shows the real ``input_tokens``.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import orjson

from gateway.dialects.common import new_id, warn_unknown
from gateway.dialects.kit import Blocks, bad_frame, frame_array, frame_object, prompt_side
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

from .errors import error_fields, kind_for
from .stop_reasons import map_stop_reason
from .usage import convert_usage

DIALECT = "gemini"
_KNOWN_PART_KEYS = frozenset({"text", "thought", "thoughtSignature", "functionCall"})
_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue", "structValue", "listValue")


class GeminiStreamDecoder:
    """Incremental decoder; ``whole=True`` is used for JSON bodies (no finishReason → stop)."""

    __slots__ = (
        "_started",
        "_blocks",
        "_open_kind",
        "_open_index",
        "_finish",
        "_finish_message",
        "_saw_call",
        "_usage",
        "_done",
        "_calls",
        "_stream_call",
        "_whole",
        "_early_sent",
    )

    def __init__(self, whole: bool = False) -> None:
        self._started = False
        self._blocks = Blocks()
        self._open_kind: BlockKind | None = None  # "text" | "thinking" while a block is open
        self._open_index = -1
        self._finish: str | None = None
        self._finish_message: str | None = None
        self._saw_call = False
        self._usage: dict[str, Any] | None = None
        self._done = False
        self._calls = 0  # function calls seen
        self._stream_call: tuple[int, dict[str, Any]] | None = None  # (index, args object) of a Vertex streamed call
        self._whole = whole
        self._early_sent = False  # the prompt's counts went out ahead of the final usage

    # -- frames ---------------------------------------------------------------------------

    def feed(self, frame: SSEFrame) -> list[Event]:
        if self._done:
            return []
        chunk = frame_object(frame)
        if chunk is not None:
            return self.feed_chunk(chunk)
        items = frame_array(frame)  # a JSON-array body split into lines by a proxy
        if items is None:
            return self._fail(bad_frame(frame, DIALECT))
        out: list[Event] = []
        for item in items:
            if not isinstance(item, dict):
                out.extend(self._fail(bad_frame(frame, DIALECT, "holds an array item that is not a JSON object")))
                break
            out.extend(self.feed_chunk(item))
        return out

    def feed_chunk(self, chunk: dict[str, Any]) -> list[Event]:
        if self._done:
            return []
        out: list[Event] = []
        if "error" in chunk:
            code, message, status, _ = error_fields(chunk)
            http = code if code else 500
            return self._fail(StreamError(kind_for(status, http), message or "gemini stream error", http, status), out)
        if not self._started:
            self._started = True
            rid = chunk.get("responseId")
            out.append(
                MessageStart(
                    rid if isinstance(rid, str) and rid else new_id("gen-"), str(chunk.get("modelVersion") or "")
                )
            )
        meta = chunk.get("usageMetadata")
        if isinstance(meta, dict) and (
            "promptTokenCount" in meta or "candidatesTokenCount" in meta or "thoughtsTokenCount" in meta
        ):
            self._usage = meta
            if not self._early_sent and "promptTokenCount" in meta:
                self._early_sent = True
                out.append(prompt_side(self._usage_now(meta)))
        candidates = chunk.get("candidates")
        if isinstance(candidates, list) and candidates:
            cand = candidates[0]
            if len(candidates) > 1:
                warn_unknown(DIALECT, "candidates beyond the first")
            if isinstance(cand, dict):
                content = cand.get("content")
                parts = content.get("parts") if isinstance(content, dict) else None
                if isinstance(parts, list):
                    for part in parts:
                        if isinstance(part, dict):
                            self._part(part, out)
                reason = cand.get("finishReason")
                if isinstance(reason, str) and reason:
                    self._finish = reason
                    msg = cand.get("finishMessage")
                    self._finish_message = msg if isinstance(msg, str) else None
        else:
            feedback = chunk.get("promptFeedback")
            block = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if isinstance(block, str) and block:
                self._finish = "PROMPT_BLOCKED:" + block
        return out

    def close(self) -> list[Event]:
        if self._done:
            return []
        self._done = True
        out: list[Event] = []
        if not self._started:
            self._started = True
            out.append(MessageStart(new_id("gen-"), ""))
        if self._finish is None and not self._whole:
            return self._fail(StreamError("truncated", "gemini: stream ended without a finishReason", 502), out)
        self._finish_call(out)
        self._close_open(out)
        self._blocks.stop_all(out)
        if self._usage is not None:
            out.append(self._usage_now(self._usage))
        raw = self._finish or "STOP"
        if raw.startswith("PROMPT_BLOCKED:"):
            out.append(End("content_filter", raw.partition(":")[2]))
        else:
            out.append(End(map_stop_reason(raw, tool_called=self._saw_call), raw))
        return out

    def usage_so_far(self) -> Usage | None:
        return self._usage_now(self._usage) if self._usage is not None else None

    @staticmethod
    def _usage_now(meta: dict[str, Any]) -> Usage:
        """The kept ``usageMetadata`` as ``Usage`` (converted once, when it is read)."""
        return convert_usage(meta) or Usage()

    # -- parts ----------------------------------------------------------------------------

    def _part(self, part: dict[str, Any], out: list[Event]) -> None:
        sig = part.get("thoughtSignature")
        sig = sig if isinstance(sig, str) and sig else None
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._function_call(call, sig, out)
            return
        text = part.get("text")
        if isinstance(text, str):
            self._finish_call(out)
            if part.get("thought") is True:
                if self._open_kind != "thinking":
                    self._open("thinking", out)
                if text:
                    out.append(ThinkingDelta(self._open_index, text))
                if sig:
                    out.append(SignatureDelta(self._open_index, sig))
                return
            if sig:
                self._signed_thinking(sig, out)
            if text:
                if self._open_kind != "text":
                    self._open("text", out)
                out.append(TextDelta(self._open_index, text))
            return
        if any(key not in _KNOWN_PART_KEYS for key in part):
            # a part the IR has no kind for (executableCode, codeExecutionResult, inlineData …):
            # kept whole, signature included, for a Gemini caller (gateway/dialects/items.py)
            self._finish_call(out)
            self._close_open(out)
            self._blocks.stop(self._blocks.start("opaque", out, item=part, origin=DIALECT), out)
            return
        if sig:
            self._signed_thinking(sig, out)

    def _function_call(self, call: dict[str, Any], sig: str | None, out: list[Event]) -> None:
        name = call.get("name")
        partial = call.get("partialArgs")
        cont = call.get("willContinue") is True
        if self._stream_call is not None and not name:
            if isinstance(partial, list):
                _apply_partial(self._stream_call[1], partial)
            if not cont:
                self._finish_call(out)
            return
        self._finish_call(out)
        if not isinstance(name, str) or not name:
            if call:
                warn_unknown(DIALECT, "functionCall without a name")
            return
        self._signed_thinking(sig, out) if sig else self._close_open(out)
        self._calls += 1
        self._saw_call = True
        cid = call.get("id")
        # Generated ids are unique, not call_<n>: a conversation holds many turns and Anthropic
        # rejects a tool_use id seen twice.
        cid = cid if isinstance(cid, str) and cid else new_id("call_", 8)
        blocks = self._blocks
        index = blocks.start("tool_call", out, id=cid, name=name)
        args = call.get("args")
        args = args if isinstance(args, dict) else {}
        if cont or isinstance(partial, list):
            args = dict(args)
            if isinstance(partial, list):
                _apply_partial(args, partial)
            self._stream_call = (index, args)
            if not cont:
                self._finish_call(out)
            return
        out.append(ToolArgsDelta(index, orjson.dumps(args).decode()))
        blocks.stop(index, out)

    def _finish_call(self, out: list[Event]) -> None:
        if self._stream_call is not None:
            index, args = self._stream_call
            self._stream_call = None
            out.append(ToolArgsDelta(index, orjson.dumps(args).decode()))
            self._blocks.stop(index, out)

    def _signed_thinking(self, sig: str, out: list[Event]) -> None:
        """A signature on a non-thought part: on the open thinking block, else its own block."""
        blocks = self._blocks
        if self._open_kind == "thinking":
            out.append(SignatureDelta(self._open_index, sig))
            self._close_open(out)
            return
        self._close_open(out)
        index = blocks.start("thinking", out)
        out.append(SignatureDelta(index, sig))
        blocks.stop(index, out)

    def _open(self, kind: BlockKind, out: list[Event]) -> None:
        self._close_open(out)
        self._open_kind = kind
        self._open_index = self._blocks.start(kind, out)

    def _close_open(self, out: list[Event]) -> None:
        if self._open_kind is not None:
            self._blocks.stop(self._open_index, out)
            self._open_kind = None

    def _fail(self, err: StreamError, out: list[Event] | None = None) -> list[Event]:
        out = out if out is not None else []
        if not self._started:
            self._started = True
            out.insert(0, MessageStart(new_id("gen-"), ""))
        if self._usage is not None:
            out.append(self._usage_now(self._usage))
        out.append(err)
        self._done = True
        return out


def _apply_partial(args: dict[str, Any], pieces: list[Any]) -> None:
    """Merge Vertex ``partialArgs`` (``jsonPath`` + typed value) into ``args``; strings append."""
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        path = piece.get("jsonPath")
        if not isinstance(path, str) or not path.startswith("$"):
            continue
        tokens: list[Any] = []
        for m in _PATH_TOKEN.finditer(path, 1):
            key, idx, sq, dq = m.groups()
            tokens.append(int(idx) if idx is not None else (key if key is not None else (sq if sq is not None else dq)))
        if not tokens:
            continue
        value: Any = None
        kind = None
        for vk in _VALUE_KEYS:
            if vk in piece:
                kind, value = vk, piece[vk]
                break
        if kind is None:
            continue
        if kind == "nullValue":
            value = None
        node: Any = args
        for tok, nxt in itertools.pairwise(tokens):
            fresh: Any = [] if isinstance(nxt, int) else {}
            if isinstance(node, dict):
                node = node.setdefault(tok, fresh) if not isinstance(node.get(tok), (dict, list)) else node[tok]
            elif isinstance(node, list) and isinstance(tok, int):
                while len(node) <= tok:
                    node.append(None)
                if not isinstance(node[tok], (dict, list)):
                    node[tok] = fresh
                node = node[tok]
        last = tokens[-1]
        if isinstance(node, dict):
            if kind == "stringValue" and isinstance(node.get(last), str):
                node[last] += value
            else:
                node[last] = value
        elif isinstance(node, list) and isinstance(last, int):
            while len(node) <= last:
                node.append(None)
            if kind == "stringValue" and isinstance(node[last], str):
                node[last] += value
            else:
                node[last] = value
