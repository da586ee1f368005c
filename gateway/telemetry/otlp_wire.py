"""OTLP/protobuf bytes for a batch of spans, written directly: the export thread's largest cost.

The OTLP exporter's own encoder builds a protobuf message object per span, per attribute and per
attribute value (``opentelemetry.exporter.otlp.proto.common``), then serializes them: measured
~160 µs of the export thread's CPU per request (two spans, ~30 attributes) on the bench VM, most of
tracing's whole cost per request (bench/README.md, "second pass"). This writes the same
``ExportTraceServiceRequest`` wire bytes (opentelemetry-proto ``trace.proto``, ``common.proto``)
straight from the gateway's own plain spans (``encode_plain``: what its batcher queues, so no SDK object
is made per span at all) or from ``ReadableSpan``s (``encode_spans``), one writer for both (``_span_bytes``),
with each attribute key's, resource's and scope's bytes made once. ``ReadableSpan``s carrying events or
links (the gateway makes none) go through the SDK's encoder. tests/telemetry/test_otlp_wire.py parses
both encodings with the generated classes and compares.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

_Q = struct.Struct("<Q").pack
_I = struct.Struct("<I").pack
_D = struct.Struct("<d").pack
_SMALL = [bytes([n]) for n in range(128)]
_FLAGS = (b"\x85\x01" + _I(0x100), b"\x85\x01" + _I(0x300))  # span.flags: has-is-remote, is-remote
_STATUS_EMPTY = b"\x7a\x00"


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag + _varint(len(payload)) + payload


def _any(value: Any) -> bytes:
    """An ``AnyValue``'s bytes (as the SDK's ``_encode_value`` chooses the member)."""
    if value is None:
        return b""
    if value is True:
        return b"\x10\x01"
    if value is False:
        return b"\x10\x00"
    if isinstance(value, str):
        return _ld(b"\x0a", value.encode("utf-8", "surrogatepass"))
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _D(value)
    if isinstance(value, bytes):
        return _ld(b"\x3a", value)
    if isinstance(value, Sequence):
        return _ld(b"\x2a", b"".join([_ld(b"\x0a", _any(v)) for v in value]))
    if isinstance(value, Mapping):
        return _ld(b"\x32", b"".join([_ld(b"\x0a", _key_value(str(k), v)) for k, v in value.items()]))
    raise TypeError(f"invalid attribute value type {type(value).__name__}")


_KEYS: dict[str, bytes] = {}


def _key_head(key: str) -> bytes:
    """A ``KeyValue``'s key field, made once per key."""
    head = _KEYS.get(key)
    if head is None:
        head = _ld(b"\x0a", key.encode())
        if len(_KEYS) < 4096:  # attribute keys are a fixed set; a bound against a surprise
            _KEYS[key] = head
    return head


def _key_value(key: str, value: Any) -> bytes:
    return _key_head(key) + _ld(b"\x12", _any(value))


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    """A resource's or scope's attributes (made once per process: ``_once``)."""
    if not attributes:
        return b""
    return b"".join([_ld(tag, _key_value(k, v)) for k, v in attributes.items()])


# span attribute key -> value -> (its type, the whole ``Span.attributes`` field's bytes). Most values
# repeat (method, route, model, provider, status); ids and token counts do not: a key keeps its first
# _PER_KEY values and the rest are written each time, so a unique one never pushes a repeating one out.
_FIELDS: dict[str, dict[Any, tuple[type, bytes]]] = {}
_PER_KEY = 64
_CACHED = (str, int, bool)


def _field(key: str, value: Any) -> bytes:
    """A ``Span.attributes`` field (tag 9): a ``KeyValue`` whose ``AnyValue`` is written in line for a string."""
    head = _key_head(key)
    if type(value) is str:
        data = value.encode("utf-8", "surrogatepass")
        any_value = b"\x0a" + _varint(len(data)) + data
    else:
        any_value = _any(value)
    kv = head + b"\x12" + _varint(len(any_value)) + any_value
    return b"\x4a" + _varint(len(kv)) + kv


