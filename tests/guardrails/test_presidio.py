"""The presidio guardrail: Presidio's own recognizers over a blank spaCy pipeline (no model
download), through the gateway with the openai SDK — on the request and on the answer (whole, and
streamed one character a chunk: each block judged whole at its end); a missing model fails at
startup naming it."""

from __future__ import annotations

import pytest

pytest.importorskip("presidio_analyzer")
pytest.importorskip("spacy")

import orjson

from gateway.guardrails.engine import GuardrailConfigError, compile_guardrail
from gateway.server.app import create_app
from gateway.settings import GuardrailSettings, Settings
from tests.guardrails.test_guardrails_callers import ANSWER, CARD, EMAIL, PROMPT, ChatUpstream
from tests.support.callers import openai_client
from tests.support.fake_upstream import ServerThread


def test_presidio_redacts_the_request_over_a_blank_pipeline() -> None:
    up = ChatUpstream()
    with ServerThread(up) as upstream:
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [{"name": "presidio", "kind": "presidio", "model": "blank:en"}],
            "routes": [{"model": "*", "provider": "up", "guardrails": ["presidio"]}],
        }
        with ServerThread(create_app(Settings(**config))) as gw:
            reply = openai_client(gw.url).chat.completions.create(
                model="p", messages=[{"role": "user", "content": PROMPT}]
            )
    sent = orjson.dumps(up.bodies[-1]).decode()
    assert EMAIL not in sent and CARD not in sent
    assert "[REDACTED:EMAIL_ADDRESS]" in sent and "[REDACTED:CREDIT_CARD]" in sent
    assert reply.choices[0].message.content == ANSWER_REDACTED


ANSWER_REDACTED = "Sure: I will write to [REDACTED:EMAIL_ADDRESS], card [REDACTED:CREDIT_CARD]. Bye."


def _streamed(url: str, model: str) -> str:
    chunks = openai_client(url).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_presidio_redacts_streamed_answers_whatever_the_chunks() -> None:
    up = ChatUpstream()
    with ServerThread(up) as upstream:
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [
                {"name": "presidio", "kind": "presidio", "model": "blank:en", "on": ["response"]},
                {"name": "watch", "kind": "presidio", "model": "blank:en", "action": "log", "on": ["response"]},
            ],
            "routes": [
                {"model": "p-*", "provider": "up", "guardrails": ["presidio"]},
                {"model": "w-*", "provider": "up", "guardrails": ["watch"]},
            ],
        }
        with ServerThread(create_app(Settings(**config))) as gw:
            for size in (1, 6):
                assert _streamed(gw.url, f"p-{size}") == ANSWER_REDACTED
            assert _streamed(gw.url, "w-3") == ANSWER  # log: passed as it came


def test_a_missing_spacy_model_fails_at_startup_naming_it() -> None:
    with pytest.raises(GuardrailConfigError, match=r"en_core_web_lg.*spacy download"):
        compile_guardrail(GuardrailSettings(name="p", kind="presidio", model="en_core_web_lg"))
