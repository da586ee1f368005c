"""gateway/errors.py (kinds, statuses) and each caller dialect's error codec: an upstream error
body decodes to a ``GatewayError`` of the right kind, and every kind renders as a body of the
caller's own dialect with a sensible status, never a 500 by accident."""

from __future__ import annotations

import orjson
import pytest

from gateway.dialects.registry import MODULES, codec_for
from gateway.errors import STATUS_BY_KIND, GatewayError, invalid, kind_for_status

KINDS = list(STATUS_BY_KIND)
CALLERS = [d for d in MODULES if d != "bedrock-converse"]  # the upstream-only dialect renders nothing


@pytest.mark.parametrize(
    "status,kind",
    [
        (400, "invalid_request"),
        (422, "invalid_request"),
        (401, "authentication"),
        (403, "permission"),
        (404, "not_found"),
        (413, "request_too_large"),
        (429, "rate_limit"),
        (503, "overloaded"),
        (529, "overloaded"),
        (504, "timeout"),
        (408, "timeout"),
        (500, "api_error"),
        (502, "api_error"),
        (418, "invalid_request"),
    ],
)
def test_kind_for_status(status: int, kind: str) -> None:
    assert kind_for_status(status) == kind


def test_gateway_error_defaults() -> None:
    err = GatewayError("rate_limit", "slow down")
    assert (err.status, err.raw, err.origin, str(err)) == (429, None, None, "slow down")
    assert GatewayError("made_up", "x").status == 500
    bad = invalid("messages: field required", param="messages")
    assert (bad.kind, bad.status, bad.param) == ("invalid_request", 400, "messages")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dialect", CALLERS)
def test_every_kind_renders_in_the_callers_dialect(dialect: str, kind: str) -> None:
    status, body = codec_for(dialect).render_error(GatewayError(kind, "the message", param="model"))
    assert 400 <= status < 600 or (kind == "cancelled" and status == 499)
    assert "the message" in orjson.dumps(body).decode()


ERROR_BODIES = {
    "anthropic": (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}),
    "openai-chat": (429, {"error": {"message": "slow", "type": "requests", "code": "rate_limit_exceeded"}}),
    "openai-responses": (429, {"error": {"message": "slow", "type": "requests", "code": "rate_limit_exceeded"}}),
    "gemini": (429, {"error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED"}}),
    "gemini-interactions": (429, {"error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED"}}),
}


@pytest.mark.parametrize("dialect", CALLERS)
def test_an_upstream_error_body_decodes_and_renders_back(dialect: str) -> None:
    status, body = ERROR_BODIES[dialect]
    err = codec_for(dialect).decode_error(status, orjson.dumps(body))
    assert (err.kind, err.status, err.message) == ("rate_limit", 429, "slow")
    shown_status, shown = codec_for(dialect).render_error(err)
    assert shown_status == 429 and "slow" in orjson.dumps(shown).decode()


@pytest.mark.parametrize("dialect", CALLERS)
@pytest.mark.parametrize("body", [b"", b"<html>bad gateway</html>", b"[]", b'{"error": 7}'])
def test_an_unreadable_error_body_is_still_an_error(dialect: str, body: bytes) -> None:
    err = codec_for(dialect).decode_error(503, body)
    assert isinstance(err, GatewayError) and err.status >= 400


def test_an_openai_code_a_caller_acts_on_survives_the_round_trip() -> None:
    """OpenAI → gateway → OpenAI caller: ``code: context_length_exceeded`` is what clients branch on
    (trim the history and retry); the type alone would lose it."""
    from gateway.dialects.openai_chat import errors

    body = b'{"error":{"message":"maximum context length is 128000 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}'
    status, out = errors.render_error(errors.decode_error(400, body))
    assert status == 400
    assert out["error"] == {
        "message": "maximum context length is 128000 tokens",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    status, out = errors.render_error(
        errors.decode_error(
            429, b'{"error":{"message":"slow down","type":"tokens","param":null,"code":"rate_limit_exceeded"}}'
        )
    )
    assert (status, out["error"]["type"], out["error"]["code"]) == (429, "tokens", "rate_limit_exceeded")
