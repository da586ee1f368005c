"""OpenTelemetry spans per request and per upstream attempt, read from the SDK's in-memory exporter.

The gateway runs under uvicorn in front of the fake upstream; the official SDKs call it. The app's
``Telemetry`` is the real one (gateway/telemetry/traces.py) with the SDK's ``SimpleSpanProcessor`` in front of
an ``InMemorySpanExporter``; its GenAI metrics are read with ``collect()`` (the SDK's data model).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.server.app import create_app, create_state
from gateway.settings import Settings
from gateway.telemetry.metrics import GenAIMetrics
from gateway.telemetry.traces import Telemetry, parse_traceparent
from tests.conftest import gateway_config
from tests.support import callers
from tests.support.fake_upstream import FakeUpstream, ServerThread, free_port

CALLERS = {
    "anthropic": callers.anthropic_call,
    "openai-chat": callers.chat_call,
    "openai-responses": callers.responses_call,
    "gemini": callers.gemini_call,
    "gemini-interactions": lambda url, model, scenario, stream: callers.interactions_call(
        url, model, scenario, stream, store=False
    ),
}
ROUTES = {  # the route template each caller dialect's endpoint has (google-genai picks v1 or v1beta)
    "anthropic": {"POST /v1/messages"},
    "openai-chat": {"POST /v1/chat/completions"},
    "openai-responses": {"POST /v1/responses"},
    "gemini": {"POST /v1beta/models/{target:path}", "POST /v1/models/{target:path}"},
    "gemini-interactions": {"POST /v1beta/interactions", "POST /v1/interactions"},
}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(record.getMessage()))


class Traced:
    def __init__(
        self, server: ServerThread, telemetry: Telemetry, spans: InMemorySpanExporter, log: Lines, fake: FakeUpstream
    ) -> None:
        self.server, self.telemetry, self.spans, self.log, self.fake = server, telemetry, spans, log, fake

    @property
    def url(self) -> str:
        return self.server.url

    def trace(self, count: int = 1, timeout: float = 5.0) -> list[ReadableSpan]:
        """The spans once ``count`` SERVER spans ended (the request's span ends after its last byte)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = list(self.spans.get_finished_spans())
            if sum(1 for s in spans if s.kind is SpanKind.SERVER) >= count:
                return spans
            time.sleep(0.01)
        raise AssertionError(f"no finished request span; got {[s.name for s in self.spans.get_finished_spans()]}")


@pytest.fixture(scope="module")
def traced() -> Iterator[Traced]:
    fake = FakeUpstream()
    with ServerThread(fake) as upstream:
        fake.port = upstream.port
        config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True)
        config["providers"] += [
            {
                "name": "down",
                "dialect": "openai-chat",
                "base_url": f"http://127.0.0.1:{free_port()}/v1",
                "api_key": "sk-down",
                "max_retries": 0,
                "connect_timeout": 1.0,
            },
            {
                "name": "flaky",
                "dialect": "anthropic",
                "base_url": f"http://127.0.0.1:{fake.port}",
                "api_key": "sk-flaky",
                "max_retries": 1,
                "retry_backoff": 0.0,
            },
        ]
        config["routes"] = [
            {"model": "fallback-*", "provider": "down", "fallbacks": ["up-anthropic:anthropic--text"]},
            {"model": "retry--*", "provider": "flaky"},
            *config["routes"],
        ]
        lines = Lines()
        access = logging.getLogger("gateway.access")
        access.addHandler(lines)  # the Observer logs to it instead of stdout
        access.setLevel(logging.INFO)
        app = create_app(Settings(**config))
        spans = InMemorySpanExporter()
        telemetry = Telemetry(SimpleSpanProcessor(spans), GenAIMetrics())
        app.state.gateway.telemetry = telemetry
        try:
            with ServerThread(app) as server:
                yield Traced(server, telemetry, spans, lines, fake)
        finally:
            access.removeHandler(lines)


@pytest.fixture
def t(traced: Traced) -> Traced:
    traced.spans.clear()
    traced.log.lines.clear()
    traced.telemetry.capture_content = False
    return traced


