"""Issue 28 item 2: what popular clients send by default works on every upstream dialect untuned.

The real server with the default config (no ``drop_unsupported`` anywhere) and the recording fake
upstream behind it. Per upstream dialect: the hints clients send by default that it has no place for
(Gemini CLI's ``generationConfig.topK``, pydantic-ai's ``strict: true`` on every tool) are dropped and
reported (``x-gateway-dropped``, the access log's ``dropped``) while the tool schema itself still goes;
settings that change what the answer means stay refused with a 400 naming the caller's own parameter,
nothing sent upstream; a provider's ``refuse_unsupported`` makes a hint strict again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
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
    assert not any(p.get("drop_unsupported") for p in config["providers"])
    config["providers"].append(
        {
            "name": "strict-chat",
            "dialect": "openai-chat",
            "base_url": url + "/v1",
            "api_key": "sk-up",
            "max_retries": 0,
            "refuse_unsupported": ["top_k"],
        }
    )
    config["routes"].insert(0, {"model": "strict--*", "provider": "strict-chat"})
    with ServerThread(create_app(Settings(**config))) as server:
        yield server, capture
    access.removeHandler(capture)


# Gemini CLI's request: generationConfig always carries topK (and temperature, topP).
GEMINI_CLI = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "generationConfig": {"temperature": 1.0, "topP": 0.95, "topK": 64},
}

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def pydantic_ai_chat(model: str) -> dict[str, Any]:
    """A Chat request as pydantic-ai makes it: every function tool marked strict."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER, "strict": True}}
    return {"model": model, "messages": [{"role": "user", "content": "weather?"}], "tools": [tool]}


def _gemini(server: ServerThread, model: str, body: dict[str, Any], request_id: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1beta/models/{model}:generateContent",
        json=body,
        headers={"x-request-id": request_id},
        timeout=10,
    )


def _chat(server: ServerThread, body: dict[str, Any], request_id: str) -> httpx.Response:
    return httpx.post(server.url + "/v1/chat/completions", json=body, headers={"x-request-id": request_id}, timeout=10)


@pytest.mark.parametrize("upstream", ["openai-chat", "openai-responses", "gemini-interactions"])
def test_gemini_clis_top_k_is_dropped_and_reported(gw: Any, fake: FakeUpstream, upstream: str) -> None:
    server, capture = gw
    rid = f"req-topk-{upstream}"
    response = _gemini(server, f"{upstream}--text", GEMINI_CLI, rid)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped"] == "top_k"
    sent = orjson.dumps(fake.last(upstream).body).decode()
    assert "top_k" not in sent and "topK" not in sent and "0.95" in sent
    assert capture.line_for(rid)["dropped"] == ["top_k"]


@pytest.mark.parametrize("upstream", ["anthropic", "gemini"])
def test_top_k_is_carried_where_the_upstream_has_it(gw: Any, fake: FakeUpstream, upstream: str) -> None:
    server, _ = gw
    response = _gemini(server, f"{upstream}--text", GEMINI_CLI, f"req-topk-carried-{upstream}")
    assert response.status_code == 200, response.text
    assert "x-gateway-dropped" not in response.headers
    body = fake.last(upstream).body
    assert (body.get("top_k") or body.get("generationConfig", {}).get("topK")) == 64


@pytest.mark.parametrize("upstream", ["gemini", "gemini-interactions"])
def test_strict_tools_are_sent_without_strict_and_reported(gw: Any, fake: FakeUpstream, upstream: str) -> None:
    server, capture = gw
    rid = f"req-strict-{upstream}"
    response = _chat(server, pydantic_ai_chat(f"{upstream}--text"), rid)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped"] == "tools.strict"
    sent = orjson.dumps(fake.last(upstream).body).decode()
    assert "get_weather" in sent and '"city"' in sent, "the tool and its schema still go"
    assert "strict" not in sent
    assert capture.line_for(rid)["dropped"] == ["tools.strict"]


@pytest.mark.parametrize("upstream", ["anthropic", "openai-chat", "openai-responses"])
def test_strict_tools_are_carried_where_the_upstream_has_strict(gw: Any, fake: FakeUpstream, upstream: str) -> None:
    server, _ = gw
    response = _chat(server, pydantic_ai_chat(f"{upstream}--text"), f"req-strict-carried-{upstream}")
    assert response.status_code == 200, response.text
    assert "x-gateway-dropped" not in response.headers
    assert '"strict":true' in orjson.dumps(fake.last(upstream).body).decode()


