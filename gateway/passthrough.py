"""The same-dialect fast path: forward the upstream's own SSE frames to the caller.

When caller and upstream speak the same dialect, re-encoding every event is wasted work and
loses what the event union does not model (citations, server-tool blocks, annotations …). The
upstream's frames are forwarded with their payloads untouched while the usual decoder still reads
usage, the end and errors on the side. Three things are still done:

* the model name is rewritten to the one the caller asked for when the route renamed it;
* an OpenAI chat usage-only chunk is dropped when the caller did not ask for usage (the gateway
  always asks upstream, and clients that index ``choices[0]`` break on ``"choices": []``); when
  it did ask (or ``stream_usage = "always"``) and the upstream put its usage elsewhere (on the
  finish chunk, as some compatible servers do), a ``choices: []`` usage chunk with those numbers
  is written before ``data: [DONE]``, so the stream ends as OpenAI's does;
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
from gateway.dialects.openai_chat.usage import to_chat
from gateway.events import End, Event, MessageStart, StreamError, Usage
from gateway.sse import SSEFrame, encode_frame


_EMPTY_CHOICES = re.compile(r'"choices"\s*:\s*\[\s*\]')
_NULL_USAGE = re.compile(r'"usage"\s*:\s*null')
_NULL_FINISH = re.compile(r'"finish_reason"\s*:\s*null')


def _is_usage_chunk(data: str) -> bool:
    """An OpenAI chat ``choices: []`` chunk with a usage object. The common chunk (compact JSON with
    ``"usage":null``) is told apart by two substring checks; the regexes only confirm the rest."""
    if '"usage"' not in data or '"usage":null' in data:
        return False
    return _EMPTY_CHOICES.search(data) is not None and _NULL_USAGE.search(data) is None


class FramePassthrough:
    __slots__ = (
        "_dialect", "_caller_model", "_caller_json", "_upstream_json", "_drop_usage", "_encoder", "_last_seq", "_response", "_held",
        "_want_usage", "_last_chunk",
    )

    def __init__(self, dialect: str, caller_model: str, include_usage: bool, encoder: StreamEncoder) -> None:
        self._dialect = dialect
        self._caller_model = caller_model
        self._caller_json = orjson.dumps(caller_model).decode()
        self._upstream_json: str | None = None
        self._drop_usage = dialect == "openai-chat" and not include_usage
        self._want_usage = dialect == "openai-chat" and include_usage  # until a usage chunk went out
        self._last_chunk = ""  # OpenAI chat: the latest chunk forwarded (id, created, model of a usage chunk)
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
            if (self._drop_usage or self._want_usage) and _is_usage_chunk(data):
                if self._drop_usage:
                    continue
                self._want_usage = False  # the upstream's own usage chunk goes out
            if self._upstream_json is not None and self._upstream_json in data:
                data = data.replace(self._upstream_json, self._caller_json)
            elif '"model":""' in data:  # Azure's filter-annotation chunks carry an empty model
                data = data.replace('"model":""', '"model":' + self._caller_json, 1)
            if self._dialect == "openai-responses":
                self._note_responses(frame.event, data)
            encoded = encode_frame(data, frame.event)
            if self._want_usage:
                if events and type(events[-1]) is End:
                    encoded = self._usage_chunk(events) + encoded
                else:
                    self._last_chunk = data
            if self._held or self._carries_stop(frame.event, data):
                self._held.append(encoded)
                if any(type(e) is End for e in events):  # the terminator: the held frames are true
                    out += self._held
                    self._held = []
                continue
            out.append(encoded)
        return b"".join(out)

    def _usage_chunk(self, events: list[Event]) -> bytes:
        """The ``choices: []`` usage chunk the upstream did not send, from the usage it did report
        (decoded beside the frames); nothing when it reported none, rather than zeros."""
        usage = next((e for e in events if type(e) is Usage), None)
        if usage is None or (usage.input is None and usage.output is None):
            return b""
        try:
            last = orjson.loads(self._last_chunk) if self._last_chunk else {}
        except orjson.JSONDecodeError:
            last = {}
        last = last if isinstance(last, dict) else {}
        chunk = {"id": last.get("id"), "object": "chat.completion.chunk", "created": last.get("created"), "model": self._caller_model, "choices": [], "usage": to_chat(usage)}
        return encode_frame(orjson.dumps(chunk))

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
