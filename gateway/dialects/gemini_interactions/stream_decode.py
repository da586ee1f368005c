"""Interactions SSE (``event: <event_type>`` + ``data: <json>``) -> events.

Steps are tracked by their ``index`` (``step.start`` / ``step.delta`` / ``step.stop``); each
translatable step opens one block: ``model_output`` -> text, ``thought`` -> thinking (summary
deltas + a signature delta), ``function_call`` -> tool_call (``arguments_delta`` fragments).
Server-tool steps and non-text deltas (images, annotations …) are skipped with a warning.

Terminator: ``interaction.completed`` (the status is the stop reason; ``End`` is held) and then
``event: done`` / ``data: [DONE]``, where ``End`` is emitted. Leniency, documented: a body that
ends cleanly after ``interaction.completed`` without the ``[DONE]`` frame still counts as complete
(``close()`` returns the held ``End``), since the interaction itself said it finished; a body that
ends before ``interaction.completed`` is truncated. Status ``failed`` and ``cancelled`` become a
``StreamError`` at once (kinds ``api_error`` / ``cancelled``); an ``error`` event likewise.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.common import new_id, warn_unknown
from gateway.dialects.kit import Blocks, as_dict, bad_frame, frame_object
from gateway.errors import kind_for_status
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

from .errors import kind_for_code
from .stop_reasons import map_stop_reason
from .usage import convert_usage

DIALECT = "gemini-interactions"

_STEP_KINDS: dict[object, BlockKind] = {"model_output": "text", "thought": "thinking", "function_call": "tool_call"}


def summary_text(summary: object) -> str:
    """The text of a thought step's ``summary`` parts."""
    if not isinstance(summary, list):
        return ""
    texts = [s.get("text") for s in summary if isinstance(s, dict)]
    return "\n\n".join(t for t in texts if isinstance(t, str) and t)


def content_text(content: object) -> str:
    """The text of a ``model_output`` step's ``content`` parts."""
    if not isinstance(content, list):
        return ""
    return "".join(
        c["text"] for c in content if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str)
    )


def failure_for_status(status: str, interaction: dict[str, Any]) -> StreamError | None:
    """The ``StreamError`` a failed / cancelled interaction stands for (``None`` otherwise)."""
    if status == "cancelled":
        return StreamError("cancelled", "the interaction was cancelled", 499, "cancelled")
    if status != "failed":
        return None
    errs = interaction.get("errors")
    err = errs[0] if isinstance(errs, list) and errs and isinstance(errs[0], dict) else interaction.get("error")
    err = err if isinstance(err, dict) else {}
    code = err.get("code") if isinstance(err.get("code"), str) else None
    kind, http = kind_for_code(code)
    return StreamError(kind, str(err.get("message") or "the interaction failed"), http, code or "failed")


