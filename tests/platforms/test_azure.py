"""Azure OpenAI: Chat and Responses through the gateway, every caller SDK, against a loopback double.

The double (tests/support/azure_double.py) checks the ``api-key`` or the Entra ID bearer, the
api-version and the deployment, and sends Azure's stream quirks (the ``prompt_filter_results``
preamble, filter-only chunks). Entra ID runs for real through azure-identity's
``DefaultAzureCredential``: its managed-identity source (App Service's ``IDENTITY_ENDPOINT`` /
``IDENTITY_HEADER``, plain http) gets tokens from the double.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.dialects.base import UpstreamCall
from gateway.platforms import ConfigError, check_platforms, platform_for
from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import ProviderSettings, Settings
from tests.support.azure_double import AzureDouble
from tests.support.callers import CALLERS, ERRORS, error_status, openai_client
from tests.support.fake_upstream import SCENARIO_WORDS, ServerThread
from tests.test_matrix import ANSWERS, check_answer

KEY = "azure-key-0123456789-secret"
IDENTITY = "identity-header-secret"
VERSION = "2025-04-01-preview"
CALLER_DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
UPSTREAMS = {"azure-chat": "openai-chat", "azure-responses": "openai-responses"}
SCENARIOS = ["text", "tool_call", "thinking", "error_mid_stream", "error_429"]
DEPLOYMENTS = {word: f"dep-{word}" for word in SCENARIO_WORDS.values()}


def provider(name: str, dialect: str, endpoint: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "dialect": dialect,
        "platform": "azure",
        "base_url": "https://my-resource.openai.azure.com",
        "endpoint_url": endpoint,
        "api_version": VERSION,
        "deployments": DEPLOYMENTS,
        "max_retries": 0,
        "first_byte_timeout": 5.0,
        "idle_timeout": 2.0,
        "connect_timeout": 2.0,
        **extra,
    }


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureDouble]:
    double = AzureDouble(
        KEY,
        IDENTITY,
        VERSION,
        {**{d: w for w, d in DEPLOYMENTS.items()}, "gpt-4.1": "text", "content_filter": "content_filter"},
    )
    with ServerThread(double) as server:
        double.port = server.port
        yield double


@pytest.fixture(scope="module")
def gateway(azure: AzureDouble) -> Iterator[ServerThread]:
    mp = pytest.MonkeyPatch()
    url = f"http://127.0.0.1:{azure.port}"
    for name in (
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_FEDERATED_TOKEN_FILE",
        "MSI_ENDPOINT",
        "IMDS_ENDPOINT",
    ):
        mp.delenv(name, raising=False)
    mp.setenv("IDENTITY_ENDPOINT", url + "/msi/token")
    mp.setenv("IDENTITY_HEADER", IDENTITY)
    mp.setenv("AZURE_TEST_KEY", KEY)
    providers = [provider(name, dialect, url, api_key_env="AZURE_TEST_KEY") for name, dialect in UPSTREAMS.items()]
    providers += [
        provider("entra-chat", "openai-chat", url),
        provider("entra-v1", "openai-responses", url, api_version="v1"),
    ]
    routes = [
        {"model": f"{name}--{s}", "provider": name, "upstream_model": SCENARIO_WORDS[s]}
        for name in UPSTREAMS
        for s in SCENARIOS
    ]
    routes += [
        {"model": "entra-chat", "provider": "entra-chat", "upstream_model": "text"},
        {"model": "entra-v1", "provider": "entra-v1", "upstream_model": "text"},
        {"model": "unmapped", "provider": "azure-chat", "upstream_model": "gpt-4.1"},
        {"model": "filtered", "provider": "azure-chat", "upstream_model": "content_filter"},
    ]
    settings = Settings(
        server={"access_log": False},
        auth={"keys_env": ""},
        store={"url": "sqlite://:memory:"},
        providers=providers,
        routes=routes,
    )
    try:
        with ServerThread(create_app(settings), **uvicorn_options()) as server:
            yield server
    finally:
        mp.undo()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("upstream", list(UPSTREAMS))
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_cell(
    gateway: ServerThread, azure: AzureDouble, caller: str, upstream: str, scenario: str, stream: bool
) -> None:
    model = f"{upstream}--{scenario}"
    call = CALLERS[caller]
    if scenario in ANSWERS:
        out = call(gateway.url, model, scenario, stream)
        check_answer(caller, UPSTREAMS[upstream], scenario, out, model)
        seen = azure.seen[-1]
        deployment = DEPLOYMENTS[SCENARIO_WORDS[scenario]]
        assert seen["auth"] == "api-key" and seen["query"] == {"api-version": VERSION} and seen["model"] == deployment
        want = f"/openai/deployments/{deployment}/chat/completions" if upstream == "azure-chat" else "/openai/responses"
        assert seen["path"] == want
        assert "authorization" not in seen["headers"]
    elif scenario == "error_429":
        with pytest.raises(ERRORS[caller]) as info:
            call(gateway.url, model, scenario, stream)
        assert error_status(info.value) == 429
    else:
        with pytest.raises(ERRORS[caller]):
            call(gateway.url, model, scenario, stream)


def test_entra_id_through_default_azure_credential(gateway: ServerThread, azure: AzureDouble) -> None:
    issued = azure.issued
    for stream in (True, False, True):
        out = CALLERS["openai-chat"](gateway.url, "entra-chat", "text", stream)
        assert out.text == ANSWERS["text"]["text"]
        assert azure.seen[-1]["auth"] == "bearer" and "api-key" not in azure.seen[-1]["headers"]
    assert azure.issued == issued + 1, "the token is cached between requests"


def test_a_401_gets_a_new_token_from_a_new_credential(gateway: ServerThread, azure: AzureDouble) -> None:
    CALLERS["openai-chat"](gateway.url, "entra-chat", "text", True)
    before, issued = len(azure.used), azure.issued
    azure.force_401 = 1
    out = CALLERS["openai-responses"](gateway.url, "entra-chat", "text", True)
    assert out.text == ANSWERS["text"]["text"]
    assert azure.issued == issued + 1  # azure-identity's own cache was not asked: a new credential fetched one
    refused = azure.used[before]
    CALLERS["gemini"](gateway.url, "entra-chat", "text", False)
    assert refused not in azure.used[before + 1 :]


def test_v1_api_route(gateway: ServerThread, azure: AzureDouble) -> None:
    out = CALLERS["anthropic"](gateway.url, "entra-v1", "text", True)
    assert out.text == ANSWERS["text"]["text"]
    seen = azure.seen[-1]
    assert (seen["path"], seen["query"], seen["model"], seen["auth"]) == (
        "/openai/v1/responses",
        {},
        "dep-text",
        "bearer",
    )


def test_a_model_missing_from_the_map_is_its_own_deployment(gateway: ServerThread, azure: AzureDouble) -> None:
    out = CALLERS["gemini"](gateway.url, "unmapped", "text", True)
    assert out.text == ANSWERS["text"]["text"]
    assert azure.seen[-1]["path"] == "/openai/deployments/gpt-4.1/chat/completions"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_content_filter_stop(gateway: ServerThread, stream: bool) -> None:
    client = openai_client(gateway.url)
    messages: Any = [{"role": "user", "content": "hi"}]
    if stream:
        chunks = list(client.chat.completions.create(model="filtered", messages=messages, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    else:
        reply = client.chat.completions.create(model="filtered", messages=messages)
        text, finish = reply.choices[0].message.content or "", [reply.choices[0].finish_reason]
    assert text == "Partial " and finish == ["content_filter"]
    out = CALLERS["anthropic"](gateway.url, "filtered", "text", stream)  # another dialect: an answer, not an error
    assert out.text == "Partial "


def test_no_key_or_token_in_logs_or_answers(
    gateway: ServerThread, azure: AzureDouble, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen = []
    for caller in CALLER_DIALECTS:
        seen.append(repr(CALLERS[caller](gateway.url, "entra-chat", "text", True)))
        with pytest.raises(ERRORS[caller]) as info:
            CALLERS[caller](gateway.url, "azure-chat--error_mid_stream", "error_mid_stream", True)
        seen.append(repr(info.value) + str(getattr(info.value, "body", "")))
    text = caplog.text + "".join(seen)
    assert KEY not in text and IDENTITY not in text
    for token in azure.tokens:
        assert token not in text


def test_a_wrong_key_is_a_bad_gateway_not_the_callers_401(azure: AzureDouble) -> None:
    url = f"http://127.0.0.1:{azure.port}"
    settings = Settings(
        auth={"keys_env": ""},
        store={"url": "sqlite://:memory:"},
        providers=[provider("bad", "openai-chat", url, api_key="wrong-key")],
        routes=[{"model": "m", "provider": "bad", "upstream_model": "text"}],
    )
    with (
        ServerThread(create_app(settings), **uvicorn_options()) as server,
        pytest.raises(openai.APIStatusError) as info,
    ):
        CALLERS["openai-chat"](server.url, "m", "text", True)
    assert info.value.status_code == 502 and "wrong-key" not in str(info.value.body)


# --------------------------------------------------------------------------- the platform's own rules


def settings_for(dialect: str = "openai-chat", **extra: Any) -> ProviderSettings:
    values = {
        "name": "a",
        "dialect": dialect,
        "platform": "azure",
        "base_url": "https://r.openai.azure.com/openai/",
        "api_version": VERSION,
        "api_key": "k",
        **extra,
    }
    return ProviderSettings(**values)


@pytest.mark.parametrize(
    ("dialect", "version", "path", "params"),
    [
        ("openai-chat", VERSION, "/openai/deployments/my%2Fdep/chat/completions", {"api-version": VERSION}),
        ("openai-responses", VERSION, "/openai/responses", {"api-version": VERSION}),
        ("openai-chat", "v1", "/openai/v1/chat/completions", {}),
        ("openai-responses", "preview", "/openai/v1/responses", {"api-version": "preview"}),
    ],
)
def test_routes(dialect: str, version: str, path: str, params: dict[str, str]) -> None:
    s = settings_for(dialect, api_version=version, deployments={"gpt-4.1": "my/dep"})
    azure = platform_for(s)
    call = azure.adapt(
        UpstreamCall("/chat/completions" if dialect == "openai-chat" else "/responses", {"model": "gpt-4.1"}),
        "gpt-4.1",
        s,
    )
    assert (call.path, call.params, call.body["model"]) == (path, params, "my/dep")
    assert azure.base_url(s) == "https://r.openai.azure.com"
    assert azure.headers(s) == {"api-key": "k"} and azure.auth(s) is None


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"api_version": None}, "needs api_version"),
        ({"base_url": ""}, "needs base_url"),
        ({"dialect": "anthropic"}, "serves the dialects"),
    ],
)
def test_startup_refuses_incomplete_settings(extra: dict[str, Any], words: str) -> None:
    s = settings_for(**extra)
    with pytest.raises(ConfigError, match=words):
        platform_for(s).check(s)


def test_startup_without_the_extra_names_it_when_entra_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("azure") else real(name, *a)
    )
    with_key = settings_for()
    platform_for(with_key).check(with_key)  # an api-key needs no extra
    settings = Settings(
        auth={"keys_env": ""},
        providers=[provider("azure", "openai-chat", "http://127.0.0.1:9")],
        routes=[{"model": "m", "provider": "azure"}],
    )
    with pytest.raises(ConfigError, match=r"pip install 'llm-gateway\[azure\]'"):
        check_platforms(settings)


def test_credential_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    s = settings_for(api_key=None, api_key_env="AZURE_OPENAI_API_KEY")
    assert platform_for(s).credential_source(s) == "api-key $AZURE_OPENAI_API_KEY"
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    monkeypatch.setenv("IDENTITY_ENDPOINT", "http://127.0.0.1:9/msi/token")
    source = platform_for(s).credential_source(s)
    assert source == "Microsoft Entra ID: managed identity ($IDENTITY_ENDPOINT)" and KEY not in source
