"""The OTLP/HTTP export path end to end: a loopback collector decodes what the gateway sends.

The gateway is configured the way an operator does it (``[telemetry] otlp_endpoint`` and the
standard ``OTEL_*`` variables), so the real exporter, batcher and resource are used. The collector
is a real HTTP server on 127.0.0.1 that keeps every request; the bodies are decoded with
``opentelemetry-proto``. Also: an unreachable collector never holds a request up, drops are
counted, and shutdown is bounded.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

from gateway.server.app import create_app
from gateway.settings import Settings
from gateway.telemetry.export import BoundedBatchProcessor
from tests.conftest import gateway_config
from tests.support import callers
from tests.support.fake_upstream import FakeUpstream, ServerThread, read_request

CALLER_KEY = "sk-caller-SECRET-4f1c9e"
MARKER = "PROMPT-MARKER-7d3a1b"


@dataclass
class Collector:
    """A loopback OTLP/HTTP receiver: POST /v1/traces and /v1/metrics, protobuf bodies kept."""

    posts: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_request(scope, receive, send)
        if body is None:
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.posts.append((scope["path"], headers, body))
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-protobuf")]}
        )
        await send({"type": "http.response.body", "body": b""})

    def bodies(self, path: str) -> list[bytes]:
        return [body for p, _, body in self.posts if p == path]

    def wait_for(self, path: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.bodies(path):
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing posted to {path}: {[p for p, _, _ in self.posts]}")
            time.sleep(0.02)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    upstream = FakeUpstream()
    with ServerThread(upstream) as server:
        upstream.port = server.port
        yield upstream


@pytest.fixture
def otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_SDK_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within 50 ms instead of 5 s
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")  # metrics on flush only
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-token=tok-123")


def settings_for(fake: FakeUpstream, endpoint: str, **telemetry: Any) -> Settings:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["auth"] = {"keys": [CALLER_KEY], "keys_env": ""}
    config["telemetry"] = {"otlp_endpoint": endpoint, **telemetry}
    return Settings(**config)


def ask(url: str, model: str, stream: bool) -> str:
    client = callers.anthropic_client(url, key=CALLER_KEY)
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": 50,
        "system": "system " + MARKER,
        "messages": [{"role": "user", "content": "hello " + MARKER}],
    }
    if stream:
        with client.messages.stream(**kwargs) as s:
            return s.get_final_message().content[0].text  # type: ignore[union-attr]
    return client.messages.create(**kwargs).content[0].text  # type: ignore[union-attr]


def attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = (
            list(v.string_value for v in value.array_value.values) if kind == "array_value" else getattr(value, kind)
        )
    return out


def test_spans_and_metrics_reach_a_collector_without_prompt_text_or_keys(fake: FakeUpstream, otel_env: None) -> None:
    collector = Collector()
    with ServerThread(collector) as receiver:
        app = create_app(settings_for(fake, receiver.url))
        with ServerThread(app) as gateway:
            assert ask(gateway.url, "openai-chat--text", stream=True)
            collector.wait_for("/v1/traces")
            state = app.state.gateway
            assert state.telemetry.metrics.force_flush()
            collector.wait_for("/v1/metrics")
        # shutdown flushed; decode everything the collector got
        spans = []
        for body in collector.bodies("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                assert resource["service.name"] == "llm-gateway"
                for scope_spans in resource_spans.scope_spans:
                    spans += [(s, attributes(s.attributes)) for s in scope_spans.spans]
        by_name = {s.name: (s, a) for s, a in spans}
        server, server_attrs = by_name["POST /v1/messages"]
        attempt, attempt_attrs = by_name["chat openai-chat--text"]
        assert attempt.parent_span_id == server.span_id and attempt.trace_id == server.trace_id
        assert server.kind == server.SPAN_KIND_SERVER and attempt.kind == attempt.SPAN_KIND_CLIENT
        assert (
            server_attrs["gateway.caller.dialect"] == "anthropic" and server_attrs["http.response.status_code"] == 200
        )
        assert attempt_attrs["gen_ai.provider.name"] == "openai" and attempt_attrs["gen_ai.usage.output_tokens"] > 0
        assert attempt_attrs["gen_ai.response.time_to_first_chunk"] > 0
        metric_names = set()
        for body in collector.bodies("/v1/metrics"):
            request = ExportMetricsServiceRequest.FromString(body)
            metric_names |= {m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        assert {
            "gen_ai.client.token.usage",
            "gen_ai.client.operation.duration",
            "gen_ai.client.operation.time_to_first_chunk",
        } <= metric_names
        # the standard OTEL_EXPORTER_OTLP_HEADERS reached the collector
        assert all(headers.get("x-collector-token") == "tok-123" for _, headers, _ in collector.posts)
        assert all(headers.get("content-type") == "application/x-protobuf" for _, headers, _ in collector.posts)
        exported = b"".join(body for _, _, body in collector.posts)
        assert MARKER.encode() not in exported  # no prompt text by default
        assert CALLER_KEY.encode() not in exported
        assert b"sk-upstream" not in exported and b"secret" not in exported

        # the same with capture_content: the prompt is there (so the check above means something)
        collector.posts.clear()
        app = create_app(settings_for(fake, receiver.url, capture_content=True))
        with ServerThread(app) as gateway:
            ask(gateway.url, "anthropic--text", stream=False)
            collector.wait_for("/v1/traces")
        exported = b"".join(body for _, _, body in collector.posts)
        assert MARKER.encode() in exported
        assert CALLER_KEY.encode() not in exported and b"sk-upstream" not in exported


@pytest.mark.parametrize("collector", ["refusing", "silent"])
def test_an_unreachable_collector_never_holds_a_request_up(
    fake: FakeUpstream, otel_env: None, monkeypatch: pytest.MonkeyPatch, collector: str
) -> None:
    """Refusing: nothing listens. Silent: the connection is taken but never answered, so an export
    waits its whole timeout (5 s); a request that waited on it would take that long."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    if collector == "silent":
        hole.listen(64)  # the kernel completes the handshake; nobody ever reads
    port = hole.getsockname()[1]
    try:
        app = create_app(settings_for(fake, f"http://127.0.0.1:{port}", shutdown_seconds=1.0))
        state = app.state.gateway
        with ServerThread(app) as gateway:
            durations = []
            for i in range(12):
                started = time.perf_counter()
                assert ask(gateway.url, "anthropic--text", stream=bool(i % 2))
                durations.append(time.perf_counter() - started)
                time.sleep(0.06)  # let the batcher try to export in between
            assert max(durations) < 2.5, durations  # never the export's 5 s
            started = time.perf_counter()
        assert time.perf_counter() - started < 1.0 + 2.0  # shutdown (lifespan) flushes for at most shutdown_seconds
    finally:
        hole.close()
    registry = state.observer.metrics.registry
    dropped = {
        r: registry.get_sample_value("gateway_telemetry_dropped_spans_total", {"reason": r}) or 0
        for r in ("export_failed", "shutdown", "queue_full")
    }
    assert sum(dropped.values()) > 0, dropped  # what could not be delivered is counted


class Blocked(SpanExporter):
    """A collector that never answers."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Any) -> SpanExportResult:
        self.release.wait(10)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_a_full_queue_drops_and_counts_instead_of_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    registry = CollectorRegistry()
    exporter = Blocked()
    processor = BoundedBatchProcessor(exporter, registry, shutdown_seconds=0.5)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    started = time.perf_counter()
    for i in range(200):
        tracer.start_span(f"span {i}").end()
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5  # 200 spans with a stuck collector: no waiting
    dropped = registry.get_sample_value("gateway_telemetry_dropped_spans_total", {"reason": "queue_full"})
    assert dropped is not None and dropped >= 200 - 2 * 8  # at most one batch in flight plus a full queue
    assert processor.pending <= 8
    exporter.release.set()
    provider.shutdown()
