"""The gateway's own OTLP span encoder (gateway/telemetry/otlp_wire.py) writes exactly what the SDK's
encoder does: both byte strings parsed with the generated ``ExportTraceServiceRequest`` are equal, for
the spans the gateway makes (a root, a child of a caller's remote span with a tracestate, a failed
attempt, every attribute value type)."""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from gateway.telemetry.otlp_wire import encode_spans
from gateway.telemetry.traces import SCHEMA_URL, Telemetry, _Span


def _spans() -> list[ReadableSpan]:
    made: list[ReadableSpan] = []

    class Keep:
        def on_end(self, span: ReadableSpan) -> None:
            made.append(span)

    tel = Telemetry(Keep(), resource=Resource.create({"service.name": "gw", "n": 3}))
    remote = SpanContext(0xABC, 0xDEF, True, TraceFlags(1), TraceState([("vendor", "v1"), ("x", "y")]))
    values: dict[str, Any] = {
        "text": "model ü ✓",
        "empty": "",
        "yes": True,
        "no": False,
        "zero": 0,
        "one": 1,  # the same key/value cache must not confuse 1 with True
        "negative": -5,
        "big": 2**62,
        "temperature": 0.7,
        "stops": ("\n\n", "END"),
        "counts": (1, 2),
        "raw": b"\x00\xff",
    }
    for i in range(3):
        server = _Span("POST /v1/messages", {"http.request.method": "POST", "gateway.request_id": f"req_{i}", **values})
        client = _Span("chat text", {"gen_ai.request.model": "text", "one": True, "gateway.attempt": i + 1})
        failed = _Span("chat text", {"error.type": "overloaded"})
        failed.error = "overloaded (HTTP 529)"
        for span in (server, client, failed):
            span.end_ns = span.start_ns + 1234
        own = tel.SpanContext(0x1234 + i, server.span_id, False, tel.SAMPLED, remote.trace_state)
        tel.emit(own.trace_id, client, tel.CLIENT, own, remote.trace_state)
        tel.emit(own.trace_id, failed, tel.CLIENT, own, remote.trace_state)
        tel.emit(own.trace_id, server, tel.SERVER, remote if i else None, remote.trace_state if i else None)
    return made


def _parsed(data: bytes) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(data)


def test_the_wire_bytes_parse_to_what_the_sdk_encodes() -> None:
    spans = _spans()
    ours = encode_spans(spans)
    assert ours is not None
    expected = sdk_encode(spans)
    assert _parsed(ours) == expected
    scope_spans = expected.resource_spans[0].scope_spans[0]
    assert scope_spans.schema_url == SCHEMA_URL and len(scope_spans.spans) == 9  # the case is not empty
    # encoding twice (the caches warm) gives the same bytes
    assert encode_spans(spans) == ours


def test_an_error_status_and_a_remote_parent_are_kept() -> None:
    spans = _spans()
    got = _parsed(encode_spans(spans) or b"").resource_spans[0].scope_spans[0].spans
    failed = [s for s in got if s.status.code == StatusCode.ERROR.value]
    assert len(failed) == 3 and failed[0].status.message == "overloaded (HTTP 529)"
    child_of_caller = [s for s in got if s.parent_span_id == (0xDEF).to_bytes(8, "big")]
    assert len(child_of_caller) == 2 and all(s.flags == 0x300 for s in child_of_caller)
    assert child_of_caller[0].trace_state == "vendor=v1,x=y"


def test_a_span_with_events_goes_to_the_sdk_encoder() -> None:
    span = ReadableSpan(
        "x",
        SpanContext(1, 2, False, TraceFlags(1)),
        None,
        Resource.create({}),
        {},
        events=(Event("e", {}, 1),),
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
    )
    assert encode_spans([span]) is None