def _span_attributes(attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    out = []
    fields = _FIELDS
    for k, v in attributes.items():
        kind = type(v)
        if kind not in _CACHED:
            out.append(_field(k, v))
            continue
        values = fields.get(k)
        if values is None:
            values = {}
            if len(fields) < 4096:
                fields[k] = values
        hit = values.get(v)
        if hit is not None and hit[0] is kind:  # 1 == True: the type tells them apart
            out.append(hit[1])
            continue
        field = _field(k, v)
        if len(values) < _PER_KEY or hit is not None:
            values[v] = (kind, field)
        out.append(field)
    return b"".join(out)


def _span_bytes(
    trace_id: int,
    span_id: int,
    trace_state: str,
    parent_id: int,
    remote: bool,
    name: str,
    kind: int,
    start: int,
    end: int,
    attributes: Mapping[str, Any] | None,
    dropped: int,
    status: bytes,
    base: Any = None,
) -> bytes:
    """One ``Span`` (``kind`` as OTLP numbers it, ``status`` its field's bytes) inside ``ScopeSpans``."""
    parts = [b"\x0a\x10", trace_id.to_bytes(16, "big"), b"\x12\x08", span_id.to_bytes(8, "big")]
    if trace_state:
        parts.append(_ld(b"\x1a", trace_state.encode()))
    if parent_id:
        parts += (b"\x22\x08", parent_id.to_bytes(8, "big"))
    parts.append(_ld(b"\x2a", name.encode("utf-8", "surrogatepass")))
    parts.append(b"\x30" + _SMALL[kind])
    if start:
        parts.append(b"\x39" + _Q(start))
    if end:
        parts.append(b"\x41" + _Q(end))
    if base is None:
        parts.append(_span_attributes(attributes))
    elif attributes and not base.attributes.keys().isdisjoint(attributes):  # a base key set on the span: it wins
        parts.append(_span_attributes({**base.attributes, **attributes}))
    else:
        wire = base.wire
        if wire is None:
            wire = base.wire = _span_attributes(base.attributes)  # once per base (traces.Base)
        parts += (wire, _span_attributes(attributes))
    if dropped:
        parts.append(b"\x50" + _varint(dropped))
    parts.append(status)
    parts.append(_FLAGS[1 if remote else 0])
    return _ld(b"\x12", b"".join(parts))  # ScopeSpans.spans


def _status(code: int, description: str | None) -> bytes:
    if not (description or code):
        return _STATUS_EMPTY
    body = b""
    if description:
        body += _ld(b"\x12", description.encode("utf-8", "surrogatepass"))
    if code:
        body += b"\x18" + _SMALL[code]
    return _ld(b"\x7a", body)


def _trace_state(state: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in state.items()) if state else ""


def _span(span: Any) -> bytes:
    ctx = span.get_span_context()
    parent = span.parent
    status = span.status
    return _span_bytes(
        ctx.trace_id,
        ctx.span_id,
        _trace_state(ctx.trace_state),
        parent.span_id if parent is not None else 0,
        parent is not None and parent.is_remote,
        span.name,
        span.kind.value + 1,  # the SDK's SpanKind (INTERNAL = 0) -> OTLP's (UNSPECIFIED = 0)
        span.start_time or 0,
        span.end_time or 0,
        span.attributes,
        span.dropped_attributes,
        b"" if status is None else _status(status.status_code.value, status.description),
    )


_MADE: dict[int, tuple[Any, bytes]] = {}  # id(resource or scope) -> (it, its bytes); a process has one or two


def _once(obj: Any, make: Any) -> bytes:
    hit = _MADE.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    data: bytes = make(obj)
    if len(_MADE) < 64:
        _MADE[id(obj)] = (obj, data)
    return data


def _resource(resource: Any) -> bytes:
    return _ld(b"\x0a", _attributes(b"\x0a", resource.attributes))


def _scope(scope: Any) -> bytes:
    if scope is None:
        return _ld(b"\x0a", b"")
    body = b""
    if scope.name:
        body += _ld(b"\x0a", scope.name.encode())
    if scope.version:
        body += _ld(b"\x12", scope.version.encode())
    body += _attributes(b"\x1a", scope.attributes)
    return _ld(b"\x0a", body)


def _resource_spans(resource: Any, scopes: Mapping[Any, list[bytes]]) -> bytes:
    body = [_once(resource, _resource)]
    for scope, encoded in scopes.items():
        schema = _ld(b"\x1a", scope.schema_url.encode()) if scope is not None and scope.schema_url else b""
        body.append(_ld(b"\x12", _once(scope, _scope) + b"".join(encoded) + schema))
    if resource.schema_url:
        body.append(_ld(b"\x1a", resource.schema_url.encode()))
    return _ld(b"\x0a", b"".join(body))


def encode_spans(spans: Sequence[Any]) -> bytes | None:
    """The serialized ``ExportTraceServiceRequest`` of ``spans``, or None when a span carries events
    or links (then the caller uses the SDK's encoder)."""
    grouped: dict[Any, dict[Any, list[bytes]]] = {}
    for span in spans:
        if span.events or span.links:
            return None
        scopes = grouped.get(span.resource)
        if scopes is None:
            scopes = grouped[span.resource] = {}
        scope = span.instrumentation_scope or None
        encoded = scopes.get(scope)
        if encoded is None:
            encoded = scopes[scope] = []
        encoded.append(_span(span))
    return b"".join([_resource_spans(resource, scopes) for resource, scopes in grouped.items()])


_STATES: dict[str, str] = {}  # a caller's raw tracestate -> its validated text; callers send a few


def trace_state_text(state: Any) -> str:
    """A span's ``trace_state`` as exported: a caller's raw ``tracestate`` header (validated here, on
    the export thread, with the SDK's own parser: ~25 µs that the request no longer pays) or a
    ``TraceState`` a sampler returned."""
    if not state:
        return ""
    if type(state) is not str:
        return _trace_state(state)
    text = _STATES.get(state)
    if text is None:
        from opentelemetry.trace import TraceState

        text = _trace_state(TraceState.from_header([state]))
        if len(_STATES) >= 256:
            _STATES.clear()
        _STATES[state] = text
    return text


_ERROR = 2  # StatusCode.ERROR


def encode_plain(spans: Sequence[Any]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of the gateway's own plain spans
    (``gateway.telemetry.spans.PlainSpan``, ended and addressed: ``trace_id``, ``parent_id``, ``remote``,
    ``kind`` as OTLP numbers it, ``trace_state``, ``origin`` with the process's resource and scope; the
    attributes of its ``base`` first, their bytes written once per base), written
    on the export thread straight from them: no SDK object is made per span, on the loop or here."""
    grouped: dict[int, tuple[Any, list[bytes]]] = {}
    for span in spans:
        origin = span.origin
        entry = grouped.get(id(origin))
        if entry is None:
            entry = grouped[id(origin)] = (origin, [])
        error = span.error
        entry[1].append(
            _span_bytes(
                span.trace_id,
                span.span_id,
                trace_state_text(span.trace_state),
                span.parent_id,
                span.remote,
                span.name,
                span.kind,
                span.start_ns,
                span.end_ns,
                span.attributes,
                0,
                _STATUS_EMPTY if error is None else _status(_ERROR, error),
                span.base,
            )
        )
    return b"".join([_resource_spans(origin.resource, {origin.scope: encoded}) for origin, encoded in grouped.values()])
