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

from gateway.telemetry.observe import AccessRecord
from gateway.telemetry.otlp_wire import encode_plain, encode_spans
from gateway.telemetry.spans import Base, PlainSpan
from gateway.telemetry.traces import SCHEMA_URL, Telemetry


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
        server = PlainSpan(
            "POST /v1/messages", {"http.request.method": "POST", "gateway.request_id": f"req_{i}", **values}
        )
        client = PlainSpan("chat text", {"gen_ai.request.model": "text", "one": True, "gateway.attempt": i + 1})
        failed = PlainSpan("chat text", {"error.type": "overloaded"})
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


def test_plain_spans_encode_as_the_sdk_encodes_their_readable_spans() -> None:
    """The batcher's path: a request's plain spans, addressed by ``RequestTrace._finish`` and encoded on
    the export thread (``encode_plain``), parse to what the SDK writes for the same spans as ``ReadableSpan``s
    (a root trace, a child of a caller's span with a raw ``tracestate``, a failed attempt; shared base
    attributes, one of them set again on a span)."""
    submitted: list[PlainSpan] = []

    class Batcher:
        def submit(self, spans: list[PlainSpan]) -> None:
            submitted.extend(spans)

        def on_end(self, span: ReadableSpan) -> None:
            raise AssertionError("the batcher takes plain spans")

    tel = Telemetry(Batcher(), resource=Resource.create({"service.name": "gw"}))
    scope = {"path": "/v1/messages", "method": "POST", "scheme": "http"}
    caller = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=abc, x=y"}
    for headers in ({}, caller):
        record = AccessRecord("req_1", "anthropic", "/v1/messages")
        trace = tel.start(scope, headers, "anthropic", record)
        shared = Base({"gen_ai.request.model": "a", "gateway.provider": "a"})  # an attempt's base; one overridden
        failed = PlainSpan("chat a", {"gateway.attempt": 1, "gateway.provider": "b"}, shared)
        answered = PlainSpan("chat a", {"gateway.attempt": 2}, shared)
        failed.error = "overloaded (HTTP 529)"
        trace.attempts += (failed, answered)
        trace.attempt = answered
        record.status, record.provider, record.stop_reason, record.raw_stop_reason = 200, "a", "stop", "end_turn"
        record.input_tokens, record.output_tokens = 3, 4
        trace.finish(record)
    assert len(submitted) == 6 and [s.kind for s in submitted] == [3, 3, 2, 3, 3, 2]
    got = _parsed(encode_plain(submitted))
    assert got == sdk_encode([tel.readable(s) for s in submitted])
    spans = got.resource_spans[0].scope_spans[0].spans
    assert spans[5].parent_span_id == (0x00F067AA0BA902B7).to_bytes(8, "big") and spans[5].flags == 0x300
    assert spans[3].trace_state == "vendor=abc,x=y" and spans[0].trace_state == ""
    assert spans[3].status.message == "overloaded (HTTP 529)"
    assert [(a.key, a.value.string_value) for a in spans[0].attributes][:2] == [
        ("gen_ai.request.model", "a"),
        ("gateway.provider", "b"),
    ]
    assert [a.key for a in spans[1].attributes][:3] == ["gen_ai.request.model", "gateway.provider", "gateway.attempt"]
