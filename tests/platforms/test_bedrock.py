"""Claude on AWS Bedrock through the gateway, end to end, with the official SDKs as callers.

The upstream is the loopback Bedrock double (tests/support/bedrock_double.py), which verifies the
SigV4 signature with botocore from its own copy of the credentials and answers with eventstream
frames. The gateway finds its credentials through botocore's chain, from the environment only
(``aws_env``, tests/platforms/conftest.py), so this machine's own AWS setup is never read.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("botocore")

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.support.bedrock_double import ACCESS_KEY, API_KEY, SECRET_KEY, SESSION_TOKEN, BedrockDouble
from tests.support.callers import CALLERS, ERRORS, anthropic_client, error_status
from tests.support.fake_upstream import ServerThread
from tests.test_matrix import check_answer

ROOT = Path(__file__).resolve().parents[2]
CALLER_DIALECTS = list(CALLERS)
PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"  # a cross-region inference profile id, with ':'
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5"
ANSWERED = ["text", "tool_call", "thinking"]
MODES = {"stream": True, "whole": False}
SECRETS = [SECRET_KEY, SESSION_TOKEN, API_KEY]


def provider(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "dialect": "anthropic",
        "platform": "bedrock",
        "region": "us-east-1",
        "endpoint_url": url,
        "max_retries": 2,
        "retry_backoff": 0.01,
        "first_byte_timeout": 5.0,
        "idle_timeout": 3.0,
        "connect_timeout": 2.0,
        **extra,
    }


@pytest.fixture(scope="module")
def double(aws_env: None) -> Iterator[BedrockDouble]:
    upstream = BedrockDouble()
    with ServerThread(upstream) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture(scope="module")
def other(aws_env: None) -> Iterator[BedrockDouble]:
    """A Bedrock whose copy of the secret differs from the gateway's: every signature is wrong."""
    upstream = BedrockDouble(secret_key="a-different-secret-key-0000000000000000000")
    with ServerThread(upstream) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture(scope="module")
def gateway(double: BedrockDouble, other: BedrockDouble) -> Iterator[ServerThread]:
    url = double.url  # type: ignore[attr-defined]
    routes = [
        {"model": f"bedrock--{s}", "provider": "bedrock", "upstream_model": f"{PROFILE}--{s}"}
        for s in [*ANSWERED, "exception_mid", "error_mid_stream", "throttle", "bad_crc"]
    ]
    for caller in CALLER_DIALECTS:
        for mode in MODES:
            for once in ("throttle_once", "frame_throttle_once"):
                routes.append(
                    {
                        "model": f"{once}-{caller}-{mode}",
                        "provider": "bedrock",
                        "upstream_model": f"anthropic.claude-3-haiku-20240307-v1:0--{caller}-{mode}--{once}",
                    }
                )
    routes += [
        {"model": "bedrock-arn", "provider": "bedrock", "upstream_model": f"{ARN}--text"},
        {"model": "bedrock-key", "provider": "bedrock-key", "upstream_model": f"{PROFILE}--text"},
        {"model": "bedrock-wrong", "provider": "bedrock-wrong", "upstream_model": f"{PROFILE}--text"},
    ]
    config = {
        "server": {"keepalive_seconds": 0.5, "access_log": True},
        "auth": {"keys_env": ""},
        "store": {"url": "sqlite://:memory:"},
        "providers": [
            provider("bedrock", url),
            provider("bedrock-key", url, api_key_env="BEDROCK_TEST_API_KEY"),
            provider("bedrock-wrong", other.url, max_retries=0),  # type: ignore[attr-defined]
        ],
        "routes": routes,
    }
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
        yield server


