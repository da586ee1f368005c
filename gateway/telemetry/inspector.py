"""The stream inspector: the wire of a captured request, both sides, each piece with its time offset.

``[inspector] capture`` picks which requests keep their frames: ``off``, ``errors`` (every request is
recorded while it runs and kept only if it failed), ``all``, or ``sample:F`` (a fraction decided
when the request arrives). Kept captures live in a bounded ring per process (``max_requests``,
oldest dropped first) and are read through ``GET /admin/inspector[/{request_id}]``.

What a capture holds: the request as the caller sent it (headers without any credential, the raw
body) and, per attempt, as the upstream received it (path, the dialect's own headers — the
provider's auth headers are added below this layer and never pass here — and the body); then the
upstream's raw bytes per socket read and the bytes written to the caller, each with its offset in
milliseconds from the request's arrival.

Cost: with capture off the relay pays one boolean check per request (``Inspector.on``) and the
upstream opener one more (``ACTIVE``); nothing per chunk. When capturing, each read and each write
appends one small tuple (bounded by ``max_bytes`` per side).
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson

from gateway.asgi import Scope, Send
from gateway.settings import parse_mode

if TYPE_CHECKING:
    from gateway.dialects.base import UpstreamCall
    from gateway.telemetry.observe import AccessRecord

# Set once any process-local inspector captures: lets the upstream opener skip the context lookup.
ACTIVE = False
CURRENT: ContextVar[Capture | None] = ContextVar("gateway_capture", default=None)

# Header names never captured (lower case), and any name containing one of the fragments below.
_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "x-goog-api-key", "api-key"}
)
_SECRET_FRAGMENTS = ("key", "token", "secret", "auth", "password", "credential", "signature")
_SECRET_QUERY = frozenset({"key", "api_key", "apikey", "token", "access_token"})

MAX_EVENTS = 50_000  # union events kept per capture


def is_secret_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in _SECRET_HEADERS or any(f in lowered for f in _SECRET_FRAGMENTS)


def clean_headers(pairs: Any) -> dict[str, str]:
    """Headers without credentials (names kept, so a reader sees that one was sent)."""
    out: dict[str, str] = {}
    for name, value in pairs:
        name = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        out[name.lower()] = "[redacted]" if is_secret_header(name) else value
    return out


def clean_query(query: dict[str, str]) -> dict[str, str]:
    return {k: ("[redacted]" if k.lower() in _SECRET_QUERY else v) for k, v in query.items()}


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


class Capture:
    """One request's wire, both sides. Filled by the relay (caller side) and attempts.py (upstream)."""

    def __init__(self, request_id: str, dialect: str, path: str, max_bytes: int) -> None:
        self.request_id = request_id
        self.t0 = time.perf_counter()
        self.ts = time.time()
        self.max_bytes = max_bytes
        self.caller: dict[str, Any] = {"dialect": dialect, "path": path}
        self.upstream: list[dict[str, Any]] = []  # one entry per attempt
        self.upstream_frames: list[tuple[float, int, str]] = []  # (ms, attempt index, raw text)
        self.caller_frames: list[tuple[float, str]] = []
        self.events: list[tuple[float, int, Any]] = []  # the union events the upstream's frames decoded to
        self.caller_status: int | None = None
        self.caller_headers: dict[str, str] = {}
        self._up_bytes = 0
        self._out_bytes = 0
        self.truncated = False

    def ms(self) -> float:
        return round((time.perf_counter() - self.t0) * 1000, 2)

    # -- caller side -------------------------------------------------------------------------
    def caller_request(self, scope: Scope, query: dict[str, str], body: bytes) -> None:
        self.caller.update(
            method=scope.get("method", "POST"),
            query=clean_query(query),
            headers=clean_headers(scope.get("headers", [])),
            body=_text(body[: self.max_bytes]),
            at_ms=self.ms(),
        )

    def wrap_send(self, send: Send) -> Send:
        async def capturing_send(message: dict[str, Any]) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                self.caller_status = message.get("status")
                self.caller_headers = clean_headers(message.get("headers", []))
            elif kind == "http.response.body":
                body = message.get("body", b"")
                if body:
                    self._out_bytes += len(body)
                    if self._out_bytes <= self.max_bytes:
                        self.caller_frames.append((self.ms(), _text(body)))
                    else:
                        self.truncated = True
            await send(message)

        return capturing_send

    # -- upstream side -----------------------------------------------------------------------
    def upstream_request(
        self, provider: str, dialect: str, upstream_model: str, call: UpstreamCall, body: bytes | None
    ) -> None:
        self.upstream.append(
            {
                "provider": provider,
                "dialect": dialect,
                "upstream_model": upstream_model,
                "method": call.method,
                "path": call.path,
                "query": clean_query(dict(call.params)),
                "headers": clean_headers(call.headers.items()),
                "body": _text(body[: self.max_bytes]) if body else None,
                "at_ms": self.ms(),
            }
        )

    def upstream_response(self, response: Any) -> Any:
        """Note the status and headers; return a proxy of ``response`` that records every read."""
        if self.upstream:
            self.upstream[-1].update(
                status=response.status_code,
                response_headers=clean_headers(response.headers.items()),
                response_ms=self.ms(),
            )
        return CapturingResponse(response, self, len(self.upstream) - 1)

    def upstream_bytes(self, attempt: int, data: bytes) -> None:
        if not data:
            return
        self._up_bytes += len(data)
        if self._up_bytes <= self.max_bytes:
            self.upstream_frames.append((self.ms(), attempt, _text(data)))
        else:
            self.truncated = True

    def watch_events(self, source: Any) -> None:
        """Record the union events ``source`` hands out (its ``next_batch`` wrapped on this one
        instance only, so an uncaptured request's source is untouched)."""
        attempt = len(self.upstream) - 1
        inner = source.next_batch

        async def next_batch(until_content: bool = False) -> list[Any]:
            batch: list[Any] = await inner(until_content)
            if len(self.events) < MAX_EVENTS:
                at = self.ms()
                self.events += [(at, attempt, e) for e in batch]
            else:
                self.truncated = True
            return batch

        source.next_batch = next_batch

    # -- the kept view -----------------------------------------------------------------------
    def summary(self, record: AccessRecord) -> dict[str, Any]:
        """The record's fields a capture is listed with (copied when the request ends)."""
        return {
            "request_id": self.request_id,
            "ts": self.ts,
            "status": record.status,
            "error_kind": record.error_kind,
            "model": record.model,
            "route": record.route,
            "provider": record.provider,
            "upstream_model": record.upstream_model,
            "caller_dialect": self.caller.get("dialect"),
            "upstream_dialect": record.upstream_dialect,
            "stream": record.stream,
            "duration_ms": record.duration_ms,
        }

    def view(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The whole capture as JSON-ready data: built when it is read, not on the request's path."""
        return {
            **summary,
            "truncated": self.truncated,
            "caller_request": self.caller,
            "upstream_requests": self.upstream,
            "upstream_frames": [{"ms": ms, "attempt": a, "data": d} for ms, a, d in self.upstream_frames],
            "caller_response": {"status": self.caller_status, "headers": self.caller_headers},
            "caller_frames": [{"ms": ms, "data": d} for ms, d in self.caller_frames],
            "events": [
                {"ms": ms, "attempt": a, "type": type(e).__name__, "event": orjson.loads(orjson.dumps(e, default=str))}
                for ms, a, e in self.events
            ],
        }


class CapturingResponse:
    """An upstream (httpx) response that copies every body read into the capture, only while
    capturing: ``stream`` (the raw reads of gateway/upstream/source.py) and ``aiter_bytes`` (error bodies,
    whole replies, compressed streams) hand out the same chunks after recording them."""

    def __init__(self, response: Any, capture: Capture, attempt: int) -> None:
        object.__setattr__(self, "_response", response)
        object.__setattr__(self, "_capture", capture)
        object.__setattr__(self, "_attempt", attempt)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._response, name, value)  # e.g. close_response dropping the spent stream

    @property
    def stream(self) -> Any:
        return _Tee(self._response.stream, self._capture, self._attempt)

    def aiter_bytes(self, *args: Any, **kwargs: Any) -> Any:
        return _tee(self._response.aiter_bytes(*args, **kwargs), self._capture, self._attempt)


