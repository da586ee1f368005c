"""Guardrails on embeddings: a route's or a key's guardrails apply to ``/v1/embeddings`` and to
Gemini's ``:embedContent`` / ``:batchEmbedContents`` like to a chat request — the inputs redacted
before they go upstream, a block the caller's own 400 (code ``guardrail_blocked``) with nothing
sent upstream, log recorded; the openai and google-genai SDKs as callers, a loopback double of
the upstream APIs that records what it receives, a loopback webhook service."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from google.genai import errors as genai_errors

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.guardrails.test_guardrails_callers import CARD, EMAIL
from tests.guardrails.test_webhook import GuardService
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import gemini_client, openai_client
from tests.support.embed_double import GEMINI_KEY, OPENAI_KEY, EmbedDouble, vector
from tests.support.fake_upstream import ServerThread

ADMIN = "admin-secret-key"


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


TEAM_SHA = _sha("sk-team-key")
TEXTS = [f"write to {EMAIL} today", "nothing personal here", f"card {CARD} please"]
REDACTED = ["write to [REDACTED:email] today", "nothing personal here", "card [REDACTED:credit_card] please"]

Gateway = tuple[str, EmbedDouble, Capture, GuardService, Any]  # (the last: the app's GatewayState)


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    double, service = EmbedDouble(), GuardService()
    with ServerThread(double) as up, ServerThread(service) as guard:
        openai_up = {"name": "openai", "dialect": "openai-chat", "base_url": up.url + "/v1", "api_key": OPENAI_KEY}
        gemini_up = {"name": "gemini-api", "dialect": "gemini", "base_url": up.url, "api_key": GEMINI_KEY}
        route = {"provider": "openai", "upstream_model": "text-embedding-3-small"}
        config = {
            "server": {"access_log": True},
            "auth": {"keys_env": ""},
            "admin": {"key": ADMIN},
            "store": {"url": "sqlite://:memory:"},
            "inspector": {"capture": "all"},
            "providers": [openai_up, gemini_up],
            "guardrails": [
                {"name": "pii", "kind": "pii", "action": "redact"},
                {"name": "no-cards", "kind": "pii", "types": ["credit_card"], "action": "block"},
                {"name": "watch", "kind": "pii", "types": ["email"], "action": "log"},
                {"name": "svc", "kind": "webhook", "url": guard.url + "/check", "action": "redact", "timeout_ms": 500},
            ],
            "routes": [
                {"model": "emb-redact", **route, "guardrails": ["pii"]},
                {"model": "emb-block", **route, "guardrails": ["no-cards"]},
                {"model": "emb-log", **route, "guardrails": ["watch"]},
                {"model": "emb-hook", **route, "guardrails": ["svc"]},
                {"model": "emb-plain", **route},
                {
                    "model": "gem-redact",
                    "provider": "gemini-api",
                    "upstream_model": "gemini-embedding-001",
                    "guardrails": ["pii"],
                },
                {
                    "model": "gem-block",
                    "provider": "gemini-api",
                    "upstream_model": "gemini-embedding-001",
                    "guardrails": ["no-cards"],
                },
            ],
            "keys": [
                {"name": "team", "key_sha256": TEAM_SHA, "guardrails": ["no-cards"]},
                {"name": "caller", "key_sha256": _sha("sk-caller")},  # the SDK helpers' keys: no guardrails
                {"name": "gemini-caller", "key_sha256": _sha("caller-key")},
            ],
        }
        app = create_app(Settings(**config))
        with capture_access_log() as capture, ServerThread(app) as gw:
            yield gw.url, double, capture, service, app.state.gateway


def _embed(url: str, model: str, inputs: Any, key: str = "sk-caller") -> Any:
    return openai_client(url, key=key).embeddings.create(model=model, input=inputs, encoding_format="float")


def test_openai_inputs_are_redacted_before_they_go_upstream(gateway: Gateway) -> None:
    url, double, capture, _, _ = gateway
    got = _embed(url, "emb-redact", TEXTS)
    sent = double.calls("openai")[-1]["body"]
    assert sent["input"] == REDACTED
    # the vectors are of what was sent: the redacted texts
    assert [d.embedding for d in got.data] == [vector(t, "text-embedding-3-small") for t in REDACTED]
    line = capture.line_where(lambda e: e.get("model") == "emb-redact")
    assert line["kind"] == "embeddings"
    assert line["guardrails"] == [
        {"name": "pii", "action": "redact", "where": "request", "types": ["credit_card", "email"]}
    ]
    assert EMAIL not in orjson.dumps(line).decode()


def test_gemini_callers_inputs_and_titles_are_redacted(gateway: Gateway) -> None:
    url, double, _, _, _ = gateway
    client = gemini_client(url)  # held: a client collected mid-call closes its connection
    got = client.models.embed_content(model="gem-redact", contents=TEXTS[:2])
    assert got.embeddings is not None and len(got.embeddings) == 2
    sent = double.calls("gemini")[-1]["body"]["requests"]
    assert [r["content"]["parts"][0]["text"] for r in sent] == REDACTED[:2]
    raw = httpx.post(
        f"{url}/v1beta/models/gem-redact:embedContent",
        json={"content": {"parts": [{"text": TEXTS[2]}]}, "taskType": "RETRIEVAL_DOCUMENT", "title": f"from {EMAIL}"},
        headers={"x-goog-api-key": "caller-key"},
    )
    assert raw.status_code == 200, raw.text
    one = double.calls("gemini")[-1]["body"]["requests"][0]
    assert one["content"]["parts"][0]["text"] == REDACTED[2]
    assert one["title"] == "from [REDACTED:email]"


def test_a_block_is_the_callers_400_and_nothing_goes_upstream(gateway: Gateway) -> None:
    url, double, capture, _, _ = gateway
    before = len(double.seen)
    with pytest.raises(openai.BadRequestError) as info:
        _embed(url, "emb-block", TEXTS)
    assert info.value.code == "guardrail_blocked" and "no-cards" in str(info.value)
    assert CARD not in str(info.value)
    client = gemini_client(url)
    with pytest.raises(genai_errors.ClientError) as gem:
        client.models.embed_content(model="gem-block", contents=TEXTS)
    assert gem.value.code == 400 and "no-cards" in str(gem.value)
    assert len(double.seen) == before
    line = capture.line_where(lambda e: e.get("model") == "emb-block")
    assert line["status"] == 400 and line["error_kind"] == "guardrail_blocked"
    assert line["guardrails"][0]["name"] == "no-cards"
    # without a card the same route embeds
    assert len(_embed(url, "emb-block", ["just words"]).data) == 1


def test_a_keys_guardrails_apply_to_embeddings(gateway: Gateway) -> None:
    url, double, _, _, _ = gateway
    assert len(_embed(url, "emb-plain", TEXTS).data) == 3  # the route has none
    before = len(double.seen)
    with pytest.raises(openai.BadRequestError) as info:
        _embed(url, "emb-plain", TEXTS, key="sk-team-key")
    assert info.value.code == "guardrail_blocked"
    assert len(double.seen) == before


def test_log_forwards_unchanged_and_records(gateway: Gateway) -> None:
    url, double, capture, _, _ = gateway
    _embed(url, "emb-log", TEXTS)
    assert double.calls("openai")[-1]["body"]["input"] == TEXTS
    line = capture.line_where(lambda e: e.get("model") == "emb-log")
    assert line["guardrails"] == [{"name": "watch", "action": "log", "where": "request", "types": ["email"]}]


def test_the_webhook_sees_the_inputs_and_redacts_them(gateway: Gateway) -> None:
    url, double, _, service, _ = gateway
    _embed(url, "emb-hook", ["REDACT secret-123", "fine"])
    assert service.seen[-1] == {"guardrail": "svc", "where": "request", "texts": ["REDACT secret-123", "fine"]}
    assert double.calls("openai")[-1]["body"]["input"] == ["REDACT [gone]", "fine"]


def test_token_arrays_cannot_be_read_and_are_refused(gateway: Gateway) -> None:
    url, double, _, _, _ = gateway
    before = len(double.seen)
    with pytest.raises(openai.BadRequestError) as info:
        _embed(url, "emb-redact", [[1, 2, 3]])
    assert info.value.code == "guardrail_blocked" and "strings" in str(info.value)
    assert len(double.seen) == before
    assert len(_embed(url, "emb-log", [[1, 2, 3]]).data) == 1  # log: passes


def test_nothing_raw_in_admin_requests_or_the_inspector(gateway: Gateway) -> None:
    url, _, _, _, state = gateway
    client = openai_client(url)
    client.embeddings.create(model="emb-redact", input=TEXTS, extra_headers={"x-request-id": "req_emb_guarded"})
    client.embeddings.create(model="emb-plain", input=["hi"], extra_headers={"x-request-id": "req_emb_plain"})
    # the record and the capture are finished just after the answer is sent: wait for the later one
    deadline = time.monotonic() + 5
    while state.inspector.get("req_emb_plain") is None and time.monotonic() < deadline:
        time.sleep(0.02)
    # a guarded request's capture (the caller's raw wire) is never kept; an unguarded one is
    assert state.inspector.get("req_emb_plain") is not None
    assert state.inspector.get("req_emb_guarded") is None
    r = httpx.get(url + "/admin/requests", headers={"authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and "req_emb_guarded" in r.text
    assert EMAIL not in r.text and CARD not in r.text
