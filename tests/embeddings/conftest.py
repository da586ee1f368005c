"""The embeddings tests' upstreams: one double of every embeddings API (tests/support/embed_double.py),
behind the Vertex double (OAuth verified) and the Bedrock double (SigV4 verified), and the gateway
in front of them with a provider of each kind."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.platforms.conftest import aws_env  # noqa: F401  (the Bedrock double's credentials, from the environment only)
from tests.platforms.test_vertex import EMAIL, LOCATION, PROJECT, key_file
from tests.support.access_log import Capture, capture_access_log
from tests.support.bedrock_double import SECRET_KEY, SESSION_TOKEN, BedrockDouble
from tests.support.embed_double import AZURE_KEY, AZURE_VERSION, GEMINI_KEY, OPENAI_KEY, EmbedDouble
from tests.support.fake_upstream import ServerThread, free_port
from tests.support.vertex_double import VertexDouble

TIMEOUTS = {"first_byte_timeout": 5.0, "idle_timeout": 3.0, "connect_timeout": 2.0, "retry_backoff": 0.01}
ROUTES = {  # caller model -> (provider, upstream model)
    "text": ("openai", "text"),  # a model named like the wire
    "oai-small": ("openai", "text-embedding-3-small"),
    "oai-throttle": ("openai", "m-throttle_once"),
    "oai-500": ("openai", "m-error_500"),
    "ada": ("openai", "text-embedding-ada-002"),
    "gem": ("gemini-api", "gemini-embedding-001"),
    "vtx": ("vertex", "gemini-embedding-001"),
    "vtx5": ("vertex", "text-embedding-005"),
    "titan": ("bedrock", "amazon.titan-embed-text-v2:0"),
    "cohere": ("bedrock", "cohere.embed-english-v3"),
    "cohere4": ("bedrock", "us.cohere.embed-v4:0"),
    "az": ("azure", "text-embedding-3-small"),
    "claude": ("anthropic", "claude-sonnet-4-5"),
    "slow": ("openai", "m-slow"),
    "short": ("openai", "m-short"),
    "down": ("down", "text"),
    "badkey": ("badkey", "text"),
    "demo": ("demo", "demo"),
}


def provider(name: str, dialect: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "dialect": dialect, "max_retries": 2, **TIMEOUTS, **extra}


def embed_config(double_url: str, vertex_url: str, bedrock_url: str, **more: Any) -> dict[str, Any]:
    routes: list[dict[str, Any]] = [{"model": m, "provider": p, "upstream_model": u} for m, (p, u) in ROUTES.items()]
    routes += [
        {
            "model": "cohere-query",
            "provider": "bedrock",
            "upstream_model": "cohere.embed-v4:0",
            "task_type": "RETRIEVAL_QUERY",
        },
        {"model": "falls", "provider": "openai", "upstream_model": "f-error_500", "fallbacks": ["gemini-api:fb-gem"]},
        {
            "model": "pool",
            "targets": [
                {"provider": "openai", "upstream_model": "pool-error_500"},
                {"provider": "gemini-api", "upstream_model": "pool-gem"},
            ],
            "strategy": "ordered",
        },
        {
            "model": "pool-down",
            "targets": [
                {"provider": "openai", "upstream_model": "pd1-error_500"},
                {"provider": "openai", "upstream_model": "pd2-error_500"},
            ],
            "cooldown_seconds": 60,  # longer than the first-byte budget: no waiting for a recovery
        },
    ]
    return {
        "server": {"access_log": True},
        "auth": {"keys_env": ""},
        "store": {"url": "sqlite://:memory:"},
        "providers": [
            provider("openai", "openai-chat", base_url=double_url + "/v1", api_key=OPENAI_KEY),
            provider("gemini-api", "gemini", base_url=double_url, api_key=GEMINI_KEY),
            provider(
                "azure",
                "openai-chat",
                platform="azure",
                base_url=double_url,
                api_key=AZURE_KEY,
                api_version=AZURE_VERSION,
                deployments={"text-embedding-3-small": "emb-small"},
            ),
            provider(
                "vertex", "gemini", platform="vertex", project=PROJECT, location=LOCATION, endpoint_url=vertex_url
            ),
            provider("bedrock", "bedrock-converse", platform="bedrock", region="us-east-1", endpoint_url=bedrock_url),
            provider("anthropic", "anthropic", base_url=double_url, api_key="sk-ant-unused"),
            provider("down", "openai-chat", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="x", max_retries=0),
            provider("badkey", "openai-chat", base_url=double_url + "/v1", api_key="sk-wrong", max_retries=0),
            {"name": "demo", "dialect": "demo"},
        ],
        "routes": routes,
        **more,
    }


@pytest.fixture(autouse=True)
def no_secret_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every log line of the gateway at DEBUG, botocore's and google-auth's too: no upstream secret in any."""
    caplog.set_level(logging.DEBUG)
    yield
    text = caplog.text
    for secret in (OPENAI_KEY, GEMINI_KEY, AZURE_KEY, SECRET_KEY, SESSION_TOKEN):
        assert secret not in text


@pytest.fixture(scope="session")
def double() -> Iterator[EmbedDouble]:
    upstream = EmbedDouble(deployments={"emb-small": "text-embedding-3-small"})
    with ServerThread(upstream) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture(scope="module")
def sa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def vertex(double: EmbedDouble, sa_key: rsa.RSAPrivateKey) -> Iterator[VertexDouble]:
    upstream = VertexDouble(sa_key.public_key(), EMAIL, PROJECT, LOCATION, token_seconds=60, upstream=double)  # type: ignore[arg-type]
    with ServerThread(upstream) as server:
        upstream.port = server.port
        yield upstream


@pytest.fixture(scope="module")
def bedrock(aws_env: None, double: EmbedDouble) -> Iterator[BedrockDouble]:  # noqa: F811
    upstream = BedrockDouble(invoke_handler=double.bedrock)
    with ServerThread(upstream) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture(scope="module")
def upstreams(
    double: EmbedDouble,
    vertex: VertexDouble,
    bedrock: BedrockDouble,
    sa_key: rsa.RSAPrivateKey,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    """The three base URLs, with Application Default Credentials naming the Vertex double's token endpoint."""
    path: Path = key_file(tmp_path_factory.mktemp("sa") / "sa.json", sa_key, vertex.token_url)
    mp = pytest.MonkeyPatch()
    mp.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    try:
        yield {
            "double_url": double.url,  # type: ignore[attr-defined]
            "vertex_url": f"http://127.0.0.1:{vertex.port}",
            "bedrock_url": bedrock.url,  # type: ignore[attr-defined]
        }
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def log() -> Iterator[Capture]:
    with capture_access_log() as capture:
        yield capture


@pytest.fixture(scope="module")
def gateway(upstreams: dict[str, str], log: Capture) -> Iterator[ServerThread]:
    settings = Settings(**embed_config(**upstreams))
    with ServerThread(create_app(settings), **uvicorn_options()) as server:
        yield server
