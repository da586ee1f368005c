"""Every failure a caller can cause gets a clear error in its own dialect with the right status."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

ENDPOINTS = {
    "anthropic": ("/v1/messages", {"model": "demo", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    "openai-chat": ("/v1/chat/completions", {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}),
    "openai-responses": ("/v1/responses", {"model": "demo", "input": "hi"}),
    "gemini": ("/v1beta/models/demo:generateContent", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
}


def assert_shape(dialect: str, status: int, response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    if dialect == "anthropic":
        assert body["type"] == "error"
        assert isinstance(body["error"]["type"], str) and body["error"]["message"]
    elif dialect in ("openai-chat", "openai-responses"):
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert "type" in body["error"]
    else:
        assert body["error"]["code"] == status
        assert body["error"]["message"] and isinstance(body["error"]["status"], str)
    return body


def post(gateway: Any, dialect: str, content: bytes, content_type: str = "application/json") -> httpx.Response:
    path, _ = ENDPOINTS[dialect]
    return httpx.post(gateway.url + path, content=content, headers={"content-type": content_type}, timeout=10)


DIALECTS = list(ENDPOINTS)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_valid_request_works(gateway: Any, dialect: str) -> None:

    path, body = ENDPOINTS[dialect]
    response = httpx.post(gateway.url + path, json=body, timeout=10)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("dialect", DIALECTS)
def test_malformed_json(gateway: Any, dialect: str) -> None:
    body = assert_shape(dialect, 400, post(gateway, dialect, b'{"model": "demo", '))
    assert "JSON" in str(body)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("payload", [b"[]", b'"text"', b"42", b"null"])
def test_body_not_an_object(gateway: Any, dialect: str, payload: bytes) -> None:
    assert_shape(dialect, 400, post(gateway, dialect, payload))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_empty_body(gateway: Any, dialect: str) -> None:
    assert_shape(dialect, 400, post(gateway, dialect, b""))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_invalid_utf8(gateway: Any, dialect: str) -> None:
    body = assert_shape(dialect, 400, post(gateway, dialect, b'{"model": "\xff\xfe"}'))
    assert "UTF-8 (byte 11)" in str(body)  # worded as such, not as a JSON error


@pytest.mark.parametrize("dialect", DIALECTS)
def test_wrong_content_type(gateway: Any, dialect: str) -> None:
    import orjson

    assert_shape(dialect, 415, post(gateway, dialect, orjson.dumps(ENDPOINTS[dialect][1]), "text/plain"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_deeply_nested(gateway: Any, dialect: str) -> None:
    deep = b"[" * 200 + b"]" * 200
    assert_shape(dialect, 400, post(gateway, dialect, b'{"model": "demo", "x": ' + deep + b"}"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_nested_one_level_past_the_limit(gateway: Any, dialect: str) -> None:
    # max_json_depth = 64: the object is level 1, so 63 arrays fit and 64 do not
    def nested(n: int) -> bytes:
        return b'{"model": "demo", "x": ' + b"[" * n + b"]" * n + b"}"

    body = assert_shape(dialect, 400, post(gateway, dialect, nested(64)))
    assert "nested deeper than 64" in str(body)
    assert "nested deeper" not in post(gateway, dialect, nested(63)).text


@pytest.mark.parametrize("dialect", DIALECTS)
def test_oversize_body(gateway: Any, dialect: str) -> None:
    big = b'{"model": "demo", "pad": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    assert_shape(dialect, 413, post(gateway, dialect, big))


@pytest.mark.parametrize("dialect", ["anthropic", "openai-chat", "openai-responses"])
def test_missing_model(gateway: Any, dialect: str) -> None:
    import orjson

    body = dict(ENDPOINTS[dialect][1])
    body.pop("model")
    assert_shape(dialect, 400, post(gateway, dialect, orjson.dumps(body)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unknown_model(gateway: Any, dialect: str) -> None:
    import orjson

    path, body = ENDPOINTS[dialect]
    if dialect == "gemini":
        response = httpx.post(gateway.url + "/v1beta/models/no-such-model:generateContent", json=body, timeout=10)
    else:
        response = httpx.post(
            gateway.url + path,
            content=orjson.dumps({**body, "model": "no-such-model"}),
            headers={"content-type": "application/json"},
            timeout=10,
        )
    text = str(assert_shape(dialect, 404, response))
    assert "no-such-model" in text


WRONG_TYPES = {
    "anthropic": [
        {"messages": "hi"},
        {"max_tokens": "ten"},
        {"messages": [{"role": "user", "content": 5}]},
        {"temperature": "hot"},
        {"model": 7},
    ],
    "openai-chat": [
        {"messages": "hi"},
        {"max_tokens": "ten"},
        {"messages": [{"role": "user", "content": 5}]},
        {"temperature": "hot"},
        {"model": 7},
    ],
    "openai-responses": [{"input": 5}, {"max_output_tokens": "ten"}, {"temperature": "hot"}, {"model": 7}],
    "gemini": [
        {"contents": "hi"},
        {"generationConfig": {"maxOutputTokens": "ten"}},
        {"contents": [{"role": "user", "parts": "x"}]},
    ],
}


@pytest.mark.parametrize("dialect,patch", [(d, p) for d, ps in WRONG_TYPES.items() for p in ps])
def test_wrong_field_types(gateway: Any, dialect: str, patch: dict[str, Any]) -> None:
    import orjson

    body = {**ENDPOINTS[dialect][1], **patch}
    assert_shape(dialect, 400, post(gateway, dialect, orjson.dumps(body)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_absurd_max_tokens(gateway: Any, dialect: str) -> None:
    import orjson

    _path, body = ENDPOINTS[dialect]
    field = {"anthropic": "max_tokens", "openai-chat": "max_tokens", "openai-responses": "max_output_tokens"}.get(
        dialect
    )
    if field:
        body = {**body, field: 10**12}
    else:
        body = {**body, "generationConfig": {"maxOutputTokens": 10**12}}
    assert_shape(dialect, 400, post(gateway, dialect, orjson.dumps(body)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_internal_bug_is_an_in_dialect_500_not_a_traceback(
    gateway: Any, dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orjson

    from gateway.routing.router import Router

    def broken(self: Router, model: str) -> None:
        raise KeyError("simulated bug")

    monkeypatch.setattr(Router, "resolve", broken)
    path, body = ENDPOINTS[dialect]
    response = httpx.post(
        gateway.url + path, content=orjson.dumps(body), headers={"content-type": "application/json"}, timeout=10
    )
    data = assert_shape(dialect, 500, response)
    assert "Traceback" not in response.text and "KeyError" in str(data)


def test_a_model_name_cannot_steer_a_gemini_upstream_url(gateway: Any, fake: Any) -> None:
    # provider/model addressing hands the caller's model name to the upstream URL path
    from gateway.dialects.gemini.request_build import model_path

    before = len(fake.received)
    for model in ("up-gemini/../tunedModels/x:transferOwnership?", "up-gemini/./gemini--text", "up-gemini/a//b"):
        r = httpx.post(
            gateway.url + "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
        )
        assert r.status_code == 400, r.text
        assert "cannot be used in a Gemini URL" in r.json()["error"]["message"]
    assert len(fake.received) == before  # nothing reached the upstream
    assert model_path("tunedModels/my-model-1") == "tunedModels/my-model-1"
    assert model_path("models/gemini-2.5-pro") == "gemini-2.5-pro"
    assert model_path("x?alt=json#y") == "x%3Falt=json%23y"
