"""The same-dialect fast path: forward the upstream's own SSE frames to the caller.

When caller and upstream speak the same dialect, re-encoding every event is wasted work and
loses what the event union does not model (citations, server-tool blocks, annotations …). The
upstream's frames are forwarded with their payloads untouched while the usual decoder still reads
usage, the end and errors on the side. What is still done follows the dialect's ``FastPathRules``
(declared in its package, ``gateway/dialects/<name>/fast_path.py``):

* the model is renamed to the one the caller asked for, at the dialect's ``ModelPlace`` only
  (``model_rename.py``): nothing else in a frame changes, whatever the model is called;
* frames that carry the stop reason (``carries_stop``) and every frame after them are held back
  until the terminator arrives: some clients (Claude Code) take a stop reason as the end, so a
  stream cut after it must not show one;
* a stream the upstream cut (or ended without its terminator) still gets an in-dialect error
  tail: the dialect's ``FastPathTail`` when it declares one, else the encoder's error frame;
* an OpenAI chat usage-only chunk is dropped when the caller did not ask for usage (the gateway
  always asks upstream, and clients that index ``choices[0]`` break on ``"choices": []``); when
  it did ask (or ``stream_usage = "always"``) and the upstream put its usage elsewhere (on the
  finish chunk, as some compatible servers do), a ``choices: []`` usage chunk with those numbers
  is written before ``data: [DONE]``, so the stream ends as OpenAI's does.
"""

from __future__ import annotations

import re

import orjson

from gateway.dialects.base import StreamEncoder
from gateway.dialects.openai_chat.usage import render_usage as to_chat
from gateway.dialects.registry import codec_for
from gateway.events import End, Event, StreamError, Usage
from gateway.model_rename import ModelRenamer
from gateway.sse import SSEFrame, encode_frame


_EMPTY_CHOICES = re.compile(r'"choices"\s*:\s*\[\s*\]')
_NULL_USAGE = re.compile(r'"usage"\s*:\s*null')


def _is_usage_chunk(data: str) -> bool:
    """An OpenAI chat ``choices: []`` chunk with a usage object. The common chunk (compact JSON with
    ``"usage":null``) is told apart by two substring checks; the regexes only confirm the rest."""
    if '"usage"' not in data or '"usage":null' in data:
        return False
    return _EMPTY_CHOICES.search(data) is not None and _NULL_USAGE.search(data) is None


class FramePassthrough:
    __slots__ = ("_caller_model", "_rename", "_carries_stop", "_tail", "_drop_usage", "_encoder", "_held", "_want_usage", "_last_chunk")

    def __init__(self, dialect: str, caller_model: str, include_usage: bool, encoder: StreamEncoder) -> None:
        rules = codec_for(dialect).fast_path
        self._caller_model = caller_model
        self._rename = ModelRenamer(rules.model, caller_model).rename
        self._carries_stop = rules.carries_stop
        self._tail = rules.tail() if rules.tail is not None else None
        self._drop_usage = dialect == "openai-chat" and not include_usage
        self._want_usage = dialect == "openai-chat" and include_usage  # until a usage chunk went out
        self._last_chunk = ""  # OpenAI chat: the latest chunk forwarded (id, created, model of a usage chunk)
        self._encoder = encoder
        self._held: list[bytes] = []  # frames after a stop reason, waiting for the terminator

    def render(self, frames: list[tuple[SSEFrame, list[Event]]]) -> bytes:
        out: list[bytes] = []
        rename, carries_stop, tail = self._rename, self._carries_stop, self._tail
        for frame, events in frames:
            data = frame.data
            if (self._drop_usage or self._want_usage) and _is_usage_chunk(data):
                if self._drop_usage:
                    continue
                self._want_usage = False  # the upstream's own usage chunk goes out
            data = rename(data)
            if tail is not None:
                tail.note(frame.event, data)
            encoded = encode_frame(data, frame.event)
            if self._want_usage:
                if events and type(events[-1]) is End:
                    encoded = self._usage_chunk(events) + encoded
                else:
                    self._last_chunk = data
            if self._held or carries_stop(frame.event, data):
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

    def error_tail(self, err: StreamError) -> bytes:
        """The in-dialect error frames for a stream the gateway had to cut short."""
        self._held = []  # a stop reason without its terminator is dropped: the stream failed
        if self._tail is not None:
            return self._tail.error_frames(err, self._caller_model)
        return self._encoder.encode(err)
