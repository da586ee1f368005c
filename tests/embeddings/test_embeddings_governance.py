"""Embeddings governed like chat: named keys' spend (tokens × the ``[prices]`` input rate, an entry
with only ``input``), rpm / tpm / model refusals in the caller's dialect with nothing sent upstream,
the token and cost metrics, and the GenAI ``embeddings {model}`` CLIENT span."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from gateway.server.app import create_app
from gateway.settings import PriceSettings, RouteSettings, Settings
from gateway.telemetry.metrics import GenAIMetrics
from gateway.telemetry.traces import Telemetry
from tests.embeddings.conftest import embed_config
from tests.support.callers import gemini_client, openai_client
from tests.support.embed_double import EmbedDouble, vector, words
from tests.support.fake_upstream import ServerThread

ADMIN = "admin-embed-secret"
RATE = 0.13  # $ per million input tokens (an embedding model's price: input only)
TEXTS = ["alpha beta gamma", "delta epsilon", "zeta"]


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


KEYS = [
    {"name": "emb", "key_sha256": sha("sk-emb")},
    {"name": "emb-gem", "key_sha256": sha("gem-emb")},
    {"name": "emb-rpm", "key_sha256": sha("sk-rpm"), "rpm": 1},
    {"name": "emb-rpm-gem", "key_sha256": sha("gem-rpm"), "rpm": 1},
    {"name": "emb-tpm", "key_sha256": sha("sk-tpm"), "tpm": 20},
    {"name": "emb-narrow", "key_sha256": sha("sk-narrow"), "models": ["oai-*"]},
]


@pytest.fixture(scope="module")
def traced(
    upstreams: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, InMemorySpanExporter]]:
    db: Path = tmp_path_factory.mktemp("embed-keys") / "gateway.db"
    config: dict[str, Any] = embed_config(**upstreams)
    config.update(
        store={"url": f"sqlite:///{db}"},
        admin={"key": ADMIN},
        keys=KEYS,
        prices={"text-embedding-3-small": {"input": RATE}, "gemini-embedding-001": {"input": RATE}},
        server={"access_log": False},
        inspector={"capture": "all"},
    )
    app = create_app(Settings(**config))
    spans = InMemorySpanExporter()
    app.state.gateway.telemetry = Telemetry(SimpleSpanProcessor(spans), GenAIMetrics())
    with ServerThread(app) as server:
        yield server, spans


def admin(server: ServerThread, path: str) -> Any:
    return httpx.get(server.url + path, headers={"authorization": f"Bearer {ADMIN}"}, timeout=10).json()


def test_an_input_only_price_is_valid_config() -> None:
    price = PriceSettings(input=0.02)
    assert price.output is None
    assert PriceSettings(input=1.0, output=2.0).output == 2.0  # chat prices unchanged
    assert RouteSettings(model="m", provider="p", task_type="RETRIEVAL_QUERY").task_type == "RETRIEVAL_QUERY"
    with pytest.raises(ValidationError, match="task_type must be one of"):
        RouteSettings(model="m", provider="p", task_type="POETRY")


def test_spend_per_key_is_tokens_times_price(traced: tuple[ServerThread, InMemorySpanExporter]) -> None:
    server, _ = traced
    for _ in range(2):
        openai_client(server.url, "sk-emb").embeddings.create(model="oai-small", input=TEXTS)
    tokens = sum(words(t) for t in TEXTS)
    record = admin(server, "/admin/requests?key=emb&limit=1")["requests"][0]
    assert record["kind"] == "embeddings" and record["input_tokens"] == tokens
    assert record["cost_usd"] == pytest.approx(tokens * RATE / 1e6, abs=1e-15) and record["unpriced"] is False
    row = admin(server, "/admin/spend?group_by=key&key=emb")["rows"][0]
    assert row["requests"] == 2 and row["input_tokens"] == 2 * tokens and row["output_tokens"] == 0
    assert row["cost_usd"] == pytest.approx(2 * tokens * RATE / 1e6, abs=1e-15)
    metrics = httpx.get(server.url + "/metrics").text
    assert 'gateway_tokens_total{kind="input",provider="openai"}' in metrics
    assert 'gateway_cost_usd_total{key="emb",model="text-embedding-3-small",provider="openai"}' in metrics


def test_an_estimated_usage_is_priced_and_marked(traced: tuple[ServerThread, InMemorySpanExporter]) -> None:
    server, _ = traced
    client = gemini_client(server.url, "gem-emb")
    got = client.models.embed_content(model="gem", contents=TEXTS)
    assert got.embeddings is not None and got.embeddings[2].values == vector("zeta", "gemini-embedding-001")
    record = admin(server, "/admin/requests?key=emb-gem&limit=1")["requests"][0]
    estimated = sum(max(1, len(t) // 4) for t in TEXTS)
    assert record["usage_estimated"] is True and record["input_tokens"] == estimated
    assert record["cost_usd"] == pytest.approx(estimated * RATE / 1e6, abs=1e-15)


def test_rpm_refuses_in_each_dialect_and_nothing_goes_upstream(
    traced: tuple[ServerThread, InMemorySpanExporter], double: EmbedDouble
) -> None:
    server, _ = traced
    client = openai_client(server.url, "sk-rpm")
    client.embeddings.create(model="oai-small", input="once")
    before = len(double.seen)
    with pytest.raises(openai.RateLimitError) as caught:
        client.embeddings.create(model="oai-small", input="twice")
    assert caught.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert caught.value.response.headers["retry-after"]
    body = {"requests": [{"content": {"parts": [{"text": "x"}]}}]}
    url = f"{server.url}/v1beta/models/gem:batchEmbedContents"
    assert httpx.post(url, json=body, headers={"x-goog-api-key": "gem-rpm"}).status_code == 200
    before = len(double.seen)
    refused = httpx.post(url, json=body, headers={"x-goog-api-key": "gem-rpm"})
    assert refused.status_code == 429 and refused.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert len(double.seen) == before


def test_tpm_counts_input_tokens_only(traced: tuple[ServerThread, InMemorySpanExporter], double: EmbedDouble) -> None:
    server, _ = traced
    client = openai_client(server.url, "sk-tpm")
    client.embeddings.create(model="oai-small", input="short")  # ~1 token: no output reserved, it fits
    before = len(double.seen)
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="oai-small", input="x" * 400)  # ~100 tokens > 20 a minute
    assert len(double.seen) == before


def test_a_key_s_model_globs_hold(traced: tuple[ServerThread, InMemorySpanExporter], double: EmbedDouble) -> None:
    server, _ = traced
    client = openai_client(server.url, "sk-narrow")
    assert client.embeddings.create(model="oai-small", input="fine").data
    before = len(double.seen)
    with pytest.raises(openai.PermissionDeniedError):
        client.embeddings.create(model="gem", input="not this one")
    assert len(double.seen) == before


def test_an_embeddings_client_span(traced: tuple[ServerThread, InMemorySpanExporter]) -> None:
    server, spans = traced
    spans.clear()
    openai_client(server.url, "sk-emb").embeddings.create(model="vtx", input=TEXTS, dimensions=4)
    deadline = time.monotonic() + 5
    while not any(s.kind is SpanKind.SERVER for s in spans.get_finished_spans()) and time.monotonic() < deadline:
        time.sleep(0.01)
    finished = list(spans.get_finished_spans())
    client = [s for s in finished if s.kind is SpanKind.CLIENT]
    assert [s.name for s in client] == ["embeddings gemini-embedding-001"]
    attrs = client[0].attributes or {}
    assert attrs["gen_ai.operation.name"] == "embeddings" and attrs["gen_ai.provider.name"]
    assert attrs["gen_ai.usage.input_tokens"] == sum(words(t) for t in TEXTS)
    assert attrs["gen_ai.embeddings.dimension.count"] == 4
    server_span = next(s for s in finished if s.kind is SpanKind.SERVER)
    assert (server_span.attributes or {})["gateway.route"] == "vtx"


def test_the_inspector_keeps_an_embeddings_exchange(traced: tuple[ServerThread, InMemorySpanExporter]) -> None:
    server, _ = traced
    got = openai_client(server.url, "sk-emb").embeddings.with_raw_response.create(model="oai-small", input=TEXTS)
    rid = got.headers["x-request-id"]
    capture = httpx.get(f"{server.url}/admin/inspector/{rid}", headers={"authorization": f"Bearer {ADMIN}"}).json()
    assert capture["caller_request"]["path"] == "/v1/embeddings"
    assert capture["caller_request"]["headers"]["authorization"] == "[redacted]"
    up = capture["upstream_requests"][-1]
    assert up["path"] == "/embeddings" and up["status"] == 200 and '"alpha beta gamma"' in up["body"]
    assert "sk-upstream" not in str(capture)
    assert '"object":"list"' in "".join(f["data"] for f in capture["caller_frames"])
