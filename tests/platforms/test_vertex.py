"""Vertex AI: Gemini and Claude through the gateway, every caller SDK, against a loopback double.

The double (tests/support/vertex_double.py) is Google's token endpoint and Vertex's model routes:
it verifies the service account's RS256 JWT assertion and issues two-second tokens, so the
gateway refreshes during the run; a forced 401 must make it refresh and retry once. The service
account is a real RSA key made here, in a real key file named by GOOGLE_APPLICATION_CREDENTIALS.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.dialects.base import UpstreamCall
from gateway.platforms import ConfigError, check_platforms, platform_for
from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import ProviderSettings, Settings
from tests.support.callers import CALLERS, ERRORS, error_status
from tests.support.fake_upstream import SCENARIO_WORDS, ServerThread
from tests.support.vertex_double import VertexDouble
from tests.test_matrix import ANSWERS, check_answer

PROJECT, LOCATION = "proj-text", "us-central1"
EMAIL = "gateway@proj-text.iam.gserviceaccount.com"
CALLER_DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
UPSTREAMS = {"vertex-gemini": "gemini", "vertex-claude": "anthropic"}
SCENARIOS = ["text", "tool_call", "thinking", "error_mid_stream", "error_429"]


def provider(name: str, dialect: str, endpoint: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "dialect": dialect,
        "platform": "vertex",
        "project": PROJECT,
        "location": LOCATION,
        "endpoint_url": endpoint,
        "max_retries": 0,
        "first_byte_timeout": 5.0,
        "idle_timeout": 2.0,
        "connect_timeout": 2.0,
        **extra,
    }


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_file(path: Path, key: rsa.RSAPrivateKey, token_uri: str | None) -> Path:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    info = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "kid-1",
        "private_key": pem,
        "client_email": EMAIL,
        "client_id": "1",
    }
    if token_uri:
        info["token_uri"] = token_uri
    path.write_text(json.dumps(info))
    return path


@pytest.fixture(scope="module")
def vertex(key: rsa.RSAPrivateKey, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VertexDouble]:
    double = VertexDouble(key.public_key(), EMAIL, PROJECT, LOCATION)
    with ServerThread(double) as server:
        double.port = server.port
        yield double


@pytest.fixture(scope="module")
def gateway(
    vertex: VertexDouble, key: rsa.RSAPrivateKey, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerThread]:
    path = key_file(tmp_path_factory.mktemp("sa") / "sa.json", key, vertex.token_url)
    mp = pytest.MonkeyPatch()
    mp.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    url = f"http://127.0.0.1:{vertex.port}"
    providers = [provider(name, dialect, url) for name, dialect in UPSTREAMS.items()]
    routes = [
        {"model": f"{name}--{s}", "provider": name, "upstream_model": SCENARIO_WORDS[s]}
        for name in UPSTREAMS
        for s in SCENARIOS
    ]
    routes += [
        {"model": "vertex-claude@dated", "provider": "vertex-claude", "upstream_model": "claude-sonnet-4-5@20250929"},
        {"model": "demo", "provider": "demo"},
        {"model": "vertex-interactions--*", "provider": "vertex-interactions"},
    ]
    providers += [{"name": "demo", "dialect": "demo"}, provider("vertex-interactions", "gemini-interactions", url)]
    # the default retry budget (max_retries = 2): a persistent 401 must not be retried by it
    providers += [provider(f"retrying-{d}", d, url, max_retries=2) for d in ("gemini", "anthropic")]
    routes += [
        {"model": f"retrying-{d}", "provider": f"retrying-{d}", "upstream_model": "text"}
        for d in ("gemini", "anthropic")
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
    gateway: ServerThread, vertex: VertexDouble, caller: str, upstream: str, scenario: str, stream: bool
) -> None:
    model = f"{upstream}--{scenario}"
    call = CALLERS[caller]
    if scenario in ANSWERS:
        out = call(gateway.url, model, scenario, stream)
        check_answer(caller, UPSTREAMS[upstream], scenario, out, model)
        received = vertex.upstream.last()
        if upstream == "vertex-claude":
            assert "anthropic_version" not in received.body  # the double checked it, then took it off
            assert received.headers["authorization"].startswith("Bearer ya29.double-")
            assert "x-api-key" not in received.headers and "anthropic-version" not in received.headers
        else:
            where, method = received.path.rsplit(":", 1)  # some whole answers are streamed upstream (Interactions)
            assert (
                where
                == f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/{SCENARIO_WORDS[scenario]}"
            )
            assert (method, received.query) in (("streamGenerateContent", "alt=sse"), ("generateContent", ""))
    elif scenario == "error_429":
        with pytest.raises(ERRORS[caller]) as info:
            call(gateway.url, model, scenario, stream)
        assert error_status(info.value) == 429
    else:
        with pytest.raises(ERRORS[caller]):
            call(gateway.url, model, scenario, stream)


def test_tokens_refreshed_before_expiry_during_the_run(gateway: ServerThread, vertex: VertexDouble) -> None:
    CALLERS["anthropic"](gateway.url, "vertex-claude--text", "text", True)
    issued, refused = vertex.issued, vertex.unauthorized
    time.sleep(vertex.token_seconds + 0.2)  # the token the gateway holds has expired now
    CALLERS["gemini"](gateway.url, "vertex-gemini--text", "text", True)
    assert vertex.issued == issued + 1, "a new token was fetched before the request"
    assert vertex.unauthorized == refused, "the expired token was never sent"
    assert vertex.refused_assertions == [], "every JWT assertion verified (signature, iss, aud, scope)"


def test_one_refresh_at_a_time_and_never_on_the_event_loop(gateway: ServerThread, vertex: VertexDouble) -> None:
    CALLERS["anthropic"](gateway.url, "vertex-claude--text", "text", True)
    time.sleep(vertex.token_seconds + 0.2)  # expired: the next requests must refresh
    issued = vertex.issued
    vertex.token_delay = 1.0
    try:
        with ThreadPoolExecutor(4) as pool:
            waiting = [
                pool.submit(CALLERS["openai-chat"], gateway.url, "vertex-gemini--text", "text", True) for _ in range(4)
            ]
            time.sleep(0.3)  # the refresh is under way now
            started = time.monotonic()
            demo = CALLERS["openai-chat"](gateway.url, "demo", "text", False)  # another provider, same event loop
            elapsed = time.monotonic() - started
            outs = [f.result(timeout=20) for f in waiting]
    finally:
        vertex.token_delay = 0.0
    assert demo.text and elapsed < 0.5, f"a request elsewhere waited {elapsed:.2f}s for the token refresh"
    assert all(out.text == ANSWERS["text"]["text"] for out in outs)
    assert vertex.issued == issued + 1, "four requests, one refresh"


def test_vertex_only_events_are_dropped_by_the_platform(
    gateway: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    """A known Vertex addition, dropped before the decoder: the answer is whole, no warning."""
    with caplog.at_level(logging.WARNING):
        out = CALLERS["openai-responses"](gateway.url, "vertex-claude--text", "text", True)
    assert out.text == ANSWERS["text"]["text"]
    assert "vertex_event" not in caplog.text


def test_vertex_only_events_never_reach_an_anthropic_caller(gateway: ServerThread) -> None:
    """Same dialect, so the fast path forwards Vertex's frames; ``vertex_event`` is not an
    Anthropic event (schema-strict callers such as Vercel's AI SDK fail on it: vercel/ai#13436)."""
    body = {
        "model": "vertex-claude--text",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    r = httpx.post(
        gateway.url + "/v1/messages",
        headers={"x-api-key": "caller", "anthropic-version": "2023-06-01"},
        json=body,
        timeout=10,
    )
    assert r.status_code == 200 and "event: message_stop" in r.text
    assert "vertex_event" not in r.text


def test_a_401_refreshes_once_and_the_refused_token_is_never_reused(
    gateway: ServerThread, vertex: VertexDouble
) -> None:
    CALLERS["openai-chat"](gateway.url, "vertex-gemini--text", "text", True)
    before, refused = len(vertex.used), vertex.unauthorized
    vertex.force_401 = 1
    out = CALLERS["openai-chat"](gateway.url, "vertex-gemini--text", "text", True)
    assert out.text == ANSWERS["text"]["text"]
    assert vertex.unauthorized == refused + 1
    revoked = vertex.used[before]
    assert revoked in vertex.revoked
    for _ in range(3):
        CALLERS["anthropic"](gateway.url, "vertex-claude--text", "text", False)
    assert revoked not in vertex.used[before + 1 :], "a refused token is never sent again"


@pytest.mark.parametrize("dialect", ["gemini", "anthropic"])
@pytest.mark.parametrize("caller", ["anthropic", "openai-chat"])
def test_a_401_that_persists_after_the_refresh_is_two_attempts_then_the_callers_error(
    gateway: ServerThread, vertex: VertexDouble, dialect: str, caller: str
) -> None:
    CALLERS[caller](gateway.url, f"retrying-{dialect}", "text", False)  # a token in hand
    before, fetched = vertex.unauthorized, vertex.issued
    calls = len(vertex.used)
    vertex.force_401 = 1000  # every token is refused, the refreshed one too
    try:
        path, body = (
            (
                "/v1/messages",
                {"model": f"retrying-{dialect}", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
            )
            if caller == "anthropic"
            else (
                "/v1/chat/completions",
                {"model": f"retrying-{dialect}", "messages": [{"role": "user", "content": "hi"}]},
            )
        )
        started = time.monotonic()
        r = httpx.post(gateway.url + path, json=body, headers={"anthropic-version": "2023-06-01"}, timeout=15)
        elapsed = time.monotonic() - started
    finally:
        vertex.force_401 = 0
    # the caller's key was fine: the gateway's credentials were refused, a bad gateway in its dialect
    assert r.status_code == 502, r.text
    assert "rejected the gateway's credentials" in r.json()["error"]["message"]
    assert len(vertex.used) - calls == 2, "one attempt, one retry with a refreshed token, then the caller's error"
    assert vertex.unauthorized - before == 2 and vertex.issued - fetched == 1 and elapsed < 5


@pytest.mark.parametrize("stream", [False, True])
def test_only_the_betas_vertex_takes_reach_it_and_the_rest_are_reported(
    gateway: ServerThread, vertex: VertexDouble, stream: bool
) -> None:
    # what Claude Code sends: first-party betas Vertex refuses with a 400, one under another name
    beta = (
        "prompt-caching-scope-2026-01-05,interleaved-thinking-2025-05-14,advanced-tool-use-2025-11-20,effort-2025-11-24"
    )
    body = {
        "model": "vertex-claude--text",
        "max_tokens": 16,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }
    headers = {"x-api-key": "caller", "anthropic-version": "2023-06-01", "anthropic-beta": beta}
    r = httpx.post(gateway.url + "/v1/messages", headers=headers, json=body, timeout=10)
    assert r.status_code == 200, r.text
    sent = vertex.upstream.received[-1].headers
    assert sent["anthropic-beta"] == "interleaved-thinking-2025-05-14,tool-search-tool-2025-10-19"
    assert r.headers["x-gateway-dropped"] == (
        "anthropic_beta:prompt-caching-scope-2026-01-05, anthropic_beta:effort-2025-11-24"
    )


def test_no_beta_header_reaches_vertex_when_none_is_taken(gateway: ServerThread, vertex: VertexDouble) -> None:
    body = {"model": "vertex-claude--text", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "prompt-caching-scope-2026-01-05"}
    r = httpx.post(gateway.url + "/v1/messages", headers=headers, json=body, timeout=10)
    assert r.status_code == 200, r.text
    assert "anthropic-beta" not in vertex.upstream.received[-1].headers


def test_claude_model_ids_with_at_and_the_vertex_body(gateway: ServerThread, vertex: VertexDouble) -> None:
    out = CALLERS["anthropic"](
        gateway.url, "vertex-claude@dated", "text", True
    )  # the double answers any other model with text
    assert out.text == ANSWERS["text"]["text"]
    assert (
        vertex.paths[-1]
        == f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    )
    assert (
        vertex.upstream.received[-1].body["model"] == "claude-sonnet-4-5@20250929"
    )  # the double took it from the path


@pytest.mark.parametrize("scenario", ["text", "drop_resume"])
def test_interactions_on_vertex_and_resuming_a_dropped_stream(
    gateway: ServerThread, vertex: VertexDouble, scenario: str
) -> None:
    resumes = vertex.upstream.resumes
    out = CALLERS["gemini-interactions"](gateway.url, f"vertex-interactions--{scenario}", "text", True)
    assert out.text == ANSWERS["text"]["text"]
    assert vertex.paths[-1].startswith(f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/interactions")
    if scenario == "drop_resume":
        assert vertex.upstream.resumes == resumes + 1, "resumed with GET on the Vertex path"


def test_token_counting_on_vertex(gateway: ServerThread, vertex: VertexDouble) -> None:
    from tests.support.callers import anthropic_client, gemini_client
    from tests.support.fake_upstream import COUNTED_TOKENS

    counted = anthropic_client(gateway.url).messages.count_tokens(
        model="vertex-claude--text", messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens == COUNTED_TOKENS
    assert (
        vertex.paths[-1]
        == f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/count-tokens:rawPredict"
    )
    client = gemini_client(gateway.url)  # held: a dropped genai.Client closes its connection pool
    gemini = client.models.count_tokens(model="vertex-gemini--text", contents="hi")
    assert gemini.total_tokens == COUNTED_TOKENS
    assert vertex.paths[-1] == f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/text:countTokens"
    wrapped = {
        "generateContentRequest": {
            "model": "models/vertex-gemini--text",
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "systemInstruction": {"parts": [{"text": "be brief"}]},
        }
    }
    answer = httpx.post(
        f"{gateway.url}/v1beta/models/vertex-gemini--text:countTokens",
        json=wrapped,
        headers={"x-goog-api-key": "caller-key"},
        timeout=10,
    )
    assert answer.json()["totalTokens"] == COUNTED_TOKENS
    body = vertex.upstream.received[-1].body  # Vertex's CountTokensRequest: the fields at the top
    assert "generateContentRequest" not in body and body["systemInstruction"]["parts"][0]["text"] == "be brief"


def test_no_token_or_key_in_logs_or_answers(
    gateway: ServerThread, vertex: VertexDouble, key: rsa.RSAPrivateKey, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    vertex.force_401 = 1
    texts = []
    for caller in CALLER_DIALECTS:
        out = CALLERS[caller](gateway.url, "vertex-claude--text", "text", True)
        texts.append(repr(out))
        with pytest.raises(ERRORS[caller]) as info:
            CALLERS[caller](gateway.url, "vertex-gemini--error_mid_stream", "error_mid_stream", True)
        texts.append(repr(info.value) + str(getattr(info.value, "body", "")))
    pem_line = (
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
        .splitlines()[5]
    )
    seen = caplog.text + "".join(texts)
    for token in vertex.tokens:
        assert token not in seen
    assert pem_line not in seen


# --------------------------------------------------------------------------- the platform's own rules


def settings_for(dialect: str = "gemini", **extra: Any) -> ProviderSettings:
    return ProviderSettings(
        name="v", dialect=dialect, platform="vertex", **{"project": PROJECT, "location": LOCATION, **extra}
    )


@pytest.mark.parametrize(
    ("location", "host"),
    [
        ("us-central1", "https://us-central1-aiplatform.googleapis.com"),
        ("global", "https://aiplatform.googleapis.com"),
        ("us", "https://aiplatform.us.rep.googleapis.com"),
        ("eu", "https://aiplatform.eu.rep.googleapis.com"),
    ],
)
def test_hosts(location: str, host: str) -> None:
    s = settings_for(location=location)
    assert platform_for(s).base_url(s) == host


def test_paths_and_bodies() -> None:
    s = settings_for("anthropic")
    vertex = platform_for(s)
    call = vertex.adapt(
        UpstreamCall(
            "/v1/messages",
            {"model": "claude-opus-4-1@20250805", "stream": False, "max_tokens": 5},
            headers={"anthropic-beta": "x,context-1m-2025-08-07"},
        ),
        "claude-opus-4-1@20250805",
        s,
    )
    assert (
        call.path
        == f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/claude-opus-4-1@20250805:rawPredict"
    )
    assert call.body == {"stream": False, "max_tokens": 5, "anthropic_version": "vertex-2023-10-16"}
    assert call.headers == {"anthropic-beta": "context-1m-2025-08-07"} and call.dropped == ["anthropic_beta:x"]
    hostile = vertex.adapt(UpstreamCall("/v1/messages", {"model": "m", "stream": True}), "a/../b?c", s)
    assert hostile.path.endswith("/models/a%2F..%2Fb%3Fc:streamRawPredict")
    g = settings_for("gemini-interactions")
    call = platform_for(g).adapt(UpstreamCall("/v1beta/interactions", {"model": "gemini-3-flash"}), "gemini-3-flash", g)
    assert call.path == f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/interactions"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"project": None}, "needs project"),
        ({"location": None}, "needs location"),
        ({"dialect": "openai-chat"}, "serves the dialects"),
    ],
)
def test_startup_refuses_incomplete_settings(extra: dict[str, Any], words: str) -> None:
    s = ProviderSettings(
        **{"name": "v", "dialect": "gemini", "platform": "vertex", "project": PROJECT, "location": LOCATION, **extra}
    )
    with pytest.raises(ConfigError, match=words):
        platform_for(s).check(s)


def test_startup_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("google") else real(name, *a)
    )
    settings = Settings(
        auth={"keys_env": ""},
        providers=[provider("vertex", "gemini", "http://127.0.0.1:9")],
        routes=[{"model": "m", "provider": "vertex"}],
    )
    with pytest.raises(ConfigError, match=r"pip install 'llm-gateway\[vertex\]'"):
        check_platforms(settings)
    with pytest.raises(ConfigError, match=r"llm-gateway\[vertex\]"):
        create_app(settings)


def test_token_url_for_a_key_file_that_names_none(
    tmp_path: Path, key: rsa.RSAPrivateKey, vertex: VertexDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.platforms.google_auth import GoogleTokens

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path / "sa.json", key, None)))
    issued = vertex.issued
    token, expires_at = GoogleTokens("v", vertex.token_url).fetch(False)
    assert token in vertex.tokens and vertex.issued == issued + 1
    assert time.time() < expires_at <= time.time() + vertex.token_seconds + 1


def test_credential_source_names_the_file_not_the_key(
    tmp_path: Path, key: rsa.RSAPrivateKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = key_file(tmp_path / "sa.json", key, "http://127.0.0.1:9/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    s = settings_for()
    source = platform_for(s).credential_source(s)
    assert (
        source == f"Application Default Credentials: service account key file $GOOGLE_APPLICATION_CREDENTIALS ({path})"
    )


def test_check_config_shows_the_source(tmp_path: Path, key: rsa.RSAPrivateKey) -> None:
    sa = key_file(tmp_path / "sa.json", key, "http://127.0.0.1:9/token")
    config = tmp_path / "gateway.toml"
    config.write_text(f"""
[[providers]]
name = "vertex"
dialect = "anthropic"
platform = "vertex"
project = "{PROJECT}"
location = "global"

[[routes]]
model = "claude"
provider = "vertex"
""")
    env = {"PATH": "/usr/bin:/bin", "GOOGLE_APPLICATION_CREDENTIALS": str(sa)}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"anthropic on vertex https://aiplatform.googleapis.com (credentials: Application Default Credentials: service account key file $GOOGLE_APPLICATION_CREDENTIALS ({sa}))"
        in done.stdout
    )
    assert "PRIVATE KEY" not in done.stdout + done.stderr
