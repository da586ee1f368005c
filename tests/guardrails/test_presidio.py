"""The presidio guardrail: Presidio's own recognizers over a blank spaCy pipeline (no model
download), through the gateway with the openai SDK — on the request and on the answer (whole, and
streamed one character a chunk: each block judged whole at its end); a missing model fails at
startup naming it."""

from __future__ import annotations

import pytest

pytest.importorskip("presidio_analyzer")
pytest.importorskip("spacy")

import threading
import time
from collections.abc import Iterator

import httpx
import openai
import orjson

from gateway.guardrails.engine import GuardrailConfigError, compile_guardrail
from gateway.server.app import create_app
from gateway.settings import GuardrailSettings, Settings
from tests.guardrails.test_guardrails_callers import ANSWER, CARD, EMAIL, PROMPT, ChatUpstream
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import openai_client
from tests.support.embed_double import OPENAI_KEY, EmbedDouble
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


# -- off the event loop: the gateway keeps serving while presidio analyzes; a bound on its time --

BIG = "Call me at +1 415 555 0100 or write to jane.roe@example.com about order 12345. " * 600  # 47 KB: ~2.5 s
MEDIUM = BIG[: len(BIG) // 6]  # ~8 KB: far more than 1 ms of analysis


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ChatUpstream, Capture]]:
    up = ChatUpstream()
    blank = {"kind": "presidio", "model": "blank:en"}
    with ServerThread(up) as upstream:
        config = {
            "server": {"access_log": True},
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [
                {"name": "presidio", **blank},
                {"name": "presidio-block", **blank, "action": "block", "on": ["request"]},
                {"name": "presidio-log", **blank, "action": "log"},
                {"name": "pii-log", "kind": "pii", "types": ["email"], "action": "log"},
                {"name": "slow-closed", **blank, "timeout_ms": 1, "on": ["request"]},
                {"name": "slow-open", **blank, "timeout_ms": 1, "fail": "open", "on": ["request"]},
            ],
            "routes": [
                {"model": "big", "provider": "up", "guardrails": ["presidio"]},
                {"model": "blocked", "provider": "up", "guardrails": ["presidio-block"]},
                {"model": "order", "provider": "up", "guardrails": ["presidio-log", "pii-log"]},
                {"model": "closed", "provider": "up", "guardrails": ["slow-closed"]},
                {"model": "open", "provider": "up", "guardrails": ["slow-open"]},
                {"model": "*", "provider": "up"},
            ],
        }
        with capture_access_log() as capture, ServerThread(create_app(Settings(**config))) as gw:
            yield gw.url, up, capture


def _ask(url: str, model: str, text: str) -> str:
    reply = openai_client(url).chat.completions.create(model=model, messages=[{"role": "user", "content": text}])
    return reply.choices[0].message.content or ""


def test_the_gateway_serves_others_while_a_big_analysis_runs(served: tuple[str, ChatUpstream, Capture]) -> None:
    url, up, _ = served
    _ask(url, "big", "warm up the pipeline")
    done: list[str] = []
    big = threading.Thread(target=lambda: done.append(_ask(url, "big", BIG)))
    started = time.monotonic()
    big.start()
    time.sleep(0.3)  # the big request is in its analysis (~2.5 s of CPU)
    t0 = time.monotonic()
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    assert _ask(url, "plain", "hi") == ANSWER  # another chat request, no guardrail
    answered = time.monotonic() - t0
    still_running = big.is_alive()
    big.join(timeout=30)
    assert still_running, f"the big analysis ended within {time.monotonic() - started:.2f} s: nothing was measured"
    assert answered < 1.0, f"the others waited {answered:.2f} s for the analysis"
    sent = orjson.dumps(up.bodies[-1]).decode()
    assert EMAIL not in sent and sent.count("[REDACTED:EMAIL_ADDRESS]") == 600
    assert done == [ANSWER_REDACTED]


def test_block_and_log_are_unchanged(served: tuple[str, ChatUpstream, Capture]) -> None:
    url, up, _ = served
    before = len(up.bodies)
    with pytest.raises(openai.BadRequestError) as info:
        _ask(url, "blocked", PROMPT)
    assert info.value.code == "guardrail_blocked" and "presidio-block" in str(info.value)
    assert len(up.bodies) == before  # nothing sent upstream
    assert _ask(url, "order", PROMPT) == ANSWER  # log: unchanged both ways
    assert up.bodies[-1]["messages"][-1]["content"] == PROMPT


def test_the_access_log_lists_guardrails_in_config_order(served: tuple[str, ChatUpstream, Capture]) -> None:
    """On the answer the scanning kind runs before presidio (which judges the block at its end):
    the log still lists them as configured, the request's first."""
    url, _, capture = served
    for _ in range(2):
        _ask(url, "order", PROMPT)
        line = capture.line_where(lambda e: e.get("model") == "order")
        assert [(g["name"], g["where"]) for g in line["guardrails"]] == [
            ("presidio-log", "request"),
            ("pii-log", "request"),
            ("presidio-log", "response"),
            ("pii-log", "response"),
        ]
        assert line["guardrails"][0]["types"] == ["CREDIT_CARD", "EMAIL_ADDRESS"]


def test_an_analysis_past_timeout_ms_fails_as_configured(served: tuple[str, ChatUpstream, Capture]) -> None:
    url, up, capture = served
    before = len(up.bodies)
    with pytest.raises(openai.BadRequestError) as info:  # fail = "closed": refused, nothing sent upstream
        _ask(url, "closed", MEDIUM)
    assert info.value.code == "guardrail_blocked" and "did not finish in time" in str(info.value)
    assert len(up.bodies) == before
    line = capture.line_where(lambda e: any(g["name"] == "slow-closed" for g in e.get("guardrails") or []))
    assert line["guardrails"] == [{"name": "slow-closed", "action": "redact", "where": "request", "types": ["timeout"]}]
    assert _ask(url, "open", MEDIUM) == ANSWER  # fail = "open": forwarded as it came
    assert up.bodies[-1]["messages"][-1]["content"] == MEDIUM


def test_embeddings_inputs_are_analyzed_off_the_loop_too() -> None:
    double = EmbedDouble()
    with ServerThread(double) as up:
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [
                {"name": "openai", "dialect": "openai-chat", "base_url": up.url + "/v1", "api_key": OPENAI_KEY}
            ],
            "guardrails": [
                {"name": "presidio", "kind": "presidio", "model": "blank:en", "entities": ["EMAIL_ADDRESS"]}
            ],
            "routes": [
                {
                    "model": "text",
                    "provider": "openai",
                    "upstream_model": "text-embedding-3-small",
                    "guardrails": ["presidio"],
                }
            ],
        }
        with ServerThread(create_app(Settings(**config))) as gw:
            openai_client(gw.url).embeddings.create(
                model="text", input=[f"write to {EMAIL}", "fine"], encoding_format="float"
            )
    assert double.calls("openai")[-1]["body"]["input"] == ["write to [REDACTED:EMAIL_ADDRESS]", "fine"]