class InteractionsStreamDecoder:
    __slots__ = (
        "_started",
        "_finished",
        "_held",
        "_steps",
        "_blocks",
        "_live",
        "_saw_call",
        "_usage",
        "interaction_id",
        "last_event_id",
        "_kept",
    )

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._held: End | None = None  # End waiting for [DONE]
        self._steps: dict[int, BlockKind] = {}  # step index -> its block's kind, for every step started
        self._blocks = Blocks()  # keyed by the step index
        self._live = self._blocks.live  # read per delta (the same dict, never replaced)
        self._saw_call = False
        self._usage: Usage | None = None  # the latest usage a status update or the completion stated
        # steps the IR has no kind for (google_search_call / _result …), kept whole: the step of its
        # step.start with its deltas' fields merged in, one opaque block at its step.stop (items.py)
        self._kept: dict[int, dict[str, Any]] = {}
        # where to resume the upstream if its connection drops (see InteractionsCodec.resume_call)
        self.interaction_id: str | None = None
        self.last_event_id: str | None = None

    # ------------------------------------------------------------------ protocol

    def feed(self, frame: SSEFrame) -> list[Event]:
        if self._finished:
            return []
        text = frame.data
        if text == "[DONE]" or frame.event == "done":
            return self._done()
        data = frame_object(frame)
        if data is None:
            self._finished = True
            return [bad_frame(frame, DIALECT)]
        kind = data.get("event_type") or frame.event or ""
        event_id = data.get("event_id")
        if isinstance(event_id, str):
            self.last_event_id = event_id
        created = None
        if kind == "interaction.created":
            created = data.get("interaction")
            if isinstance(created, dict):
                iid = created.get("id")
                self.interaction_id = iid if isinstance(iid, str) else None
        out: list[Event] = []
        if self._held is not None:
            if kind != "interaction.status_update":
                warn_unknown(DIALECT, f"event {kind!r} after interaction.completed")
            return out
        if not self._started:
            self._start(created, out)
        if kind == "step.delta":
            self._delta(data, out)
        elif kind == "step.start":
            self._step_start(data, out)
        elif kind == "step.stop":
            idx = data.get("index")
            if isinstance(idx, int):
                kept = self._kept.pop(idx, None)
                if kept is not None:
                    self._blocks.start("opaque", out, key=idx, item=kept, origin=DIALECT)
                self._blocks.stop(idx, out)
        elif kind == "interaction.completed":
            self._completed(data, out)
        elif kind == "error":
            self._error(data, out)
        elif kind == "interaction.status_update":
            usage = convert_usage(data.get("usage"))
            if usage is not None:
                self._usage = usage
                out.append(usage)
        elif kind != "interaction.created":
            warn_unknown(DIALECT, f"stream event {kind!r}")
        return out

    def close(self) -> list[Event]:
        if self._finished:
            return []
        self._finished = True
        if self._held is not None:
            return [self._held]  # completed seen, [DONE] missing: accepted (module docstring)
        return [StreamError("truncated", "upstream stream ended without interaction.completed", 502)]

    def usage_so_far(self) -> Usage | None:
        return self._usage

    # ------------------------------------------------------------------ helpers

    def _start(self, interaction: object, out: list[Event]) -> None:
        self._started = True
        if isinstance(interaction, dict):
            out.append(
                MessageStart(
                    str(interaction.get("id") or new_id("v1_")),
                    str(interaction.get("model") or interaction.get("agent") or ""),
                )
            )
        else:
            out.append(MessageStart(new_id("v1_"), ""))

    def _open_block(
        self, step_index: int, kind: BlockKind, out: list[Event], call_id: str | None = None, name: str | None = None
    ) -> int:
        self._steps[step_index] = kind
        return self._blocks.start(kind, out, key=step_index, id=call_id, name=name)

    def _done(self) -> list[Event]:
        self._finished = True
        if self._held is not None:
            return [self._held]
        return [StreamError("truncated", "upstream sent [DONE] without interaction.completed", 502)]

    # ------------------------------------------------------------------ handlers

    def _step_start(self, data: dict[str, Any], out: list[Event]) -> None:
        idx, step = data.get("index"), data.get("step")
        if not isinstance(idx, int) or not isinstance(step, dict):
            warn_unknown(DIALECT, "step.start without index/step")
            return
        typ = step.get("type")
        kind = _STEP_KINDS.get(typ)
        if idx in self._steps or idx in self._kept:
            return
        if kind is None:
            self._kept[idx] = dict(step)
            return
        if kind == "tool_call":
            self._saw_call = True
            block = self._open_block(
                idx, kind, out, str(step.get("id") or new_id("call_", 8)), str(step.get("name") or "")
            )
            args = step.get("arguments")
            if isinstance(args, dict) and args:
                out.append(ToolArgsDelta(block, orjson.dumps(args).decode()))
        elif kind == "thinking":
            block = self._open_block(idx, kind, out)
            text = summary_text(step.get("summary"))
            if text:
                out.append(ThinkingDelta(block, text))
            sig = step.get("signature")
            if isinstance(sig, str) and sig:
                out.append(SignatureDelta(block, sig))
        else:
            block = self._open_block(idx, kind, out)
            text = content_text(step.get("content"))
            if text:
                out.append(TextDelta(block, text))

    def _block_for(self, idx: int, kind: BlockKind, out: list[Event]) -> int | None:
        """The open block of step ``idx`` when it is of ``kind``; a delta before its step.start
        opens one lazily; a stopped step, or one of another kind, has none."""
        seen = self._steps.get(idx)
        if seen is None:
            return self._open_block(idx, kind, out)
        return self._live.get(idx) if seen == kind else None

    def _delta(self, data: dict[str, Any], out: list[Event]) -> None:
        idx, delta = data.get("index"), data.get("delta")
        if not isinstance(idx, int) or not isinstance(delta, dict):
            warn_unknown(DIALECT, "step.delta without index/delta")
            return
        typ = delta.get("type")
        if typ == "text":  # the hot path: _block_for written out
            text = delta.get("text")
            if isinstance(text, str) and text:
                seen = self._steps.get(idx)
                block = (
                    self._open_block(idx, "text", out)
                    if seen is None
                    else self._live.get(idx)
                    if seen == "text"
                    else None
                )
                if block is not None:
                    out.append(TextDelta(block, text))
        elif typ == "thought_summary":
            text = as_dict(delta.get("content")).get("text")
            if isinstance(text, str) and text:
                block = self._block_for(idx, "thinking", out)
                if block is not None:
                    out.append(ThinkingDelta(block, text))
        elif typ == "thought_signature":
            sig = delta.get("signature")
            if isinstance(sig, str) and sig:
                block = self._block_for(idx, "thinking", out)
                if block is not None:
                    out.append(SignatureDelta(block, sig))
        elif typ == "arguments_delta":
            frag = delta.get("arguments")
            block = self._live.get(idx) if self._steps.get(idx) == "tool_call" else None
            if block is not None and isinstance(frag, str) and frag:
                out.append(ToolArgsDelta(block, frag))
        elif idx in self._kept:  # a server tool step's content (google_search_result …): into the step
            self._kept[idx].update((k, v) for k, v in delta.items() if k != "type")
        else:
            warn_unknown(DIALECT, f"step.delta type {typ!r}")

    def _completed(self, data: dict[str, Any], out: list[Event]) -> None:
        for idx, kept in self._kept.items():  # a step.stop the upstream skipped
            self._blocks.start("opaque", out, key=idx, item=kept, origin=DIALECT)
        self._kept.clear()
        self._blocks.stop_all(out)
        interaction = as_dict(data.get("interaction"))
        usage = convert_usage(interaction.get("usage"))
        if usage is not None:
            self._usage = usage
            out.append(usage)
        status = str(interaction.get("status") or "completed")
        failure = failure_for_status(status, interaction)
        if failure is not None:
            self._finished = True
            out.append(failure)
            return
        self._held = End(map_stop_reason(status, tool_called=self._saw_call), status)

    def _error(self, data: dict[str, Any], out: list[Event]) -> None:
        self._finished = True
        err = as_dict(data.get("error"))
        code = err.get("code")
        raw = code if isinstance(code, str) and code else None
        kind, status = kind_for_code(raw)
        if isinstance(code, int) and not isinstance(code, bool):  # Google's generic {code: 503, status: UNAVAILABLE}
            kind, status = kind_for_status(code), code
            name = err.get("status")
            raw = name.lower() if isinstance(name, str) else None
        out.append(StreamError(kind, str(err.get("message") or "upstream stream error"), status, raw or "internal"))
