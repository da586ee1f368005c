"""What the cloud platforms really send, checked independently of the doubles (issue 19 audit).

The bodies below are the platforms' documented / observed wire shapes (sources in each table
row's comment), not the doubles' (which were written with the code). Decoding tables run the
platform's ``decode_error`` then the codec's, exactly as ``gateway.relay.attempts`` does; the end-to-end
tests run the openai / anthropic SDKs through the gateway to a loopback upstream that answers
with those exact bodies and headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.dialects.openai_chat import errors as chat_errors
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.platforms import platform_for
from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import ProviderSettings, Settings
from tests.support.fake_upstream import ServerThread

# Azure's 429 (code a STRING), prompt filter 400 and unknown deployment 404, as pasted in
# github.com/jasonacox/TinyLLM/issues/17, github.com/openai/openai-dotnet/issues/55,
# github.com/compl-ai/compl-ai/issues/20 and Azure's REST reference.
AZURE_429 = {
    "error": {
        "code": "429",
        "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 7 seconds.",
    }
}
AZURE_FILTER = {
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                "hate": {"filtered": False, "severity": "safe"},
                "violence": {"filtered": True, "severity": "medium"},
            },
        },
    }
}
AZURE_404 = {
    "error": {
        "code": "DeploymentNotFound",
        "message": "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.",
    }
}
# Vertex's error for streamGenerateContent without alt=sse is a JSON array of one error object.
VERTEX_LIST_429 = [
    {
        "error": {
            "code": 429,
            "message": "Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project_per_base_model with base model: claude-sonnet-4-5.",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
]


def _ps(dialect: str, platform: str) -> ProviderSettings:
    extra: dict[str, Any] = {
        "vertex": {"project": "p", "location": "us-east5"},
        "azure": {"api_version": "2024-10-21", "api_key": "k"},
        "bedrock": {"region": "us-east-1", "api_key": "k"},
    }[platform]
    return ProviderSettings(
        name="p", dialect=dialect, platform=platform, base_url="https://my-resource.openai.azure.com", **extra
    )


def decode(dialect: str, platform: str, status: int, body: Any, headers: dict[str, str] | None = None) -> GatewayError:
    """As gateway.relay.attempts decodes an upstream error: the platform's decoder, then the codec's."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return platform_for(_ps(dialect, platform)).decode_error(status, httpx.Headers(headers or {}), raw) or codec_for(
        dialect
    ).decode_error(status, raw)


