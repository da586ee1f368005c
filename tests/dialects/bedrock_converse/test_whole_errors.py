"""Whole Converse replies, Bedrock error bodies, usage and stop-reason tables, and the codec's
upstream-only surface (registry, settings, no caller route)."""

from __future__ import annotations

import orjson
import pytest

from gateway.dialects.base import EncodeContext, RequestMeta
from gateway.dialects.bedrock_converse import CODEC
from gateway.dialects.bedrock_converse.stop_reasons import map_stop_reason as stop_from
from gateway.dialects.bedrock_converse.usage import convert_usage as usage_from
from gateway.dialects.registry import available, codec_for
from gateway.errors import GatewayError
from gateway.events import BlockStart, End, MessageStart, StreamError, Usage
from gateway.ir import ChatRequest
from gateway.reply import Reply, fold
from gateway.settings import Settings
from tests.support.event_contract import check_events

from .conftest import load


def test_whole_reply() -> None:
    events = CODEC.decode_whole(load("whole.tool_call"))
    check_events(events, usage=True)
    reply = fold(events)
    assert [b.kind for b in reply.blocks] == ["thinking", "text", "tool_call"]  # citations skipped, renumbered
    assert (
        reply.blocks[0].text == "The weather tool needs a city." and reply.blocks[0].signature == "EqoBCkgIBxABGAIiQFx"
    )
    assert reply.text == "Checking."
    assert (reply.blocks[2].id, reply.blocks[2].name, orjson.loads(reply.blocks[2].arguments)) == (
        "tooluse_2Hk3",
        "type",
        {"city": "Paris"},
    )
    assert reply.usage == Usage(input=120, output=30, cache_read=100, cache_write=None)
    assert reply.end == End("tool_use", "tool_use", None)


def test_whole_reply_redacted_and_stop_sequence() -> None:
    body = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"reasoningContent": {"redactedContent": "b3BhcXVl"}}, {"text": "END is near"}],
            }
        },
        "stopReason": "stop_sequence",
        "additionalModelResponseFields": {"stop_sequence": "END"},
        "usage": {"inputTokens": 5, "outputTokens": 4, "totalTokens": 9},
    }
    events = CODEC.decode_whole(body)
    check_events(events, usage=True)
    assert BlockStart(0, "redacted_thinking", data="b3BhcXVl") in events
    assert events[-1] == End("stop", "stop_sequence", "END")


def test_whole_reply_without_output_still_ends() -> None:
    events = CODEC.decode_whole({"stopReason": "content_filtered"})
    assert isinstance(events[0], MessageStart) and events[-1] == End("content_filter", "content_filtered", None)


@pytest.mark.parametrize(
    ("status", "body", "kind", "want_status", "raw"),
    [
        (
            400,
            b'{"message":"The model returned the following errors: maxTokens must be positive"}',
            "invalid_request",
            400,
            "ValidationException",
        ),
        (
            403,
            b'{"message":"The security token included in the request is invalid."}',
            "permission",
            403,
            "AccessDeniedException",
        ),
        (
            403,
            b'{"Message":"User: arn:aws:iam::1:user/x is not authorized"}',
            "permission",
            403,
            "AccessDeniedException",
        ),
        (
            404,
            b'{"message":"The provided model identifier is invalid."}',
            "not_found",
            404,
            "ResourceNotFoundException",
        ),
        (408, b'{"message":"Model has timed out in processing the request."}', "timeout", 408, "ModelTimeoutException"),
        (424, b'{"message":"Received error from model"}', "bad_gateway", 502, "ModelErrorException"),
        (
            429,
            b'{"message":"Too many requests, please wait before trying again."}',
            "rate_limit",
            429,
            "ThrottlingException",
        ),
        (500, b'{"message":"The server encountered an internal error."}', "api_error", 500, "InternalServerException"),
        (
            503,
            b'{"message":"Bedrock is unable to process your request."}',
            "overloaded",
            503,
            "ServiceUnavailableException",
        ),
        (
            400,
            b'{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}',
            "invalid_request",
            400,
            "ValidationException",
        ),
        (502, b"<html>Bad Gateway</html>", "api_error", 502, None),
    ],
)
def test_decode_error(status: int, body: bytes, kind: str, want_status: int, raw: str | None) -> None:
    err = CODEC.decode_error(status, body)
    assert (err.kind, err.status, err.raw, err.origin) == (kind, want_status, raw, "bedrock-converse")
    text = (
        orjson.loads(body).get("message") or orjson.loads(body).get("Message")
        if body.startswith(b"{")
        else "<html>Bad Gateway</html>"
    )
    assert err.message == text


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_use"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("malformed_model_output", "error"),
        ("malformed_tool_use", "error"),
        ("something_new", "stop"),
        (None, "stop"),
    ],
)
def test_stop_reasons(raw: str | None, reason: str) -> None:
    assert stop_from(raw) == reason


def test_every_stop_reason_of_the_service_model_is_mapped() -> None:
    session = pytest.importorskip("botocore.session")
    shape = session.get_session().get_service_model("bedrock-runtime").shape_for("StopReason")
    from gateway.dialects.bedrock_converse.stop_reasons import FROM_WIRE

    assert set(shape.enum) <= set(FROM_WIRE)


