"""Guardrails seen by the official SDKs in four dialects, whole and streamed: the loopback upstream
records what it received (never the raw value of a redacting guardrail) and streams its answer
with the personal data split at every chunk size; the access log, /admin/requests and the
metrics are searched for the raw values.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import anthropic_client, gemini_client, openai_client
from tests.support.fake_upstream import ServerThread

EMAIL, CARD = "jane.roe@example.com", "4111 1111 1111 1111"
PROMPT = f"My email is {EMAIL} and my card is {CARD}."
PROMPT_REDACTED = "My email is [REDACTED:email] and my card is [REDACTED:credit_card]."
ANSWER = f"Sure: I will write to {EMAIL}, card {CARD}. Bye."
ANSWER_REDACTED = "Sure: I will write to [REDACTED:email], card [REDACTED:credit_card]. Bye."
ADMIN = "admin-secret-key"


class ChatUpstream:
    """An OpenAI-chat upstream: records each body; answers ANSWER, streamed ``n`` characters a chunk
    for a model named ``<anything>-<n>``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def answer(self, body: dict[str, Any]) -> str:
        return ANSWER

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            msg = await receive()
            raw += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        body = orjson.loads(raw)
        self.bodies.append(body)
        model = body["model"]
        size = int(model.rsplit("-", 1)[1]) if model.rsplit("-", 1)[-1].isdigit() else 1000
        answer = self.answer(body)
        if not body.get("stream"):
            whole = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": orjson.dumps(whole)})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})

        def chunk(delta: dict[str, Any], finish: str | None = None, usage: bool = False) -> bytes:
            obj: dict[str, Any] = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage:
                obj["choices"] = []
                obj["usage"] = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
            return b"data: " + orjson.dumps(obj) + b"\n\n"

        frames = [chunk({"role": "assistant", "content": ""})]
        frames += [chunk({"content": answer[i : i + size]}) for i in range(0, len(answer), size)]
        frames += [chunk({}, "stop"), chunk({}, usage=True), b"data: [DONE]\n\n"]
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[ChatUpstream, ServerThread]]:
    up = ChatUpstream()
    with ServerThread(up) as server:
        yield up, server


@pytest.fixture(scope="module")
def gateway(upstream: tuple[ChatUpstream, ServerThread]) -> Iterator[tuple[str, Capture]]:
    _, server = upstream
    config = {
        "server": {"access_log": True, "keepalive_seconds": 0.5},
        "auth": {"keys_env": ""},
        "admin": {"key": ADMIN},
        "store": {"url": "sqlite://:memory:"},
        "inspector": {"capture": "all"},
        "providers": [{"name": "up", "dialect": "openai-chat", "base_url": server.url + "/v1", "api_key": "sk-up"}],
        "guardrails": [
            {"name": "pii", "kind": "pii", "action": "redact"},
            {"name": "no-cards", "kind": "pii", "types": ["credit_card"], "action": "block"},
            {"name": "no-cards-out", "kind": "pii", "types": ["credit_card"], "action": "block", "on": ["response"]},
            {
                "name": "watch",
                "kind": "regex",
                "action": "log",
                "patterns": [{"name": "falcon", "pattern": "(?i)falcon"}],
            },
        ],
        "routes": [
            {"model": "redact-*", "provider": "up", "guardrails": ["pii"]},
            {"model": "block-req-*", "provider": "up", "guardrails": ["no-cards"]},
            {"model": "log-*", "provider": "up", "guardrails": ["watch"]},
            {"model": "block-ans-*", "provider": "up", "guardrails": ["no-cards-out"]},
        ],
    }
    with capture_access_log() as capture, ServerThread(create_app(Settings(**config))) as gw:
        yield gw.url, capture


def _anthropic(url: str, model: str, prompt: str, stream: bool) -> str:
    client = anthropic_client(url)
    messages: Any = [{"role": "user", "content": prompt}]
    if stream:
        with client.messages.stream(model=model, max_tokens=100, messages=messages) as s:
            text = "".join(s.text_stream)
        return text
    reply = client.messages.create(model=model, max_tokens=100, messages=messages)
    return "".join(b.text for b in reply.content if b.type == "text")


def _chat(url: str, model: str, prompt: str, stream: bool) -> str:
    client = openai_client(url)
    messages: Any = [{"role": "user", "content": prompt}]
    if stream:
        return "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model=model, messages=messages, stream=True)
            if c.choices
        )
    return client.chat.completions.create(model=model, messages=messages).choices[0].message.content or ""


def _responses(url: str, model: str, prompt: str, stream: bool) -> str:
    client = openai_client(url)
    if stream:
        with client.responses.stream(model=model, input=prompt) as s:
            for _ in s:
                pass
            return s.get_final_response().output_text
    return client.responses.create(model=model, input=prompt).output_text


def _gemini(url: str, model: str, prompt: str, stream: bool) -> str:
    client = gemini_client(url)
    config = genai_types.GenerateContentConfig(max_output_tokens=100)
    if stream:
        return "".join(
            c.text or "" for c in client.models.generate_content_stream(model=model, contents=prompt, config=config)
        )
    return client.models.generate_content(model=model, contents=prompt, config=config).text or ""