@pytest.mark.parametrize(
    ("dialect", "platform", "status", "body", "headers", "kind", "code", "raw"),
    [
        ("openai-chat", "azure", 429, AZURE_429, {}, "rate_limit", 429, None),  # a numeric code is no error type
        ("openai-chat", "azure", 400, AZURE_FILTER, {}, "invalid_request", 400, "content_filter"),
        ("openai-chat", "azure", 404, AZURE_404, {}, "not_found", 404, "DeploymentNotFound"),
        ("openai-responses", "azure", 429, AZURE_429, {}, "rate_limit", 429, None),
        (
            "anthropic",
            "vertex",
            429,
            VERTEX_LIST_429,
            {},
            "rate_limit",
            429,
            "RESOURCE_EXHAUSTED",
        ),  # the list form, for Claude too
        ("gemini", "vertex", 429, VERTEX_LIST_429, {}, "rate_limit", 429, "RESOURCE_EXHAUSTED"),
        (
            "anthropic",
            "vertex",
            403,
            {
                "error": {
                    "code": 403,
                    "message": "Permission 'aiplatform.endpoints.predict' denied",
                    "status": "PERMISSION_DENIED",
                }
            },
            {},
            "permission",
            403,
            "PERMISSION_DENIED",
        ),
        (
            "anthropic",
            "vertex",
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            {},
            "overloaded",
            529,
            "overloaded_error",
        ),
        (
            "anthropic",
            "bedrock",
            400,
            {"message": "messages.0: text content blocks must be non-empty"},
            {"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
            "invalid_request",
            400,
            "ValidationException",
        ),
        (
            "anthropic",
            "bedrock",
            429,
            {"message": "Too many tokens, please wait before trying again."},
            {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"},
            "rate_limit",
            429,
            "ThrottlingException",
        ),
        (
            "anthropic",
            "bedrock",
            403,
            {"Message": "User is not authorized to perform: bedrock:InvokeModelWithResponseStream"},
            {"x-amzn-ErrorType": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.coral.service/"},
            "permission",
            403,
            "AccessDeniedException",
        ),
        (
            "anthropic",
            "bedrock",
            424,
            {"message": "Received client error (400) from primary with message ..."},
            {"x-amzn-ErrorType": "ModelErrorException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
            "bad_gateway",
            502,
            "ModelErrorException",
        ),
        (
            "bedrock-converse",
            "bedrock",
            503,
            {"message": "Bedrock is unable to process your request."},
            {
                "x-amzn-ErrorType": "ServiceUnavailableException:http://internal.amazon.com/coral/com.amazon.coral.availability/"
            },
            "overloaded",
            503,
            "ServiceUnavailableException",
        ),
    ],
)
def test_platform_error_bodies(
    dialect: str, platform: str, status: int, body: Any, headers: dict[str, str], kind: str, code: int, raw: str | None
) -> None:
    err = decode(dialect, platform, status, body, headers)
    assert (err.kind, err.status, err.raw) == (kind, code, raw)
    assert err.message and not err.message.startswith(("[", "{"))  # the platform's text, not its JSON


def test_vertex_list_error_keeps_the_message() -> None:
    err = decode("anthropic", "vertex", 429, VERTEX_LIST_429)
    assert err.message.startswith("Quota exceeded for aiplatform")


@pytest.mark.parametrize(
    ("error", "kind", "status"),
    [
        (
            {"code": "429", "message": "Rate limit is exceeded. Try again in 4 seconds."},
            "rate_limit",
            429,
        ),  # Azure: code a string
        (
            {"message": "filtered", "type": None, "param": "prompt", "code": "content_filter", "status": 400},
            "invalid_request",
            400,
        ),  # Azure in-stream filter
        ({"code": 503, "message": "busy"}, "overloaded", 503),
        # the direct API's in-stream errors keep their meaning
        ({"message": "x", "type": "server_error", "code": None}, "api_error", 500),
        ({"message": "x", "type": "invalid_request_error", "code": "context_length_exceeded"}, "invalid_request", 400),
    ],
)
def test_chat_in_stream_errors(error: dict[str, Any], kind: str, status: int) -> None:
    got = chat_errors.stream_error(error)
    assert (got.kind, got.status) == (kind, status)


def test_openai_caller_sees_azure_codes_as_codes() -> None:
    """Azure's ``code`` (``content_filter``, ``DeploymentNotFound``) reaches an OpenAI caller as
    its ``code``, with OpenAI's ``type``; a numeric code is not passed as a type."""
    _, body = chat_errors.render_error(decode("openai-chat", "azure", 400, AZURE_FILTER))
    assert (
        body["error"]["code"] == "content_filter"
        and body["error"]["type"] == "invalid_request_error"
        and body["error"]["param"] == "prompt"
    )
    _, body = chat_errors.render_error(decode("openai-chat", "azure", 404, AZURE_404))
    assert body["error"]["code"] == "DeploymentNotFound"
    _, body = chat_errors.render_error(decode("openai-chat", "azure", 429, AZURE_429))
    assert body["error"]["type"] == "requests" and body["error"]["code"] == "rate_limit_exceeded"
    # the direct API: type and code as OpenAI sent them
    direct = chat_errors.decode_error(
        400,
        orjson.dumps(
            {
                "error": {
                    "message": "m",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ),
    )
    _, body = chat_errors.render_error(direct)
    assert body["error"]["type"] == "invalid_request_error"


# --- end to end: SDK callers → gateway → a loopback upstream answering with the platforms' exact bodies


async def _azure(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Azure's deployment routes; the deployment name picks the answer."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    deployment = scope["path"].split("/")[3] if scope["path"].startswith("/openai/deployments/") else ""
    headers = [(b"content-type", b"application/json"), (b"apim-request-id", b"a1b2")]
    if deployment == "throttled":
        status, body = 429, orjson.dumps(AZURE_429)
        headers += [(b"retry-after", b"7"), (b"retry-after-ms", b"7000"), (b"x-ratelimit-remaining-tokens", b"0")]
    elif deployment == "filtered":
        status, body = 400, orjson.dumps(AZURE_FILTER)
    elif deployment == "streamfiltered":  # the filter's refusal as the stream's only chunk
        status, body = 200, b"data: " + orjson.dumps(AZURE_FILTER) + b"\n\n"
        headers = [(b"content-type", b"text/event-stream")]
    else:
        status, body = 404, orjson.dumps(AZURE_404)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _gemini(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The Gemini API's 429 with its RetryInfo detail and no Retry-After header."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}],
        }
    }
    await send({"type": "http.response.start", "status": 429, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    with ServerThread(_azure) as azure, ServerThread(_gemini) as gemini:
        common = {"max_retries": 0, "first_byte_timeout": 5.0, "idle_timeout": 2.0, "connect_timeout": 2.0}
        providers = [
            {
                "name": "az",
                "dialect": "openai-chat",
                "platform": "azure",
                "base_url": f"http://127.0.0.1:{azure.port}",
                "api_version": "2024-10-21",
                "api_key": "azure-key",
                **common,
            },
            {
                "name": "gm",
                "dialect": "gemini",
                "base_url": f"http://127.0.0.1:{gemini.port}",
                "api_key": "gemini-key",
                **common,
            },
        ]
        routes = [
            {"model": m, "provider": "az", "upstream_model": m}
            for m in ("throttled", "filtered", "streamfiltered", "missing")
        ]
        routes += [{"model": "text", "provider": "gm", "upstream_model": "gemini-2.5-flash"}]
        settings = Settings(
            server={"access_log": False},
            auth={"keys_env": ""},
            store={"url": "sqlite://:memory:"},
            providers=providers,
            routes=routes,
        )
        with ServerThread(create_app(settings), **uvicorn_options()) as server:
            yield server.url


def _chat(url: str, model: str, stream: bool) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="caller", max_retries=0)
    if stream:
        for _ in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], stream=True):
            pass
    else:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("stream", [False, True])
def test_azure_errors_reach_an_openai_caller(gateway: str, stream: bool) -> None:
    with pytest.raises(openai.RateLimitError) as throttled:
        _chat(gateway, "throttled", stream)
    assert int(throttled.value.response.headers["retry-after"]) >= 7
    with pytest.raises(openai.BadRequestError) as filtered:
        _chat(gateway, "filtered", stream)
    assert filtered.value.code == "content_filter" and filtered.value.param == "prompt"
    with pytest.raises(openai.NotFoundError) as missing:
        _chat(gateway, "missing", stream)
    assert missing.value.code == "DeploymentNotFound"


def test_azure_filter_inside_the_stream_is_a_400(gateway: str) -> None:
    with pytest.raises(openai.BadRequestError):
        _chat(gateway, "streamfiltered", True)
    client = anthropic.Anthropic(base_url=gateway, api_key="caller", max_retries=0)
    with (
        pytest.raises(anthropic.BadRequestError),
        client.messages.stream(
            model="streamfiltered", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        ) as s,
    ):
        for _ in s:
            pass


def test_gemini_retry_delay_becomes_retry_after(gateway: str) -> None:
    """Google's RetryInfo detail is the only wait hint a Gemini / Vertex 429 carries: kept."""
    r = httpx.post(
        gateway + "/v1beta/models/text:generateContent",
        headers={"x-goog-api-key": "caller"},
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    )
    assert r.status_code == 429 and r.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert r.headers.get("retry-after") == "26"


@pytest.mark.parametrize(
    ("version", "old"),
    [
        ("2024-06-01", True),
        ("2024-02-15-preview", True),
        ("2023-05-15", True),
        ("2024-09-01-preview", False),
        ("2024-10-21", False),
        ("2025-04-01-preview", False),
        ("v1", False),
        ("preview", False),
    ],
)
def test_azure_chat_body_for_the_api_version(version: str, old: bool) -> None:
    """Versions before 2024-09-01-preview refuse stream_options and max_completion_tokens."""
    from gateway.dialects.base import UpstreamCall

    ps = ProviderSettings(
        name="p",
        dialect="openai-chat",
        platform="azure",
        base_url="https://r.openai.azure.com",
        api_version=version,
        api_key="k",
    )
    body = {
        "model": "gpt-4o",
        "messages": [],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 64,
    }
    call = platform_for(ps).adapt(UpstreamCall("/chat/completions", dict(body)), "gpt-4o", ps)
    if old:
        assert (
            "stream_options" not in call.body
            and "max_completion_tokens" not in call.body
            and call.body["max_tokens"] == 64
        )
    else:
        assert call.body["stream_options"] == {"include_usage": True} and call.body["max_completion_tokens"] == 64


@pytest.mark.parametrize(
    ("code", "kind", "status"),
    [
        ("429", "rate_limit", 429),
        ("content_filter", "invalid_request", 400),
        ("server_error", "api_error", 500),
        ("rate_limit_exceeded", "rate_limit", 429),
    ],
)
def test_responses_in_stream_codes(code: str, kind: str, status: int) -> None:
    """``response.failed`` / ``error`` codes: Azure's string statuses and content filter; OpenAI's own unchanged."""
    from gateway.dialects.openai_responses.errors import kind_for_code

    assert kind_for_code(code) == (kind, status)
