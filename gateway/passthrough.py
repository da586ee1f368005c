"""The same-dialect fast path: forward the upstream's own SSE frames to the caller.

When caller and upstream speak the same dialect, re-encoding every event is wasted work and
loses what the event union does not model (citations, server-tool blocks, annotations …). The
upstream's frames are forwarded with their payloads untouched while the usual decoder still reads
usage, the end and errors on the side. Three things are still done:

* the model name is rewritten to the one the caller asked for when the route renamed it;
* an OpenAI chat usage-only chunk is dropped when the caller did not ask for usage (the gateway
  always asks upstream, and clients that index ``choices[0]`` break on ``"choices": []``);
* a stream the upstream cut (or ended without its terminator) still gets an in-dialect error tail;
* frames that carry the stop reason (Anthropic ``message_delta``, an OpenAI chat chunk with a
  ``finish_reason`` and the usage chunk after it) are held back until the terminator arrives: some
  clients (Claude Code) take a stop reason as the end, so a stream cut after it must not show one.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.dialects.base import StreamEncoder
from gateway.events import End, Event, MessageStart, StreamError
from gateway.sse import SSEFrame, encode_frame


_EMPTY_CHOICES = re.compile(r'"choices"\s*:\s*\[\s*\]')
_NULL_USAGE = re.compile(r'"usage"\s*:\s*null')
_NULL_FINISH = re.compile(r'"finish_reason"\s*:\s*null')


class FramePassthrough:
    __slots__ = ("_dialect", "_caller_model", "_caller_json", "_upstream_json", "_drop_usage", "_encoder", "_last_seq", "_response", "_held")

    def __init__(self, dialect: str, caller_model: str, include_usage: bool, encoder: StreamEncoder) -> None:
        self._dialect = dialect
        self._caller_model = caller_model
        self._caller_json = orjson.dumps(caller_model).decode()
        self._upstream_json: str | None = None
        self._drop_usage = dialect == "openai-chat" and not include_usage
        self._encoder = encoder
        self._last_seq = -1  # Responses: the last sequence_number forwarded
        self._response: dict[str, Any] | None = None  # Responses: the response object of response.created
        self._held: list[bytes] = []  # frames after a stop reason, waiting for the terminator

    def render(self, frames: list[tuple[SSEFrame, list[Event]]]) -> bytes:
        out: list[bytes] = []
        for frame, events in frames:
            for event in events:
                if type(event) is MessageStart and event.model and event.model != self._caller_model:
                    self._upstream_json = orjson.dumps(event.model).decode()
            data = frame.data
            if self._drop_usage and '"usage"' in data and _EMPTY_CHOICES.search(data) and not _NULL_USAGE.search(data):
                continue
            if self._upstream_json is not None and self._upstream_json in data:
                data = data.replace(self._upstream_json, self._caller_json)
            elif '"model":""' in data:  # Azure's filter-annotation chunks carry an empty model
                data = data.replace('"model":""', '"model":' + self._caller_json, 1)
            if self._dialect == "openai-responses":
                self._note_responses(frame.event, data)
            encoded = encode_frame(data, frame.event)
            if self._held or self._carries_stop(frame.event, data):
                self._held.append(encoded)
                if any(type(e) is End for e in events):  # the terminator: the held frames are true
                    out += self._held
                    self._held = []
                continue
            out.append(encoded)
        return b"".join(out)

    def _carries_stop(self, event: str | None, data: str) -> bool:
        if self._dialect == "anthropic":
            return event == "message_delta"
        if self._dialect == "openai-chat":
            return '"finish_reason"' in data and '"finish_reason":null' not in data and not _NULL_FINISH.search(data)
        return False

    def _note_responses(self, event: str | None, data: str) -> None:
        if event == "response.created" or self._response is None and '"response.created"' in data[:40]:
            try:
                self._response = orjson.loads(data).get("response")
            except orjson.JSONDecodeError:
                self._response = None
        marker = data.rfind('"sequence_number":')
        if marker >= 0:
            digits = data[marker + 18 :].lstrip()
            end = 0
            while end < len(digits) and digits[end].isdigit():
                end += 1
            if end:
                self._last_seq = int(digits[:end])

    def error_tail(self, err: StreamError) -> bytes:
        """The in-dialect error frames for a stream the gateway had to cut short."""
        self._held = []  # a stop reason without its terminator is dropped: the stream failed
        if self._dialect != "openai-responses":
            return self._encoder.encode(err)
        # Responses: continue the upstream's numbering and close with response.failed.
        seq = self._last_seq + 1
        code = err.raw or ("server_error" if err.kind != "timeout" else "timeout")
        error_event = {"type": "error", "sequence_number": seq, "error": {"type": err.kind, "code": code, "message": err.message, "param": None}, "code": code, "message": err.message, "param": None}
        response = dict(self._response or {})
        response.update({"status": "failed", "error": {"code": code, "message": err.message}, "model": self._caller_model})
        failed = {"type": "response.failed", "sequence_number": seq + 1, "response": response}
        return encode_frame(orjson.dumps(error_event), "error") + encode_frame(orjson.dumps(failed), "response.failed")