@pytest.mark.parametrize(
    ("usage", "want"),
    [
        ({"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}, Usage(10, 5, None, None)),
        (
            {"inputTokens": 3, "outputTokens": 2, "totalTokens": 1205, "cacheReadInputTokens": 1200},
            Usage(1203, 2, 1200, None),
        ),
        (
            {
                "inputTokens": 3,
                "outputTokens": 2,
                "totalTokens": 105,
                "cacheReadInputTokens": 60,
                "cacheWriteInputTokens": 40,
            },
            Usage(103, 2, 60, 40),
        ),
        (
            {"inputTokens": 1203, "outputTokens": 2, "totalTokens": 1205, "cacheReadInputTokens": 1200},
            Usage(1203, 2, 1200, None),
        ),  # already inclusive
        (
            {
                "inputTokens": 0,
                "outputTokens": 0,
                "totalTokens": 0,
                "cacheReadInputTokens": 0,
                "cacheWriteInputTokens": 0,
            },
            Usage(0, 0, 0, 0),
        ),
        ({"outputTokens": 7}, Usage(None, 7, None, None)),
        ({"inputTokens": True}, Usage(None, None, None, None)),
    ],
)
def test_usage(usage: dict[str, object], want: Usage) -> None:
    assert usage_from(usage) == want


def test_usage_not_an_object() -> None:
    assert usage_from(None) is None and usage_from([1]) is None


def test_exception_kinds_match_the_service_models_statuses() -> None:
    """Each stream exception of botocore's model keeps the meaning of its HTTP status."""
    session = pytest.importorskip("botocore.session")
    from gateway.dialects.bedrock_converse.errors import stream_error

    output = session.get_session().get_service_model("bedrock-runtime").operation_model("ConverseStream").output_shape
    union = output.members["stream"]
    statuses = {
        e.name: e.metadata.get("error", {}).get("httpStatusCode")
        for e in session.get_session()
        .get_service_model("bedrock-runtime")
        .operation_model("ConverseStream")
        .error_shapes
    }
    for name in union.members:
        if not name.endswith("Exception"):
            continue
        err = stream_error(name, {"message": "x"})
        assert isinstance(err, StreamError)
        expected = statuses.get(name[0].upper() + name[1:])
        if expected == 429:
            assert err.kind == "rate_limit"
        elif expected == 400:
            assert err.kind == "invalid_request"
        else:
            assert err.status >= 500


# -- the upstream-only surface --------------------------------------------------------------------
def test_registered_and_upstream_only() -> None:
    assert "bedrock-converse" in available()
    codec = codec_for("bedrock-converse")
    assert codec.name == "bedrock-converse"
    ctx = EncodeContext(model="text", upstream_dialect="bedrock-converse", request=ChatRequest(model="text"))
    with pytest.raises(NotImplementedError):
        codec.parse_request({}, RequestMeta())
    with pytest.raises(NotImplementedError):
        codec.stream_encoder(ctx)
    with pytest.raises(NotImplementedError):
        codec.encode_whole(Reply(), ctx)
    assert (
        codec.auth_headers("bedrock-api-key") == {"authorization": "Bearer bedrock-api-key"}
        and codec.auth_headers(None) == {}
    )
    status, body = codec.render_error(GatewayError("rate_limit", "slow down", 429))
    assert status == 429 and body == {"message": "slow down", "__type": "ThrottlingException"}


def test_a_provider_may_speak_it() -> None:
    settings = Settings(
        providers=[{"name": "bedrock", "dialect": "bedrock-converse", "base_url": "http://127.0.0.1:9"}]
    )
    assert settings.providers[0].dialect == "bedrock-converse"


def test_no_caller_route_speaks_it() -> None:
    from gateway.server.app import create_app

    app = create_app(
        Settings(providers=[{"name": "bedrock", "dialect": "bedrock-converse", "base_url": "http://127.0.0.1:9"}])
    )
    routes = app.routes
    assert routes  # the caller routes are there; none of them is Converse's
    endpoints = [getattr(r, "endpoint", None) for r in routes]
    assert not any(getattr(e, "dialect", None) == "bedrock-converse" for e in endpoints)
    assert not any("converse" in getattr(r, "path", "") for r in routes)


def test_priced_and_named_as_bedrock_without_a_bedrock_host() -> None:
    """The platform layer may derive the host from the region: the dialect alone finds AWS's prices
    and the OpenTelemetry provider name."""
    pytest.importorskip("genai_prices")
    from gateway.governance.prices import PriceBook
    from gateway.settings import ProviderSettings
    from gateway.telemetry.traces import provider_attributes
    from gateway.upstream.providers import Provider

    provider = ProviderSettings(name="bedrock", dialect="bedrock-converse", base_url="http://127.0.0.1:9")
    assert PriceBook({}).lookup(provider, "meta.llama3-3-70b-instruct-v1:0") is not None
    assert provider_attributes(Provider(provider))["gen_ai.provider.name"] == "aws.bedrock"