def split(spans: list[ReadableSpan]) -> tuple[ReadableSpan, list[ReadableSpan]]:
    servers = [s for s in spans if s.kind is SpanKind.SERVER]
    assert len(servers) == 1, [s.name for s in spans]
    server = servers[0]
    attempts = sorted((s for s in spans if s.kind is SpanKind.CLIENT), key=lambda s: s.start_time or 0)
    for attempt in attempts:  # every attempt is a child of the request's span, in its trace
        assert attempt.parent is not None and attempt.parent.span_id == server.context.span_id
        assert attempt.context.trace_id == server.context.trace_id
    return server, attempts


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("upstream", ["anthropic", "openai-chat"])
def test_request_and_attempt_spans_per_caller_dialect(t: Traced, caller: str, upstream: str, stream: bool) -> None:
    model = f"{upstream}--text"
    out = CALLERS[caller](t.url, model, "text", stream)
    assert out.text
    server, attempts = split(t.trace())
    assert server.name in ROUTES[caller]
    a = server.attributes
    assert (
        a["gateway.caller.dialect"] == caller
        and a["gateway.route"] == f"{upstream}--*"
        and a["gateway.request.model"] == model
    )
    assert (
        a["http.response.status_code"] == 200
        and a["gateway.provider"] == f"up-{upstream}"
        and a["gateway.stream"] is stream
    )
    assert server.status.status_code is not StatusCode.ERROR
    assert len(attempts) == 1
    span = attempts[0]
    assert span.name == f"chat {model}"
    s = span.attributes
    assert s["gen_ai.operation.name"] == "chat"
    assert s["gen_ai.provider.name"] == {"anthropic": "anthropic", "openai-chat": "openai"}[upstream]
    assert s["gen_ai.request.model"] == model
    assert s["gen_ai.response.model"] and s["gen_ai.response.id"]
    assert s["server.address"] == "127.0.0.1" and s["server.port"] == t.fake.port
    assert isinstance(s["gen_ai.usage.input_tokens"], int) and isinstance(s["gen_ai.usage.output_tokens"], int)
    assert s["gen_ai.usage.output_tokens"] > 0
    assert list(s["gen_ai.response.finish_reasons"]) == [{"anthropic": "end_turn", "openai-chat": "stop"}[upstream]]
    assert s.get("gen_ai.request.max_tokens") == callers.max_tokens_for("text")
    assert "error.type" not in s and "gen_ai.input.messages" not in s and "gen_ai.output.messages" not in s
    if stream:
        assert 0 < s["gen_ai.response.time_to_first_chunk"] < 5
    else:
        assert "gen_ai.response.time_to_first_chunk" not in s
    # the access-log line names the trace
    line = next(line for line in t.log.lines if line["request_id"] == a["gateway.request_id"])
    assert line["trace_id"] == format(server.context.trace_id, "032x")


def test_gemini_upstream_is_generate_content_of_gcp_gemini(t: Traced) -> None:
    callers.chat_call(t.url, "gemini--text", "text", True)
    _, [span] = split(t.trace())
    assert span.name == "generate_content gemini--text"
    assert span.attributes["gen_ai.operation.name"] == "generate_content"
    assert span.attributes["gen_ai.provider.name"] == "gcp.gemini"


def test_a_retried_attempt_is_its_own_span_with_error_type(t: Traced) -> None:
    out = callers.chat_call(t.url, "retry--retry_after", "text", False)  # 429 once, then the answer
    assert out.text
    server, attempts = split(t.trace())
    assert [s.attributes.get("error.type") for s in attempts] == ["rate_limit", None]
    failed, answered = attempts
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["http.response.status_code"] == 429
    assert [s.attributes["gateway.attempt"] for s in attempts] == [1, 2]
    assert all(s.attributes["gateway.provider"] == "flaky" for s in attempts)
    assert failed.end_time <= answered.start_time  # type: ignore[operator]
    assert answered.attributes["gen_ai.usage.output_tokens"] > 0
    assert server.attributes["gateway.attempts"] == 2 and server.status.status_code is not StatusCode.ERROR


def test_a_fallback_is_its_own_span_naming_its_provider(t: Traced) -> None:
    out = callers.anthropic_call(t.url, "fallback-x", "text", True)
    assert out.text
    server, (down, up) = split(t.trace())
    assert down.name == "chat fallback-x" and down.attributes["error.type"] == "bad_gateway"
    assert down.attributes["gateway.provider"] == "down" and down.attributes["gateway.fallback"] == 0
    assert up.name == "chat anthropic--text" and "error.type" not in up.attributes
    assert up.attributes["gateway.provider"] == "up-anthropic" and up.attributes["gateway.fallback"] == 1
    assert up.attributes["gen_ai.provider.name"] == "anthropic"
    assert server.attributes["gateway.provider"] == "up-anthropic"


