"""Where a Responses stream names its model, and how a cut one ends (the same-dialect fast path).

The model is ``response.model`` in the events that carry the response object
(``response.created``, ``response.in_progress``, ``response.completed`` / ``incomplete`` /
``failed``). The stop is stated by that last event, right before the body ends: nothing is held.

A stream the gateway cuts short continues the upstream's own numbering: ``error`` and
``response.failed`` take the next ``sequence_number``s, and ``response.failed`` carries the
response object of ``response.created`` (the SDKs check both).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.base import FastPathRules, ModelPlace
from gateway.events import StreamError
from gateway.framing.sse import encode_frame


class ResponsesTail:
    __slots__ = ("_last_seq", "_response")

    def __init__(self) -> None:
        self._last_seq = -1  # the last sequence_number forwarded
        self._response: dict[str, Any] | None = None  # the response object of response.created

    def note(self, event: str | None, data: str) -> None:
        if event == "response.created" or (self._response is None and '"response.created"' in data[:40]):
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

    def error_frames(self, err: StreamError, caller_model: str) -> bytes:
        seq = self._last_seq + 1
        code = err.raw or ("server_error" if err.kind != "timeout" else "timeout")
        error_event = {
            "type": "error",
            "sequence_number": seq,
            "error": {"type": err.kind, "code": code, "message": err.message, "param": None},
            "code": code,
            "message": err.message,
            "param": None,
        }
        response = dict(self._response or {})
        response.update({"status": "failed", "error": {"code": code, "message": err.message}, "model": caller_model})
        failed = {"type": "response.failed", "sequence_number": seq + 1, "response": response}
        return encode_frame(orjson.dumps(error_event), "error") + encode_frame(orjson.dumps(failed), "response.failed")


RULES = FastPathRules(ModelPlace("model", parent="response"), tail=ResponsesTail)
