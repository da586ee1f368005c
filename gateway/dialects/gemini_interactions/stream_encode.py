"""Events -> the Interactions SSE stream a google-genai ``client.interactions`` caller expects.

Sequence: ``interaction.created`` (status ``in_progress``), ``interaction.status_update``, then per
block one step: ``step.start`` (``index`` counts steps from 0 in the order they start) ->
``step.delta``* -> ``step.stop``; then ``interaction.completed`` (status + usage, no steps) and
``event: done`` / ``data: [DONE]``. A ``StreamError`` becomes ``event: error`` ``{error: {code,
message}}`` and the stream ends there (no ``[DONE]``: both SDKs stop on it either way) — except a
cancellation (kind ``cancelled``): that is a status of the interaction, not a failure, so its
stream ends like any finished one, in the interaction's own terms: open steps stop, then
``interaction.status_update`` and ``interaction.completed`` say ``cancelled`` (with the usage so
far), then ``done``. A caller still reading (or following through a resume) can tell it from a cut.

Thinking: a ``thought`` step carries ``thought_summary`` deltas (only when the caller did not ask
``thinking_summaries: none``) and ONE ``thought_signature`` delta written just before its
``step.stop`` (signatures may arrive in pieces). ``redacted_thinking`` blocks have no
Interactions form and are dropped.

Event ids: every event carries ``event_id`` = ``event_id_for(n)`` where ``n`` counts this
stream's events from ``start`` (``evt_<n>``). The relay stores each frame under ``n`` (see
``parse_event_id``) so a resume with ``last_event_id`` can replay what follows it.
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
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.sse import COMMENT_KEEPALIVE

from .errors import code_for
from .stop_reasons import render_stop_reason
from .usage import render_usage as usage_to_interactions

DIALECT = "gemini-interactions"

EVENT_ID_PREFIX = "evt_"
DONE_FRAME = b"event: done\ndata: [DONE]\n\n"


def event_id_for(n: int) -> str:
    """The ``event_id`` of the ``n``-th event of a stream (deterministic: the store keys on ``n``)."""
    return f"{EVENT_ID_PREFIX}{n}"


def parse_event_id(event_id: str | None) -> int | None:
    """The counter inside an ``event_id`` this encoder made; ``None`` for anything else."""
    if not event_id or not event_id.startswith(EVENT_ID_PREFIX):
        return None
    digits = event_id[len(EVENT_ID_PREFIX) :]
    return int(digits) if digits.isascii() and digits.isdigit() else None


def iso_now(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


class _Step:
    __slots__ = ("kind", "index", "prefix", "signature", "open")

    def __init__(self, kind: str, index: int, prefix: bytes) -> None:
        self.kind = kind
        self.index = index
        self.prefix = prefix  # pre-encoded ``step.delta`` frame head up to the delta's payload
        self.signature: str | None = None
        self.open = True


_DELTA_HEAD = {
    "text": '{{"event_type":"step.delta","index":{i},"delta":{{"type":"text","text":',
    "thinking": '{{"event_type":"step.delta","index":{i},"delta":{{"type":"thought_summary","content":{{"type":"text","text":',
    "tool_call": '{{"event_type":"step.delta","index":{i},"delta":{{"type":"arguments_delta","arguments":',
}
_DELTA_TAIL = {"text": b'},"event_id":"', "thinking": b'}},"event_id":"', "tool_call": b'},"event_id":"'}


class InteractionsStreamEncoder:
    """One caller stream. ``interaction_id`` (optional) fixes the id shown to the caller, e.g. the
    store's id for this interaction; ``start`` is the first event counter (a continuation of a
    stored stream goes on numbering where it stopped)."""

    def __init__(self, ctx: EncodeContext, interaction_id: str | None = None, start: int = 0) -> None:
        self._ctx = ctx
        self.interaction_id = interaction_id or ctx.response_id or new_id("v1_")
        self.next_seq = start  # counter of the next event written
        self.created = iso_now()
        self._started = False
        self._done = False
        self._steps: dict[int, _Step] = {}  # event block index -> step
        self._next_step = 0
        self._usage: Usage | None = None
        self.status = "in_progress"  # the interaction's status as written so far
        th = ctx.request.thinking
        self._summaries = not (th is not None and th.include_thoughts is False)

    @property
    def last_event_id(self) -> str | None:
        return event_id_for(self.next_seq - 1) if self.next_seq else None

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
        out = self._start()
        if type(event) is BlockStart:
            return out + self._step_start(event)
        if type(event) is BlockStop:
            step = self._steps.get(event.index)
            return out + (self._step_stop(step) if step is not None else b"")
        if type(event) is SignatureDelta:
            step = self._steps.get(event.index)
            if step is not None and step.kind == "thinking":
                step.signature = (step.signature or "") + event.signature
            return out
        if type(event) is Usage:
            self._usage = event
            return out
        if type(event) is End:
            return out + self._end(event)
        if type(event) is StreamError:
            return out + self._error(event)
        return out  # MessageStart: the created frames are all it makes

    # ------------------------------------------------------------------ frames

    def _frame(self, event_type: str, payload: dict[str, Any]) -> bytes:
        payload["event_type"] = event_type
        payload["event_id"] = event_id_for(self.next_seq)
        self.next_seq += 1
        return b"event: " + event_type.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def shell(self, status: str) -> dict[str, Any]:
        """The partial interaction resource of lifecycle events."""
        return {
            "id": self.interaction_id,
            "status": status,
            "object": "interaction",
            "model": self._ctx.model,
            "created": self.created,
        }

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._frame("interaction.created", {"interaction": self.shell("in_progress")}) + self._frame(
            "interaction.status_update", {"interaction_id": self.interaction_id, "status": "in_progress"}
        )

    def _step_start(self, ev: BlockStart) -> bytes:
        if ev.item is not None and same(ev.origin, DIALECT) and ev.index not in self._steps:
            i = self._next_step  # the upstream's own step, verbatim (its deltas: nothing to add)
            self._next_step += 1
            self._steps[ev.index] = _Step("item", i, b"")
            return self._frame("step.start", {"index": i, "step": ev.item})
        if ev.kind == "opaque":
            drop_output(self._ctx, ev.item)
            return b""
        if ev.index in self._steps or ev.kind not in _DELTA_HEAD:
            return b""  # redacted_thinking: no Interactions form
        i = self._next_step
        self._next_step += 1
        self._steps[ev.index] = _Step(
            ev.kind, i, b"event: step.delta\ndata: " + _DELTA_HEAD[ev.kind].format(i=i).encode()
        )
        if ev.kind == "text":
            step: dict[str, Any] = {"type": "model_output"}
        elif ev.kind == "thinking":
            step = {"type": "thought"}
        else:
            step = {"type": "function_call", "id": ev.id or new_id("call_", 8), "name": ev.name or "", "arguments": {}}
        return self._frame("step.start", {"index": i, "step": step})

    def _delta(self, index: int, text: str) -> bytes:
        step = self._steps.get(index)
        if (
            step is None
            or not step.open
            or not text
            or step.kind == "item"
            or (step.kind == "thinking" and not self._summaries)
        ):
            return b""
        n = self.next_seq
        self.next_seq += 1
        return (
            step.prefix
            + orjson.dumps(text)
            + _DELTA_TAIL[step.kind]
            + EVENT_ID_PREFIX.encode()
            + str(n).encode()
            + b'"}\n\n'
        )

    def _step_stop(self, step: _Step) -> bytes:
        if not step.open:
            return b""
        step.open = False
        out = b""
        if step.signature:
            sig = signatures.for_caller(DIALECT, self._ctx.upstream_dialect, step.signature)
            out = self._frame(
                "step.delta", {"index": step.index, "delta": {"type": "thought_signature", "signature": sig}}
            )
        return out + self._frame("step.stop", {"index": step.index})

    def _close_steps(self) -> bytes:
        return b"".join(self._step_stop(s) for s in self._steps.values() if s.open)

    def _end(self, end: End) -> bytes:
        out = self._close_steps()
        self._done = True
        self.status = render_stop_reason(end, self._ctx.upstream_dialect == DIALECT)
        obj = self.shell(self.status)
        obj["usage"] = usage_to_interactions(self._usage)
        obj["updated"] = iso_now()
        return out + self._frame("interaction.completed", {"interaction": obj}) + DONE_FRAME

    def _cancelled(self) -> bytes:
        out = self._close_steps()
        self._done = True
        self.status = "cancelled"
        obj = self.shell("cancelled")
        obj["usage"] = usage_to_interactions(self._usage)
        obj["updated"] = iso_now()
        update = self._frame(
            "interaction.status_update", {"interaction_id": self.interaction_id, "status": "cancelled"}
        )
        return out + update + self._frame("interaction.completed", {"interaction": obj}) + DONE_FRAME

    def _error(self, err: StreamError) -> bytes:
        if err.kind == "cancelled":
            return self._cancelled()
        self._done = True
        self.status = "failed"
        code = code_for(err.kind, err.raw, self._ctx.upstream_dialect)
        return self._frame("error", {"error": {"code": code, "message": err.message}})