@pytest.fixture(autouse=True)
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log line of the gateway (and botocore) at DEBUG: no secret may be in any."""
    caplog.set_level(logging.DEBUG)
    yield caplog
    text = caplog.text
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", ANSWERED)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_answers(gateway: ServerThread, double: BedrockDouble, caller: str, scenario: str, mode: str) -> None:
    model = f"bedrock--{scenario}"
    out = CALLERS[caller](gateway.url, model, scenario, MODES[mode])
    check_answer(caller, "anthropic", scenario, out, model)
    seen = double.seen[-1]
    assert seen.auth == "sigv4"
    # (a stored Interactions run is generated as a stream even for a whole caller)
    action = "invoke-with-response-stream" if MODES[mode] or caller == "gemini-interactions" else "invoke"
    assert seen.path == f"/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0--{scenario}/{action}"
    assert seen.model == f"{PROFILE}--{scenario}"
    assert seen.body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in seen.body and "stream" not in seen.body
    assert seen.body["messages"][0]["role"] == "user"
    assert "anthropic-version" not in seen.headers and "x-api-key" not in seen.headers
    signed = seen.headers["authorization"].split("SignedHeaders=", 1)[1].split(",", 1)[0]
    assert signed == "content-type;host;x-amz-date;x-amz-security-token"  # not user-agent, not accept
    if scenario == "thinking":
        assert seen.body["thinking"]["type"] in ("enabled", "adaptive")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_throttled_before_the_first_byte_is_retried(
    gateway: ServerThread, double: BedrockDouble, caller: str, mode: str
) -> None:
    streamed = MODES[mode] or caller == "gemini-interactions"  # (a whole InvokeModel reply has no frames)
    for once in (
        ("throttle_once", "frame_throttle_once") if streamed else ("throttle_once",)
    ):  # an HTTP 429; a throttlingException frame after the 200
        out = CALLERS[caller](gateway.url, f"{once}-{caller}-{mode}", "text", MODES[mode])
        check_answer(caller, "anthropic", "text", out, f"{once}-{caller}-{mode}")
        model = f"anthropic.claude-3-haiku-20240307-v1:0--{caller}-{mode}--{once}"
        assert double.hits[model] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_always_throttled_is_a_429_in_the_callers_dialect(
    gateway: ServerThread, double: BedrockDouble, caller: str, mode: str
) -> None:
    with pytest.raises(ERRORS[caller]) as info:
        CALLERS[caller](gateway.url, "bedrock--throttle", "text", MODES[mode])
    if caller != "gemini-interactions" or not MODES[mode]:
        assert error_status(info.value) == 429


@pytest.mark.parametrize("scenario", ["exception_mid", "error_mid_stream", "bad_crc"])
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_an_exception_frame_mid_stream_is_an_error_not_an_ending(
    gateway: ServerThread, caller: str, scenario: str
) -> None:
    with pytest.raises(ERRORS[caller]):
        CALLERS[caller](gateway.url, f"bedrock--{scenario}", "text", True)


def test_the_mid_stream_exception_reaches_an_anthropic_caller_as_an_error_event(gateway: ServerThread) -> None:
    with httpx.stream(
        "POST",
        gateway.url + "/v1/messages",
        json={
            "model": "bedrock--exception_mid",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": "k"},
    ) as r:
        body = r.read().decode()
    assert r.status_code == 200
    assert "event: error" in body and "modelStreamErrorException" in body and "The model failed mid-stream." in body
    assert "message_stop" not in body


def test_an_inference_profile_arn_is_one_path_segment(gateway: ServerThread, double: BedrockDouble) -> None:
    out = CALLERS["anthropic"](gateway.url, "bedrock-arn", "text", True)
    check_answer("anthropic", "anthropic", "text", out, "bedrock-arn")
    seen = double.seen[-1]
    assert (
        seen.path
        == "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4e5--text/invoke-with-response-stream"
    )
    assert seen.auth == "sigv4"


def test_betas_go_in_the_body_and_unknown_ones_are_dropped_and_reported(
    gateway: ServerThread, double: BedrockDouble
) -> None:
    client = anthropic_client(gateway.url)
    raw = client.messages.with_raw_response.create(
        model="bedrock--text",
        max_tokens=64,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14, files-api-2025-04-14,context-1m-2025-08-07"},
    )
    assert raw.parse().content[0].type == "text"
    seen = double.seen[-1]
    assert seen.body["anthropic_beta"] == ["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"]
    assert "anthropic-beta" not in seen.headers
    assert "anthropic_beta:files-api-2025-04-14" in raw.headers["x-gateway-dropped"]


@pytest.mark.parametrize("mode", MODES)
def test_a_bedrock_api_key_is_a_bearer_and_no_signature(
    gateway: ServerThread, double: BedrockDouble, mode: str
) -> None:
    out = CALLERS["openai-chat"](gateway.url, "bedrock-key", "text", MODES[mode])
    check_answer("openai-chat", "anthropic", "text", out, "bedrock-key")
    seen = double.seen[-1]
    assert seen.auth == "bearer" and "x-amz-date" not in seen.headers


@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_a_wrong_secret_is_the_gateways_502_naming_its_credentials(
    gateway: ServerThread, other: BedrockDouble, caller: str
) -> None:
    with pytest.raises(ERRORS[caller]) as info:
        CALLERS[caller](gateway.url, "bedrock-wrong", "text", False)
    assert (
        other.seen[-1].auth
        == "refused:"
        + "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
    )
    if caller != "gemini-interactions":
        assert error_status(info.value) == 502
    assert "rejected the gateway's credentials" in str(info.value)
    assert "InvalidSignatureException" in str(info.value)


def test_no_secret_in_any_answer(gateway: ServerThread) -> None:
    for model in ("bedrock--text", "bedrock-wrong", "bedrock--throttle", "bedrock--exception_mid"):
        for stream in (True, False):
            r = httpx.post(
                gateway.url + "/v1/messages",
                json={
                    "model": model,
                    "max_tokens": 64,
                    "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}],
                },
                headers={"x-api-key": "k"},
                timeout=20,
            )
            text = r.text + str(r.headers)
            for secret in SECRETS:
                assert secret not in text


def test_check_config_names_the_credential_source_not_its_value(
    aws_env: None, double: BedrockDouble, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    url = double.url  # type: ignore[attr-defined]
    config.write_text(
        f'[[providers]]\nname = "bedrock"\ndialect = "anthropic"\nplatform = "bedrock"\nregion = "us-east-1"\n'
        f'[[providers]]\nname = "bedrock-key"\ndialect = "anthropic"\nplatform = "bedrock"\nendpoint_url = "{url}"\napi_key_env = "BEDROCK_TEST_API_KEY"\n'
        '[[routes]]\nmodel = "*"\nprovider = "bedrock"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "https://bedrock-runtime.us-east-1.amazonaws.com" in out
    assert "AWS SigV4 in us-east-1, credentials: env" in out
    assert "Bedrock API key from $BEDROCK_TEST_API_KEY" in out
    for secret in SECRETS:
        assert secret not in out


def test_startup_without_botocore_names_the_extra(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[[providers]]\nname = "bedrock"\ndialect = "anthropic"\nplatform = "bedrock"\nregion = "us-east-1"\n[[routes]]\nmodel = "*"\nprovider = "bedrock"\n'
    )
    block = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'botocore' or name.startswith('botocore.'): raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib.util\n"
        "_find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n.split('.')[0] == 'botocore' else _find(n, *a)\n"
        "from gateway.__main__ import main\n"
        f"raise SystemExit(main(['check-config', {str(config)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "pip install 'llm-gateway[bedrock]'" in out and "Traceback" not in out


def test_missing_region_is_a_startup_error() -> None:
    from gateway.platforms import ConfigError, check_platforms

    settings = Settings(
        providers=[{"name": "b", "dialect": "anthropic", "platform": "bedrock"}],
        routes=[{"model": "*", "provider": "b"}],
    )
    with pytest.raises(ConfigError, match="needs region"):
        check_platforms(settings)


@pytest.mark.parametrize(
    ("status", "error_type", "kind", "code"),
    [
        (429, "ThrottlingException", "rate_limit", 429),
        (400, "ValidationException", "invalid_request", 400),
        (403, "AccessDeniedException", "permission", 403),
        (404, "ResourceNotFoundException", "not_found", 404),
        (424, "ModelErrorException", "bad_gateway", 502),
        (408, "ModelTimeoutException", "timeout", 504),
        (500, "InternalServerException", "api_error", 500),
        (503, "ServiceUnavailableException", "overloaded", 503),
    ],
)
def test_bedrock_http_errors_keep_their_kind(status: int, error_type: str, kind: str, code: int) -> None:
    from gateway.platforms.bedrock import PLATFORM

    headers = httpx.Headers({"x-amzn-errortype": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"})
    err = PLATFORM.decode_error(status, headers, b'{"message":"the type of thing"}')
    assert err is not None and (err.kind, err.status, err.raw) == (kind, code, error_type)
    assert "the type of thing" in err.message
    assert (
        PLATFORM.decode_error(502, httpx.Headers(), b"<html>bad gateway</html>") is None
    )  # not Bedrock's: the codec's turn


def test_a_credentials_refresh_runs_off_the_event_loop() -> None:
    import asyncio
    import datetime
    import threading

    from botocore.credentials import RefreshableCredentials

    from gateway.platforms.aws_auth import SigV4

    threads: list[int] = []

    def refresh() -> dict[str, str]:
        threads.append(threading.get_ident())
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        return {
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "token": SESSION_TOKEN,
            "expiry_time": expiry.isoformat(),
        }

    soon = (
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    ).isoformat()  # inside the refresh window
    credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": "old", "secret_key": "old", "token": "old", "expiry_time": soon},
        refresh,
        "assume-role-with-web-identity",
    )
    auth = SigV4("us-east-1", "p", credentials=credentials)

    async def run() -> tuple[int, object, object]:
        loop_thread = threading.get_ident()
        first = await auth.frozen()  # due: refreshed in a thread
        second = await auth.frozen()  # fresh now: inline, no thread
        return loop_thread, first, second

    loop_thread, first, second = asyncio.run(run())
    assert len(threads) == 1 and threads[0] != loop_thread
    assert first.access_key == second.access_key == ACCESS_KEY  # type: ignore[attr-defined]
    assert auth.method() == "assume-role-with-web-identity"


def test_no_credentials_anywhere_is_a_502_that_says_so() -> None:
    import asyncio

    from gateway.errors import GatewayError
    from gateway.platforms.aws_auth import SigV4

    auth = SigV4("us-east-1", "bedrock-claude")
    auth._resolved, auth._credentials = True, None  # what botocore's chain returns when it found nothing
    with pytest.raises(GatewayError) as caught:
        asyncio.run(auth.frozen())
    assert (
        caught.value.status == 502
        and "no AWS credentials found" in caught.value.message
        and "bedrock-claude" in caught.value.message
    )


def test_first_party_beta_names_become_bedrock_ones() -> None:
    from gateway.dialects.anthropic.bedrock import split_betas

    kept, dropped = split_betas(
        "advanced-tool-use-2025-11-20, tool-search-tool-2025-10-19,claude-code-20250219,,context-1m-2025-08-07"
    )
    assert kept == ["tool-search-tool-2025-10-19", "context-1m-2025-08-07"]
    assert dropped == ["claude-code-20250219"]


def test_fields_bedrock_refuses_are_dropped_and_gated_ones_get_their_beta() -> None:
    from gateway.dialects.base import UpstreamCall
    from gateway.platforms.bedrock import PLATFORM
    from gateway.settings import ProviderSettings

    s = ProviderSettings(name="b", dialect="anthropic", platform="bedrock", region="us-east-1", api_key="k")
    body = {
        "model": "text",
        "stream": True,
        "max_tokens": 5,
        "messages": [],
        "metadata": {"user_id": "u"},
        "service_tier": "auto",
        "output_config": {"effort": "low"},
    }
    call = PLATFORM.adapt(
        UpstreamCall("/v1/messages", body, headers={"anthropic-beta": "claude-code-20250219"}),
        "us.anthropic.claude-opus-4-6-v1:0",
        s,
    )
    assert call.path == "/model/us.anthropic.claude-opus-4-6-v1%3A0/invoke-with-response-stream"
    assert (
        "metadata" not in call.body
        and "service_tier" not in call.body
        and "model" not in call.body
        and "stream" not in call.body
    )
    assert call.body["output_config"] == {"effort": "low"} and call.body["anthropic_beta"] == ["effort-2025-11-24"]
    assert set(call.dropped) >= {"metadata", "service_tier", "anthropic_beta:claude-code-20250219"}