# Semantic settings each upstream dialect cannot carry: (caller body, the caller's parameter).
SEMANTIC = {
    "anthropic": (
        lambda m: {
            "model": m,
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_object"},
        },
        "response_format",
    ),
    "openai-responses": (
        lambda m: {"model": m, "messages": [{"role": "user", "content": "hi"}], "stop": ["END"]},
        "stop",
    ),
    "gemini": (
        lambda m: {**pydantic_ai_chat(m), "parallel_tool_calls": False},
        "parallel_tool_calls",
    ),
    "gemini-interactions": (
        lambda m: {**pydantic_ai_chat(m), "parallel_tool_calls": False},
        "parallel_tool_calls",
    ),
}


@pytest.mark.parametrize("upstream", ["anthropic", "openai-responses", "gemini", "gemini-interactions"])
def test_settings_that_change_the_answer_stay_refused(gw: Any, fake: FakeUpstream, upstream: str) -> None:
    server, _ = gw
    build, param = SEMANTIC[upstream]
    before = len(fake.received)
    response = _chat(server, build(f"{upstream}--text"), f"req-semantic-{upstream}")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"].startswith(f"{param}:")
    assert len(fake.received) == before, "nothing may reach the upstream for a refused request"


def test_a_gemini_caller_is_refused_in_its_own_terms(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    before = len(fake.received)
    body = {**GEMINI_CLI, "generationConfig": {"stopSequences": ["END"]}}
    response = _gemini(server, "openai-responses--text", body, "req-semantic-gemini-caller")
    assert response.status_code == 400 and response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "generationConfig.stopSequences" in response.text and len(fake.received) == before


def test_refuse_unsupported_makes_a_hint_strict(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    before = len(fake.received)
    response = _gemini(server, "strict--text", GEMINI_CLI, "req-refuse-topk")
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("generationConfig.topK:") and "refuse_unsupported" in message
    assert len(fake.received) == before
    # the same request without topK goes through
    plain = {**GEMINI_CLI, "generationConfig": {"temperature": 1.0}}
    assert _gemini(server, "strict--text", plain, "req-refuse-topk-ok").status_code == 200


def test_refuse_unsupported_names_are_checked_at_config_load() -> None:
    from pydantic import ValidationError

    from gateway.settings import ProviderSettings

    with pytest.raises(ValidationError, match=r"refuse_unsupported: unknown field.*topK"):
        ProviderSettings(name="p", dialect="openai-chat", base_url="http://x", refuse_unsupported=["topK"])


@pytest.mark.parametrize("upstream", ["anthropic", "openai-responses", "gemini", "gemini-interactions"])
def test_chat_sampling_hints_toward_another_dialect_are_reported(gw: Any, fake: FakeUpstream, upstream: str) -> None:
    server, capture = gw
    rid = f"req-penalty-{upstream}"
    body = {
        "model": f"{upstream}--text",
        "messages": [{"role": "user", "content": "hi"}],
        "presence_penalty": 0.5,
        "frequency_penalty": 0.2,
        "seed": 7,
        "logprobs": False,  # the default: nothing lost
    }
    response = _chat(server, body, rid)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped"] == "presence_penalty, frequency_penalty, seed"
    assert capture.line_for(rid)["dropped"] == ["presence_penalty", "frequency_penalty", "seed"]


def test_chat_sampling_hints_reach_a_chat_upstream(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    body = {"model": "openai-chat--text", "messages": [{"role": "user", "content": "hi"}], "seed": 7}
    response = _chat(server, body, "req-seed-chat")
    assert response.status_code == 200 and "x-gateway-dropped" not in response.headers
    assert fake.last("openai-chat").body["seed"] == 7


def test_gemini_sampling_hints_toward_chat_are_reported(gw: Any, fake: FakeUpstream) -> None:
    server, _ = gw
    body = {**GEMINI_CLI, "generationConfig": {"seed": 3, "presencePenalty": 0.1, "candidateCount": 1}}
    response = _gemini(server, "openai-chat--text", body, "req-seed-gemini")
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped"] == "presence_penalty, seed"
