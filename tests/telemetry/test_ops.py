"""Operations and security: caller keys, key hygiene, access log, metrics, health."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.callers import CALLERS, ERRORS
from tests.support.fake_upstream import FakeUpstream, ServerThread

GATEWAY_KEY = "gw-test-key-123"


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def secured(fake: FakeUpstream) -> Iterator[tuple[ServerThread, Capture]]:
    capture = Capture()
    access = logging.getLogger("gateway.access")
    access.addHandler(capture)
    access.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(capture)
    config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True)
    config["auth"] = {"keys": [GATEWAY_KEY], "keys_env": ""}
    with ServerThread(create_app(Settings(**config))) as server:
        yield server, capture
    access.removeHandler(capture)
    root.removeHandler(capture)


HEADERS = {
    "anthropic": [{"x-api-key": GATEWAY_KEY}, {"authorization": f"Bearer {GATEWAY_KEY}"}],
    "openai-chat": [{"authorization": f"Bearer {GATEWAY_KEY}"}],
    "openai-responses": [{"authorization": f"Bearer {GATEWAY_KEY}"}],
    "gemini": [{"x-goog-api-key": GATEWAY_KEY}, {}],  # {} = ?key= in the URL
}
REQUESTS = {
    "anthropic": ("/v1/messages", {"model": "demo", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    "openai-chat": ("/v1/chat/completions", {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}),
    "openai-responses": ("/v1/responses", {"model": "demo", "input": "hi"}),
    "gemini": ("/v1beta/models/demo:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
}


@pytest.mark.parametrize("dialect,headers", [(d, h) for d, hs in HEADERS.items() for h in hs])
def test_each_auth_header_is_accepted(secured: Any, dialect: str, headers: dict[str, str]) -> None:
    server, _ = secured
    path, body = REQUESTS[dialect]
    url = server.url + path + ("" if headers else f"?key={GATEWAY_KEY}")
    response = httpx.post(url, json=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("key", [None, "wrong-key"])
@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_missing_or_wrong_key_is_401_in_dialect(secured: Any, dialect: str, key: str | None) -> None:
    server, _ = secured
    path, body = REQUESTS[dialect]
    headers = {}
    if key:
        headers = {"anthropic": {"x-api-key": key}, "gemini": {"x-goog-api-key": key}}.get(
            dialect, {"authorization": f"Bearer {key}"}
        )
    response = httpx.post(server.url + path, json=body, headers=headers, timeout=10)
    assert response.status_code == 401
    data = response.json()
    if dialect == "anthropic":
        assert data["error"]["type"] == "authentication_error"
    elif dialect == "gemini":
        assert data["error"]["code"] == 401
    else:
        assert data["error"]["message"]
    if key:
        assert key not in response.text


@pytest.mark.parametrize("caller", list(CALLERS))
def test_sdks_with_the_gateway_key(secured: Any, fake: FakeUpstream, caller: str) -> None:
    server, _ = secured
    from tests.support import callers

    original = {"anthropic": callers.anthropic_client, "openai": callers.openai_client, "gemini": callers.gemini_client}
    try:
        callers.anthropic_client = lambda url, key=GATEWAY_KEY: original["anthropic"](url, key)  # type: ignore[assignment]
        callers.openai_client = lambda url, key=GATEWAY_KEY: original["openai"](url, key)  # type: ignore[assignment]
        callers.gemini_client = lambda url, key=GATEWAY_KEY: original["gemini"](url, key)  # type: ignore[assignment]
        out = CALLERS[caller](server.url, "anthropic--text", "text", True)
    finally:
        callers.anthropic_client, callers.openai_client, callers.gemini_client = (
            original["anthropic"],
            original["openai"],
            original["gemini"],
        )  # type: ignore[assignment]
    assert out.text == "Hello from the gateway. 你好 — ok!"
    received = fake.last("anthropic")
    assert GATEWAY_KEY not in orjson.dumps(received.headers).decode()
    assert received.headers["x-api-key"] == "sk-upstream-anthropic-secret"


def test_upstream_keys_never_leak(secured: Any, fake: FakeUpstream) -> None:
    server, capture = secured
    for caller in CALLERS:
        for scenario in ("error_500", "error_mid_stream"):
            with pytest.raises(ERRORS[caller]) as info:
                from tests.support import callers as c

                c_key = GATEWAY_KEY
                if caller == "anthropic":
                    c.anthropic_client(server.url, c_key).messages.create(
                        model=f"openai-chat--{scenario}", max_tokens=5, messages=[{"role": "user", "content": "x"}]
                    )
                elif caller == "gemini":
                    client = c.gemini_client(server.url, c_key)  # keep a reference: the client closes on GC
                    client.models.generate_content(model=f"anthropic--{scenario}", contents="x")
                else:
                    c.openai_client(server.url, c_key).chat.completions.create(
                        model=f"gemini--{scenario}", messages=[{"role": "user", "content": "x"}]
                    )
            assert "secret" not in str(info.value)
    everything = "\n".join(capture.lines)
    assert "sk-upstream" not in everything, [line for line in capture.lines if "sk-upstream" in line][:3]
    assert GATEWAY_KEY not in everything
    for received in fake.received:
        # each provider only ever sees its own key
        blob = orjson.dumps(received.headers).decode() + orjson.dumps(received.body).decode()
        for dialect in ("anthropic", "openai-chat", "openai-responses", "gemini"):
            if dialect != received.dialect:
                assert f"sk-upstream-{dialect}-secret" not in blob


def test_access_log_line_has_every_field(secured: Any) -> None:
    server, capture = secured
    from tests.support import callers as c

    before = len(capture.lines)
    client = c.openai_client(server.url, GATEWAY_KEY)
    response = client.chat.completions.with_raw_response.create(
        model="anthropic--text",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-request-id": "req-abc-1"},
    )
    assert response.headers["x-request-id"] == "req-abc-1"
    import time

    deadline = time.time() + 3
    line = None
    while time.time() < deadline and line is None:
        for text in capture.lines[before:]:
            if "req-abc-1" in text and text.startswith("{"):  # the access line, not a warning naming the request
                line = orjson.loads(text)
        time.sleep(0.02)
    assert line is not None
    assert line["request_id"] == "req-abc-1"
    assert (
        line["dialect"] == "openai-chat"
        and line["provider"] == "up-anthropic"
        and line["upstream_model"] == "anthropic--text"
    )
    assert line["route"] == "anthropic--*" and line["stream"] is False and line["status"] == 200
    assert line["input_tokens"] == 30 and line["output_tokens"] == 12 and line["cache_read_tokens"] == 10
    assert line["stop_reason"] == "stop" and line["raw_stop_reason"] == "end_turn"
    assert line["ttfb_ms"] is not None and line["duration_ms"] >= line["ttfb_ms"]
    assert line["attempts"] and line["attempts"][0]["provider"] == "up-anthropic"
    assert "error_kind" in line


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_move_by_the_right_amounts(secured: Any) -> None:
    server, _ = secured
    from tests.support import callers as c

    before = httpx.get(server.url + "/metrics").text
    client = c.anthropic_client(server.url, GATEWAY_KEY)
    for _ in range(3):
        client.messages.create(model="gemini--text", max_tokens=50, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(Exception):  # noqa: B017  (which SDK error class is not what this test is about: the metric is)
        client.messages.create(model="gemini--error_429", max_tokens=50, messages=[{"role": "user", "content": "x"}])
    after = httpx.get(server.url + "/metrics").text
    delta = lambda name, **labels: metric(after, name, **labels) - metric(before, name, **labels)  # noqa: E731
    assert delta("gateway_requests_total", dialect="anthropic", provider="up-gemini", status="200") == 3
    assert delta("gateway_requests_total", dialect="anthropic", status="429") == 1
    assert delta("gateway_tokens_total", provider="up-gemini", kind="input") == 90
    assert delta("gateway_tokens_total", provider="up-gemini", kind="output") == 36
    assert delta("gateway_upstream_errors_total", provider="up-gemini", kind="rate_limit") == 1
    assert re.search(r"^gateway_active_streams ", after, re.M)
    assert "gateway_time_to_first_byte_seconds_bucket" in after
    # the upstream connection was kept for reuse: one socket (idle), no response open
    assert metric(after, "gateway_upstream_pool_connections", provider="up-gemini") >= 1
    assert metric(after, "gateway_upstream_open_connections") == 0


def test_health_endpoints(secured: Any) -> None:
    server, _ = secured
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
