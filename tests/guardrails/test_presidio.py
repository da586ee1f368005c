"""The presidio guardrail: Presidio's own recognizers over a blank spaCy pipeline (no model
download), through the gateway with the openai SDK; a missing model fails at startup naming it."""

from __future__ import annotations

import pytest

pytest.importorskip("presidio_analyzer")
pytest.importorskip("spacy")

import orjson

from gateway.guardrails.engine import GuardrailConfigError, compile_guardrail
from gateway.server.app import create_app
from gateway.settings import GuardrailSettings, Settings
from tests.guardrails.test_guardrails_callers import CARD, EMAIL, PROMPT, ChatUpstream
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
            openai_client(gw.url).chat.completions.create(model="p", messages=[{"role": "user", "content": PROMPT}])
    sent = orjson.dumps(up.bodies[-1]).decode()
    assert EMAIL not in sent and CARD not in sent
    assert "[REDACTED:EMAIL_ADDRESS]" in sent and "[REDACTED:CREDIT_CARD]" in sent


def test_a_missing_spacy_model_fails_at_startup_naming_it() -> None:
    with pytest.raises(GuardrailConfigError, match=r"en_core_web_lg.*spacy download"):
        compile_guardrail(GuardrailSettings(name="p", kind="presidio", model="en_core_web_lg"))