def test_a_failed_request_marks_both_spans(t: Traced) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        callers.chat_call(t.url, "anthropic--error_500", "text", False)
    server, [attempt] = split(t.trace())
    assert attempt.status.status_code is StatusCode.ERROR and attempt.attributes["error.type"] == "api_error"
    assert server.attributes["http.response.status_code"] == info.value.status_code >= 500
    assert server.attributes["error.type"] == "api_error" and server.status.status_code is StatusCode.ERROR
    # the provider's message is not exported (it may quote a key); the kind and status are
    assert "Internal" not in (attempt.status.description or "") and "api_error" in (attempt.status.description or "")


def test_a_stream_that_fails_after_its_200_is_an_error_on_both_spans(t: Traced) -> None:
    with pytest.raises(Exception):  # noqa: B017  (the spans are what is checked, not the SDK's error class)
        callers.anthropic_call(t.url, "anthropic--error_mid_stream", "text", True)
    server, [attempt] = split(t.trace())
    assert attempt.attributes["error.type"] and attempt.status.status_code is StatusCode.ERROR
    assert server.attributes["http.response.status_code"] == 200 and server.status.status_code is StatusCode.ERROR


def test_a_refused_request_has_a_server_span_and_no_attempt(t: Traced) -> None:
    with pytest.raises(openai.NotFoundError):
        callers.chat_call(t.url, "no-such-model", "text", False)
    server, attempts = split(t.trace())
    assert attempts == [] and server.attributes["http.response.status_code"] == 404
    assert (
        server.attributes["error.type"] == "not_found" and server.status.status_code is not StatusCode.ERROR
    )  # a 4xx is the caller's


def test_the_callers_traceparent_is_continued(t: Traced) -> None:
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    client = openai.OpenAI(
        base_url=t.url + "/v1",
        api_key="sk-caller",
        max_retries=0,
        default_headers={"traceparent": f"00-{trace_id}-{parent_id}-01", "tracestate": "vendor=abc"},
    )
    client.chat.completions.create(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
    server, [attempt] = split(t.trace())
    assert format(server.context.trace_id, "032x") == trace_id
    assert server.parent is not None and format(server.parent.span_id, "016x") == parent_id and server.parent.is_remote
    assert server.context.trace_state.get("vendor") == "abc"
    assert format(attempt.context.trace_id, "032x") == trace_id
    assert t.log.lines[-1]["trace_id"] == trace_id


def test_request_parameters_are_attributes_when_given(t: Traced) -> None:
    client = callers.openai_client(t.url)
    client.chat.completions.create(
        model="anthropic--text",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=77,
        temperature=0.25,
        top_p=0.5,
    )
    _, [span] = split(t.trace())
    assert span.attributes["gen_ai.request.max_tokens"] == 77
    assert span.attributes["gen_ai.request.temperature"] == 0.25 and span.attributes["gen_ai.request.top_p"] == 0.5


def test_content_only_with_capture_content_in_the_conventions_form(t: Traced) -> None:
    callers.chat_call(t.url, "anthropic--tool_call", "tool_call", True)
    _, [span] = split(t.trace())
    assert not any(
        key in span.attributes
        for key in (
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.definitions",
        )
    )
    assert callers.USER not in repr(dict(span.attributes))

    t.spans.clear()
    t.telemetry.capture_content = True
    for stream in (True, False):
        t.spans.clear()
        out = callers.chat_call(t.url, "anthropic--tool_call", "tool_call", stream)
        _, [span] = split(t.trace())
        inputs = json.loads(span.attributes["gen_ai.input.messages"])
        assert inputs == [{"role": "user", "parts": [{"type": "text", "content": callers.USER}]}]
        assert json.loads(span.attributes["gen_ai.system_instructions"]) == [
            {"type": "text", "content": callers.SYSTEM}
        ]
        assert [d["name"] for d in json.loads(span.attributes["gen_ai.tool.definitions"])] == [callers.WEATHER["name"]]
        [message] = json.loads(span.attributes["gen_ai.output.messages"])
        assert message["role"] == "assistant" and message["finish_reason"] == "tool_call"
        calls = [p for p in message["parts"] if p["type"] == "tool_call"]
        assert [(c["name"], c["arguments"]) for c in calls] == out.tools


def test_genai_metrics_through_the_sdk(t: Traced) -> None:
    callers.anthropic_call(t.url, "openai-chat--text", "text", True)
    t.trace()
    data = t.telemetry.metrics.collect()  # type: ignore[union-attr]
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.time_to_first_chunk",
    } <= set(metrics)
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    kinds = {
        p.attributes["gen_ai.token.type"]
        for p in usage.data.data_points
        if p.attributes["gen_ai.request.model"] == "openai-chat--text"
    }
    assert kinds == {"input", "output"}
    point = next(
        p
        for p in metrics["gen_ai.client.operation.duration"].data.data_points
        if p.attributes["gen_ai.request.model"] == "openai-chat--text"
    )
    assert point.attributes["gen_ai.provider.name"] == "openai" and point.attributes["gen_ai.operation.name"] == "chat"
    assert point.attributes["server.address"] == "127.0.0.1" and metrics["gen_ai.client.operation.duration"].unit == "s"


