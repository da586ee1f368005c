"""Issue 24 through the real server: what a caller asks reaches the upstream, or the caller gets a 400.

The official SDKs (or raw HTTP in the caller's format) against the gateway on a loopback port, the
recording fake upstream behind it, the access-log line read back: stop sequences toward a
Responses upstream (refused, or dropped where configured), JSON-schema output toward Anthropic
(sent as ``output_config.format`` and answered in each caller's structured-output shape), and
``temperature`` with ``top_p`` toward Anthropic (both, unless the model is listed as refusing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from google import genai
from pydantic import BaseModel

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support import callers as c
from tests.support.fake_upstream import FakeUpstream, ServerThread


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def line_for(self, request_id: str) -> dict[str, Any]:
        deadline = time.time() + 3
        while time.time() < deadline:
            for text in self.lines:
                if request_id in text:
                    return orjson.loads(text)
            time.sleep(0.02)
        raise AssertionError(f"no access-log line for {request_id}")


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream) -> Iterator[tuple[ServerThread, Capture]]:
    capture = Capture()
    access = logging.getLogger("gateway.access")
    access.addHandler(capture)
    access.setLevel(logging.INFO)
    url = f"http://127.0.0.1:{fake.port}"
    config = gateway_config(url, access_log=True)
    common = {"api_key": "sk-up", "max_retries": 0, "first_byte_timeout": 5.0, "idle_timeout": 2.0}
    config["providers"] += [
        {
            "name": "lenient-responses",
            "dialect": "openai-responses",
            "base_url": url + "/v1",
            "drop_unsupported": ["stop"],
            **common,
        },
        {
            "name": "claude-exclusive",
            "dialect": "anthropic",
            "base_url": url,
            "sampling_exclusive_models": ["*"],
            **common,
        },
    ]
    config["routes"] = [
        {"model": "lenient--*", "provider": "lenient-responses"},
        {"model": "exclusive--*", "provider": "claude-exclusive"},
        # stop cannot go to the Responses primary: the Chat fallback carries it
        {
            "model": "stop-fallback",
            "provider": "up-openai-responses",
            "upstream_model": "responses--text",
            "fallbacks": ["up-openai-chat:chat--text"],
        },
        {
            "model": "stop-nowhere",
            "provider": "up-openai-responses",
            "upstream_model": "responses--text",
            "fallbacks": ["lenient-responses:x--error_500"],
        },
        *config["routes"],
    ]
    with ServerThread(create_app(Settings(**config))) as server:
        yield server, capture
    access.removeHandler(capture)


def _count(fake: FakeUpstream) -> int:
    return len(fake.received)


# --------------------------------------------------------------------------- stop toward Responses

STOP_REQUESTS = {  # caller dialect -> (path, body) with one stop sequence, model "{model}"
    "openai-chat": (
        "/v1/chat/completions",
        lambda m: {"model": m, "messages": [{"role": "user", "content": "hi"}], "stop": ["END"]},
        "stop",
    ),
    "anthropic": (
        "/v1/messages",
        lambda m: {
            "model": m,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "stop_sequences": ["END"],
        },
        "stop_sequences",
    ),
    "gemini": (
        "/v1beta/models/{m}:generateContent",
        lambda m: {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"stopSequences": ["END"]},
        },
        "generationConfig.stopSequences",
    ),
    "gemini-interactions": (
        "/v1beta/interactions",
        lambda m: {"model": m, "input": "hi", "store": False, "generation_config": {"stop_sequences": ["END"]}},
        "generation_config.stop_sequences",
    ),
}


def _post(server: ServerThread, caller: str, model: str, request_id: str) -> httpx.Response:
    path, body, _ = STOP_REQUESTS[caller]
    return httpx.post(
        server.url + path.replace("{m}", model), json=body(model), headers={"x-request-id": request_id}, timeout=10
    )


@pytest.mark.parametrize("caller", list(STOP_REQUESTS))
def test_stop_toward_responses_is_a_400_naming_the_callers_parameter(gw: Any, fake: FakeUpstream, caller: str) -> None:
    server, capture = gw
    before = _count(fake)
    response = _post(server, caller, "openai-responses--text", f"req-stop-{caller}")
    assert response.status_code == 400, response.text
    param = STOP_REQUESTS[caller][2]
    text = response.text
    assert param in text and "drop_unsupported" in text
    assert _count(fake) == before, "nothing may reach the upstream for a refused request"
    line = capture.line_for(f"req-stop-{caller}")
    assert line["status"] == 400 and line["error_kind"] == "invalid_request"


def test_stop_refusal_in_the_chat_sdk(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    with pytest.raises(openai.BadRequestError) as info:
        c.openai_client(server.url).chat.completions.create(
            model="openai-responses--text", messages=[{"role": "user", "content": "hi"}], stop=["END"]
        )
    assert info.value.body["param"] == "stop"  # type: ignore[index]


def test_stop_dropped_where_configured_is_in_the_log_and_a_header(gw: Any, fake: FakeUpstream) -> None:
    server, capture = gw
    response = _post(server, "openai-chat", "lenient--text", "req-stop-lenient")
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped"] == "stop"
    received = fake.last("openai-responses")
    assert received.body["model"] == "lenient--text" and "stop" not in orjson.dumps(received.body).decode()
    assert capture.line_for("req-stop-lenient")["dropped"] == ["stop"]


def test_stop_streamed_dropped_where_configured_has_the_header(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    body = {"model": "lenient--text", "stream": True, "messages": [{"role": "user", "content": "hi"}], "stop": "END"}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=10) as response:
        assert response.status_code == 200 and response.headers["x-gateway-dropped"] == "stop"
        assert "[DONE]" in response.read().decode()


def test_stop_refused_by_the_primary_goes_to_a_fallback_that_carries_it(gw: Any, fake: FakeUpstream) -> None:
    server, capture = gw
    before = _count(fake)
    response = _post(server, "openai-chat", "stop-fallback", "req-stop-fallback")
    assert response.status_code == 200, response.text
    sent = fake.received[before:]
    assert [r.dialect for r in sent] == ["openai-chat"] and sent[0].body["stop"] == ["END"]
    line = capture.line_for("req-stop-fallback")
    assert [a["error"] for a in line["attempts"]] == ["cannot_carry", None] and line["dropped"] == []


def test_when_the_target_that_could_carry_it_fails_its_failure_is_the_answer(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    response = _post(server, "openai-chat", "stop-nowhere", "req-stop-nowhere")
    assert response.status_code == 500, response.text  # the lenient fallback's own 500, not the primary's refusal


# --------------------------------------------------------------------------- JSON schema toward Anthropic


class Weather(BaseModel):
    city: str
    temp_c: int


def _sent_schema(fake: FakeUpstream) -> dict[str, Any]:
    body = fake.last("anthropic").body
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert "output_format" not in body and "response_format" not in body
    return fmt["schema"]


def _check_weather_schema(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object" and set(schema["properties"]) == {"city", "temp_c"}
    assert schema["additionalProperties"] is False and schema["required"] == ["city", "temp_c"]


@pytest.mark.parametrize("stream", [False, True])
def test_chat_json_schema_reaches_anthropic_and_parses(gw: Any, fake: FakeUpstream, stream: bool) -> None:
    server, _ = gw
    client = c.openai_client(server.url)
    messages = [{"role": "user", "content": "Weather in Paris as JSON"}]
    if stream:
        with client.chat.completions.stream(
            model="anthropic--structured", messages=messages, response_format=Weather
        ) as s:
            parsed = s.get_final_completion().choices[0].message.parsed
    else:
        parsed = (
            client.chat.completions.parse(model="anthropic--structured", messages=messages, response_format=Weather)
            .choices[0]
            .message.parsed
        )
    assert parsed == Weather(city="Paris", temp_c=18)
    _check_weather_schema(_sent_schema(fake))


def test_responses_text_format_reaches_anthropic_and_parses(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    response = c.openai_client(server.url).responses.parse(
        model="anthropic--structured", input="Weather in Paris", text_format=Weather, store=False
    )
    assert response.output_parsed == Weather(city="Paris", temp_c=18)
    _check_weather_schema(_sent_schema(fake))


@pytest.mark.parametrize("field", ["response_schema", "response_json_schema"])
def test_gemini_response_schema_reaches_anthropic_and_parses(gw: Any, fake: FakeUpstream, field: str) -> None:
    server, _ = gw
    client = genai.Client(api_key="sk-caller", http_options={"base_url": server.url})
    schema: Any = Weather if field == "response_schema" else Weather.model_json_schema()
    config = {"response_mime_type": "application/json", field: schema}
    response = client.models.generate_content(model="anthropic--structured", contents="Weather in Paris", config=config)
    parsed = response.parsed
    assert (parsed if isinstance(parsed, Weather) else Weather(**parsed)) == Weather(city="Paris", temp_c=18)  # type: ignore[arg-type]
    sent = _sent_schema(fake)
    assert set(sent["properties"]) == {"city", "temp_c"} and sent["additionalProperties"] is False


def test_interactions_response_format_reaches_anthropic(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    body = {
        "model": "anthropic--structured",
        "input": "Weather in Paris",
        "store": False,
        "response_format": {"type": "text", "mime_type": "application/json", "schema": Weather.model_json_schema()},
    }
    response = httpx.post(server.url + "/v1beta/interactions", json=body, timeout=10)
    assert response.status_code == 200, response.text
    text = "".join(
        b["text"]
        for s in response.json()["steps"]
        if s["type"] == "model_output"
        for b in s["content"]
        if b["type"] == "text"
    )
    assert Weather.model_validate_json(text) == Weather(city="Paris", temp_c=18)
    _check_weather_schema(_sent_schema(fake))


def test_anthropic_output_config_format_passes_through(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-caller", max_retries=0)
    message = client.messages.parse(
        model="anthropic--structured",
        max_tokens=256,
        messages=[{"role": "user", "content": "Weather?"}],
        output_format=Weather,
    )
    assert message.parsed_output == Weather(city="Paris", temp_c=18)
    _check_weather_schema(_sent_schema(fake))


def test_unsupported_schema_constraints_move_into_the_description(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    schema = {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}}, "required": ["city"]}
    c.openai_client(server.url).chat.completions.create(
        model="anthropic--structured",
        messages=[{"role": "user", "content": "hi"}],
        response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": schema}},
    )
    city = _sent_schema(fake)["properties"]["city"]
    assert "minLength" not in city and "minLength: 2" in city["description"]


def test_json_mode_without_schema_toward_anthropic_is_refused(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    before = _count(fake)
    with pytest.raises(openai.BadRequestError) as info:
        c.openai_client(server.url).chat.completions.create(
            model="anthropic--structured",
            messages=[{"role": "user", "content": "JSON please"}],
            response_format={"type": "json_object"},
        )
    assert info.value.body["param"] == "response_format" and _count(fake) == before  # type: ignore[index]


# --------------------------------------------------------------------------- temperature with top_p toward Anthropic

GEMINI_SAMPLING = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "generationConfig": {"temperature": 1.0, "topP": 0.95},
}


def test_temperature_and_top_p_both_reach_an_anthropic_model_that_takes_them(gw: Any, fake: FakeUpstream) -> None:
    server, capture = gw
    response = httpx.post(
        server.url + "/v1beta/models/anthropic--text:generateContent",
        json=GEMINI_SAMPLING,
        headers={"x-request-id": "req-both"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    body = fake.last("anthropic").body
    assert (body["temperature"], body["top_p"]) == (1.0, 0.95)
    assert "x-gateway-dropped" not in response.headers and capture.line_for("req-both")["dropped"] == []


def test_top_p_dropped_for_a_listed_model_is_said(gw: Any, fake: FakeUpstream) -> None:
    server, capture = gw
    response = httpx.post(
        server.url + "/v1beta/models/exclusive--text:generateContent",
        json=GEMINI_SAMPLING,
        headers={"x-request-id": "req-excl"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    body = fake.last("anthropic").body
    assert body["temperature"] == 1.0 and "top_p" not in body
    assert response.headers["x-gateway-dropped"] == "top_p"
    assert capture.line_for("req-excl")["dropped"] == ["top_p"]
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    assert 'gateway_dropped_settings_total{field="top_p",provider="claude-exclusive"}' in metrics


def test_the_built_in_list_knows_current_claude_models(fake: FakeUpstream) -> None:
    from gateway.dialects.anthropic import models

    for name in (
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-1",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "claude-opus-4-7",
        "claude-sonnet-5",
    ):
        assert models.matches(name, None, models.SAMPLING_EXCLUSIVE), name
    for name in ("claude-sonnet-4-20250514", "claude-3-7-sonnet-20250219", "text"):
        assert not models.matches(name, None, models.SAMPLING_EXCLUSIVE), name
    assert models.matches("claude-opus-4-6", None, models.ADAPTIVE_THINKING) and not models.matches(
        "claude-sonnet-4-5", None, models.ADAPTIVE_THINKING
    )


def test_a_stored_interaction_that_cannot_be_carried_is_refused_before_anything_runs(
    gw: Any, fake: FakeUpstream
) -> None:
    server, _ = gw
    before = _count(fake)
    body = {
        "model": "openai-responses--text",
        "input": "hi",
        "generation_config": {"stop_sequences": ["END"]},
    }  # store defaults to true
    response = httpx.post(server.url + "/v1beta/interactions", json=body, timeout=10)
    assert response.status_code == 400 and "generation_config.stop_sequences" in response.text, response.text
    assert _count(fake) == before