class _Tee:
    __slots__ = ("_inner", "_capture", "_attempt")

    def __init__(self, inner: Any, capture: Capture, attempt: int) -> None:
        self._inner, self._capture, self._attempt = inner, capture, attempt

    def __aiter__(self) -> Any:
        return _tee(self._inner, self._capture, self._attempt)


async def _tee(inner: Any, capture: Capture, attempt: int) -> Any:
    iterator = inner.__aiter__()
    try:
        async for chunk in iterator:
            capture.upstream_bytes(attempt, chunk)
            yield chunk
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


def failed(record: AccessRecord) -> bool:
    return record.status >= 400 or record.error_kind is not None


class Inspector:
    """The per-process ring of kept captures."""

    def __init__(self, mode: str, rate: float, max_requests: int, max_bytes: int) -> None:
        global ACTIVE
        self.mode, self.rate = mode, rate
        self.max_requests = max(1, max_requests)
        self.max_bytes = max_bytes
        self.on = mode != "off" and not (mode == "sample" and rate <= 0.0)
        self.ring: OrderedDict[str, tuple[Capture, dict[str, Any]]] = OrderedDict()
        if self.on:
            ACTIVE = True

    def begin(self, request_id: str, dialect: str, path: str) -> Capture | None:
        if self.mode == "sample" and random.random() >= self.rate:
            return None
        return Capture(request_id, dialect, path, self.max_bytes)

    def end(self, capture: Capture, record: Any) -> None:
        if self.mode == "errors" and not failed(record):
            return
        self.ring[capture.request_id] = (capture, capture.summary(record))
        self.ring.move_to_end(capture.request_id)
        while len(self.ring) > self.max_requests:
            self.ring.popitem(last=False)

    def summaries(self) -> list[dict[str, Any]]:
        return [summary for _, summary in reversed(self.ring.values())]

    def get(self, request_id: str) -> dict[str, Any] | None:
        kept = self.ring.get(request_id)
        return kept[0].view(kept[1]) if kept is not None else None


def upstream_replay(capture: dict[str, Any]) -> bytes:
    """The upstream body of the last attempt as one file: the format of ``captures/<dialect>/*.sse``
    (tests/support/fake_upstream.py replays it as is)."""
    frames = capture["upstream_frames"]
    last = max((f["attempt"] for f in frames), default=0)
    return "".join(f["data"] for f in frames if f["attempt"] == last).encode()


def from_settings(settings: Any) -> Inspector:
    """The inspector of ``[inspector]``; unset ``capture`` means ``errors`` when the console is on
    (``[admin]`` set) and the gateway listens on loopback only, else ``off``."""
    conf = settings.inspector
    capture = conf.capture
    if capture is None:
        loopback = settings.server.host in ("127.0.0.1", "localhost", "::1")
        capture = "errors" if loopback and settings.admin.resolved_key() else "off"
    mode, rate = parse_mode(capture)
    return Inspector(mode, rate, conf.max_requests, conf.max_bytes)
