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
* where the dialect reports usage in a chunk of its own (``UsageChunks``: OpenAI chat's
  ``choices: []`` chunk), that chunk is dropped when the caller did not ask for usage (the gateway
  always asks upstream); when it did ask (or ``stream_usage = "always"``) and the upstream put its
  usage elsewhere, the dialect's usage chunk with those numbers is written before the terminator.
"""

from __future__ import annotations

from gateway.dialects.base import StreamEncoder
from gateway.dialects.registry import codec_for
from gateway.events import End, Event, StreamError, Usage
from gateway.framing.sse import SSEFrame, encode_frame
from gateway.relay.model_rename import ModelRenamer


class FramePassthrough:
    __slots__ = (
        "_caller_model",
        "_rename",
        "_carries_stop",
        "_tail",
        "_drop_usage",
        "_usage",
        "_encoder",
        "_held",
        "_want_usage",
        "_last_chunk",
    )

    def __init__(self, dialect: str, caller_model: str, include_usage: bool, encoder: StreamEncoder) -> None:
        rules = codec_for(dialect).fast_path
        self._caller_model = caller_model
        self._rename = ModelRenamer(rules.model, caller_model).rename
        self._carries_stop = rules.carries_stop
        self._tail = rules.tail() if rules.tail is not None else None
        self._usage = rules.usage  # the dialect's own usage chunk, if it has one
        self._drop_usage = self._usage is not None and not include_usage
        self._want_usage = self._usage is not None and include_usage  # until a usage chunk went out
        self._last_chunk = ""  # the latest chunk forwarded (for the ids of a usage chunk written here)
        self._encoder = encoder
        self._held: list[bytes] = []  # frames after a stop reason, waiting for the terminator

    def render(self, frames: list[tuple[SSEFrame, list[Event]]]) -> bytes:
        out: list[bytes] = []
        rename, carries_stop, tail = self._rename, self._carries_stop, self._tail
        for frame, events in frames:
            data = frame.data
            if (self._drop_usage or self._want_usage) and self._usage is not None and self._usage.is_usage_chunk(data):
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
        """The dialect's usage chunk the upstream did not send, from the usage it did report
        (decoded beside the frames); nothing when it reported none, rather than zeros."""
        usage = next((e for e in events if type(e) is Usage), None)
        if usage is None or (usage.input is None and usage.output is None) or self._usage is None:
            return b""
        return self._usage.usage_chunk(self._last_chunk, self._caller_model, usage)

    def error_tail(self, err: StreamError) -> bytes:
        """The in-dialect error frames for a stream the gateway had to cut short."""
        self._held = []  # a stop reason without its terminator is dropped: the stream failed
        if self._tail is not None:
            return self._tail.error_frames(err, self._caller_model)
        return self._encoder.encode(err)