def test_a_detached_generation_is_a_child_of_the_request_that_started_it(t: Traced) -> None:
    out = callers.interactions_call(t.url, "anthropic--text", "text", True, store=True)
    assert out.text
    _server, [attempt] = split(t.trace())
    assert attempt.attributes["gateway.detached"] is True
    assert attempt.attributes["gen_ai.request.model"] == "anthropic--text"


def test_off_without_an_endpoint_and_on_with_the_standard_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    config = gateway_config("http://127.0.0.1:9")
    assert create_state(Settings(**config)).telemetry is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "gw-under-test")
    state = create_state(Settings(**config))
    assert isinstance(state.telemetry, Telemetry)
    assert state.telemetry.resource.attributes["service.name"] == "gw-under-test"
    state.telemetry.shutdown()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert create_state(Settings(**config)).telemetry is None


def test_a_caller_that_did_not_sample_gets_no_spans_but_its_trace_id_is_logged(t: Traced) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4737"
    client = openai.OpenAI(
        base_url=t.url + "/v1",
        api_key="sk-caller",
        max_retries=0,
        default_headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-00"},
    )
    client.chat.completions.create(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
    deadline = time.monotonic() + 5
    while not any(line.get("trace_id") == trace_id for line in t.log.lines) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(line.get("trace_id") == trace_id for line in t.log.lines)
    time.sleep(0.1)
    assert t.spans.get_finished_spans() == ()


@pytest.mark.parametrize(
    "value, parsed",
    [
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1),
        ),
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 0),
        ),
        (
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
            (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1),
        ),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # all-zero trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),  # all-zero parent id
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None),  # upper case is not W3C
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),  # version ff is invalid
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", None),  # version 00 has four parts
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),
        ("garbage", None),
    ],
)
def test_traceparent_parsing_follows_w3c(value: str, parsed: tuple[int, int, int] | None) -> None:
    assert parse_traceparent(value) == parsed


def test_an_invalid_traceparent_starts_a_new_trace(t: Traced) -> None:
    client = openai.OpenAI(
        base_url=t.url + "/v1",
        api_key="sk-caller",
        max_retries=0,
        default_headers={"traceparent": "00-zz-00f067aa0ba902b7-01"},
    )
    client.chat.completions.create(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
    server, _ = split(t.trace())
    assert server.parent is None


def test_an_answer_sent_in_full_is_logged_200_though_the_caller_hangs_up_at_once(t: Traced) -> None:
    """uvicorn reports a disconnect as soon as the response is complete; the gateway was still
    draining the upstream then, and used to log (and trace) such a request as 499 client_gone."""
    import httpx

    for _ in range(20):
        with httpx.Client(base_url=t.url) as client:  # closed right after the answer
            reply = client.post(
                "/v1/chat/completions",
                json={"model": "anthropic--text", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert reply.status_code == 200
    t.trace(count=20)
    statuses = [line["status"] for line in t.log.lines]
    assert statuses == [200] * 20
    assert {
        s.attributes["http.response.status_code"] for s in t.spans.get_finished_spans() if s.kind is SpanKind.SERVER
    } == {200}


def test_an_otlp_endpoint_must_be_an_http_url() -> None:
    config = gateway_config("http://127.0.0.1:9")
    config["telemetry"] = {"otlp_endpoint": "127.0.0.1:4318"}
    with pytest.raises(ValueError, match="otlp_endpoint must be an http"):
        Settings(**config)


def test_an_endpoint_without_the_sdk_installed_is_an_error_in_the_log_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    monkeypatch.setitem(
        sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None
    )  # as if not installed
    config = gateway_config("http://127.0.0.1:9")
    config["telemetry"] = {"otlp_endpoint": "http://127.0.0.1:4318"}
    with caplog.at_level(logging.ERROR, logger="gateway.telemetry"):
        state = create_state(Settings(**config))
    assert state.telemetry is None
    assert "llm-gateway[otel]" in caplog.text
