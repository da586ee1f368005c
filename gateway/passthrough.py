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
  always asks upstream, and clients that index ``choices[0]`` break on ``"choices": []``).
"""

from __future__ import annotations

import re

from gateway.dialects.base import StreamEncoder
from gateway.dialects.registry import codec_for
from gateway.events import End, Event, StreamError
from gateway.model_rename import ModelRenamer
from gateway.sse import SSEFrame, encode_frame


_EMPTY_CHOICES = re.compile(r'"choices"\s*:\s*\[\s*\]')
_NULL_USAGE = re.compile(r'"usage"\s*:\s*null')


class FramePassthrough:
    __slots__ = ("_caller_model", "_rename", "_carries_stop", "_tail", "_drop_usage", "_encoder", "_held")

    def __init__(self, dialect: str, caller_model: str, include_usage: bool, encoder: StreamEncoder) -> None:
        rules = codec_for(dialect).fast_path
        self._caller_model = caller_model
        self._rename = ModelRenamer(rules.model, caller_model).rename
        self._carries_stop = rules.carries_stop
        self._tail = rules.tail() if rules.tail is not None else None
        self._drop_usage = dialect == "openai-chat" and not include_usage
        self._encoder = encoder
        self._held: list[bytes] = []  # frames after a stop reason, waiting for the terminator

    def render(self, frames: list[tuple[SSEFrame, list[Event]]]) -> bytes:
        out: list[bytes] = []
        rename, carries_stop, tail = self._rename, self._carries_stop, self._tail
        for frame, events in frames:
            data = frame.data
            if self._drop_usage and '"usage"' in data and _EMPTY_CHOICES.search(data) and not _NULL_USAGE.search(data):
                continue
            data = rename(data)
            if tail is not None:
                tail.note(frame.event, data)
            encoded = encode_frame(data, frame.event)
            if self._held or carries_stop(frame.event, data):
                self._held.append(encoded)
                if any(type(e) is End for e in events):  # the terminator: the held frames are true
                    out += self._held
                    self._held = []
                continue
            out.append(encoded)
        return b"".join(out)

    def error_tail(self, err: StreamError) -> bytes:
        """The in-dialect error frames for a stream the gateway had to cut short."""
        self._held = []  # a stop reason without its terminator is dropped: the stream failed
        if self._tail is not None:
            return self._tail.error_frames(err, self._caller_model)
        return self._encoder.encode(err)
