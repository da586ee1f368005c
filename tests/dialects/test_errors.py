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


# Errors no wait can heal (issue 30 item 7): each dialect's decoder says so, from its providers'
# documented error bodies; a rate limit and a server error still heal by waiting.
LASTING_CASES = [
    (
        "openai-chat",
        429,
        {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
        True,
    ),
    (
        "openai-chat",
        400,
        {
            "error": {
                "message": "Billing hard limit has been reached",
                "type": "invalid_request_error",
                "code": "billing_hard_limit_reached",
            }
        },
        True,
    ),
    (
        "openai-chat",
        401,
        {
            "error": {
                "message": "Incorrect API key provided",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
        True,
    ),
    ("openai-chat", 402, {"error": {"message": "Insufficient Balance", "type": "unknown_error"}}, True),
    (
        "openai-chat",
        429,
        {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
        False,
    ),
    (
        "openai-responses",
        429,
        {"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}},
        True,
    ),
    ("openai-responses", 500, {"error": {"message": "oops", "type": "server_error"}}, False),
    ("anthropic", 402, {"type": "error", "error": {"type": "billing_error", "message": "billing"}}, True),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
            },
        },
        True,
    ),
    ("anthropic", 429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, False),
    ("anthropic", 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, False),
    (
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                    }
                ],
            }
        },
        True,
    ),
    ("gemini", 403, {"error": {"code": 403, "message": "denied", "status": "PERMISSION_DENIED"}}, True),
    ("gemini", 429, {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}, False),
    (
        "gemini-interactions",
        400,
        {
            "error": {
                "code": 400,
                "message": "API key not valid.",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
            }
        },
        True,
    ),
    ("gemini-interactions", 429, {"error": {"code": "resource_exhausted", "message": "slow down"}}, False),
]


@pytest.mark.parametrize("dialect,status,body,lasting", LASTING_CASES)
def test_errors_that_cannot_heal_by_waiting(dialect: str, status: int, body: object, lasting: bool) -> None:
    from gateway.dialects.registry import codec_for

    err = codec_for(dialect).decode_error(status, orjson.dumps(body))
    assert err.lasting is lasting
    assert err.heals_by_waiting is not lasting


def test_an_in_stream_spent_quota_cannot_heal_by_waiting() -> None:
    from gateway.dialects.openai_chat.errors import stream_error

    assert stream_error({"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}).lasting
    assert not stream_error({"message": "busy", "type": "server_error"}).lasting