CALLERS = {"anthropic": _anthropic, "openai-chat": _chat, "openai-responses": _responses, "gemini": _gemini}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", list(CALLERS))
def test_redacted_both_ways(
    gateway: tuple[str, Capture], upstream: tuple[ChatUpstream, ServerThread], dialect: str, stream: bool
) -> None:
    url, capture = gateway
    up, _ = upstream
    sizes = [1, 2, 3, 5, 7, 11] if stream else [1000]
    for size in sizes:
        before = len(up.bodies)
        model = f"redact-{dialect}-{int(stream)}-{size}"
        text = CALLERS[dialect](url, model, PROMPT, stream)
        assert text == ANSWER_REDACTED, (size, text)
        sent = orjson.dumps(up.bodies[before:]).decode()
        assert EMAIL not in sent and CARD not in sent
        assert PROMPT_REDACTED in sent
        line = capture.line_where(lambda entry, model=model: entry.get("model") == model)
        assert EMAIL not in orjson.dumps(line).decode()
        acted = {(g["name"], g["where"]): g for g in line["guardrails"]}
        assert acted[("pii", "request")]["types"] == ["credit_card", "email"]
        assert acted[("pii", "response")]["action"] == "redact"


def test_nothing_raw_in_admin_requests_inspector_or_metrics(gateway: tuple[str, Capture]) -> None:
    url, _ = gateway
    _chat(url, "redact-admin-3", PROMPT, True)
    headers = {"authorization": f"Bearer {ADMIN}"}
    for path in ("/admin/requests", "/admin/inspector"):
        r = httpx.get(url + path, headers=headers)
        if r.status_code == 404:
            continue
        assert EMAIL not in r.text and CARD not in r.text
    metrics = httpx.get(url + "/metrics").text
    assert 'gateway_guardrail_actions_total{action="redact",guardrail="pii",where="response"}' in metrics


def test_a_blocked_request_is_a_400_in_each_dialect_and_nothing_goes_upstream(
    gateway: tuple[str, Capture], upstream: tuple[ChatUpstream, ServerThread]
) -> None:
    url, _ = gateway
    up, _ = upstream
    before = len(up.bodies)
    for dialect, call in CALLERS.items():
        with pytest.raises((anthropic.BadRequestError, openai.BadRequestError, genai_errors.ClientError)) as info:
            call(url, f"block-req-{dialect}", PROMPT, False)
        exc = info.value
        assert getattr(exc, "status_code", getattr(exc, "code", None)) == 400
        assert "no-cards" in str(exc) and "guardrail" in str(exc)
    assert len(up.bodies) == before
    r = httpx.post(
        url + "/v1/chat/completions", json={"model": "block-req-x", "messages": [{"role": "user", "content": PROMPT}]}
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "guardrail_blocked"
    assert CARD not in r.text


def test_log_forwards_unchanged_and_records(
    gateway: tuple[str, Capture], upstream: tuple[ChatUpstream, ServerThread]
) -> None:
    url, capture = gateway
    up, _ = upstream
    text = _chat(url, "log-chat-4", "Tell me about Project Falcon.", True)
    assert text == ANSWER
    assert "Project Falcon" in orjson.dumps(up.bodies[-1]).decode()
    line = capture.line_where(lambda entry: entry.get("model") == "log-chat-4")
    assert line["guardrails"] == [{"name": "watch", "action": "log", "where": "request", "types": ["falcon"]}]


@pytest.mark.parametrize("size", [1, 3, 8])
def test_a_blocked_answer_ends_the_stream_with_an_error_and_none_of_the_match(
    gateway: tuple[str, Capture], size: int
) -> None:
    url, capture = gateway
    model = f"block-ans-chat-{size}"
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for c in openai_client(url).chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            if c.choices:
                got.append(c.choices[0].delta.content or "")
    assert "no-cards-out" in str(info.value)
    delivered = "".join(got)
    assert ANSWER.startswith(delivered)
    assert "4111" not in delivered
    line = capture.line_where(lambda entry: entry.get("model") == model)
    assert line["error_kind"] == "guardrail_blocked"
    assert line["guardrails"][0]["where"] == "response"


def test_a_blocked_whole_answer_is_a_400(gateway: tuple[str, Capture]) -> None:
    url, _ = gateway
    with pytest.raises(anthropic.BadRequestError) as info:
        _anthropic(url, "block-ans-whole", "hi", False)
    assert "no-cards-out" in str(info.value) and CARD not in str(info.value)


def test_startup_refuses_an_unknown_guardrail_name() -> None:
    from gateway.guardrails.engine import GuardrailConfigError

    config = {
        "auth": {"keys_env": ""},
        "store": {"url": "sqlite://:memory:"},
        "providers": [{"name": "up", "dialect": "openai-chat", "base_url": "http://127.0.0.1:9", "api_key": "k"}],
        "guardrails": [{"name": "pii", "kind": "pii"}],
        "routes": [{"model": "*", "provider": "up", "guardrails": ["pii", "nope"]}],
    }
    with pytest.raises(GuardrailConfigError, match="nope"):
        create_app(Settings(**config))


@pytest.mark.parametrize("store", [False, True], ids=["unstored", "stored-detached"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_gemini_interactions_answer_is_redacted(gateway: tuple[str, Capture], stream: bool, store: bool) -> None:
    """The SDK's default (``store`` on) runs the generation detached from the request: its stored
    events, and so what the caller and any resume read, are the guarded answer too."""
    from tests.support.callers import interactions_call

    url, capture = gateway
    for size in [1, 4, 9] if stream else [1000]:
        model = f"redact-interactions-{int(stream)}-{int(store)}-{size}"
        out = interactions_call(url, model, "text", stream, store=store)
        assert out.text == ANSWER_REDACTED, (size, out.text)
        line = capture.line_where(lambda entry, model=model: entry.get("model") == model)
        assert {(g["name"], g["where"]) for g in line["guardrails"]} == {("pii", "response")}
