"""The exact response cache, end to end: the official SDKs through a real gateway to the loopback upstream.

A repeat within the TTL reaches no upstream, gives the same answer in the caller's own shape
(streamed or whole), says ``x-gateway-cache: hit`` and costs nothing, with the saving in the
access log; every change that could change the answer is a miss. Each test asks its own question
(``callers.USER`` set to a fresh sentence), so entries never leak between tests.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support import callers
from tests.support.access_log import Capture, capture_access_log
from tests.support.fake_upstream import FakeUpstream, ServerThread

DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
PRICE = {"input": 3.0, "output": 15.0}


def cache_config(fake: FakeUpstream, **cache: Any) -> dict[str, Any]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["server"]["access_log"] = True
    config["cache"] = {"enabled": True, **cache}
    config["prices"] = {"*": PRICE}
    config["routes"] = [
        {"model": "uncached", "provider": "up-openai-chat", "upstream_model": "u--text", "cache": False},
        {"model": "twin", "provider": "up-openai-chat", "upstream_model": "openai-chat--text"},
        *config["routes"],
    ]
    return config


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream) -> Iterator[tuple[str, Capture]]:
    with capture_access_log() as capture, ServerThread(create_app(Settings(**cache_config(fake)))) as server:
        yield server.url, capture


@pytest.fixture
def question(monkeypatch: pytest.MonkeyPatch) -> str:
    """A question no other test asks: this test's entries are its own."""
    text = f"What is the weather in Paris? ({secrets.token_hex(6)})"
    monkeypatch.setattr(callers, "USER", text)
    return text


def log_after(capture: Capture, seen: int, timeout: float = 5.0) -> dict[str, Any]:
    """The first access-log line written after ``seen`` lines."""
    import orjson

    deadline = time.monotonic() + timeout
    while len(capture.lines) <= seen:
        if time.monotonic() > deadline:
            raise AssertionError("no access-log line")
        time.sleep(0.01)
    return dict(orjson.loads(capture.lines[seen]))


def ask(
    gw: tuple[str, Capture], fake: FakeUpstream, dialect: str, model: str, stream: bool, scenario: str = "text"
) -> tuple[callers.Outcome, dict[str, Any], int]:
    """One SDK call: its outcome, its access-log line, and how many upstream requests it made."""
    url, capture = gw
    seen, calls = len(capture.lines), len(fake.received)
    if dialect == "gemini-interactions":  # a stored interaction runs detached: not cached (docs/cache.md)
        out = callers.interactions_call(url, model, scenario, stream, store=False)
    else:
        out = callers.CALLERS[dialect](url, model, scenario, stream)
    line = log_after(capture, seen)
    return out, line, len(fake.received) - calls


def same_answer(a: callers.Outcome, b: callers.Outcome) -> None:
    assert (a.text, a.thinking, a.tools, a.stop, a.model, a.usage) == (
        b.text,
        b.thinking,
        b.tools,
        b.stop,
        b.model,
        b.usage,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_repeat_is_answered_from_the_cache(
    gw: tuple[str, Capture], fake: FakeUpstream, question: str, dialect: str, stream: bool
) -> None:
    model = f"{dialect}--text"
    first, line1, calls1 = ask(gw, fake, dialect, model, stream)
    again, line2, calls2 = ask(gw, fake, dialect, model, stream)
    assert calls1 >= 1 and calls2 == 0  # the repeat reached no upstream
    assert first.text
    same_answer(first, again)
    assert line1["cache"] == "miss" and line1["cost_usd"] > 0
    assert line2["cache"] == "hit" and line2["cost_usd"] == 0
    assert line2["cost_saved_usd"] == pytest.approx(line1["cost_usd"])
    assert line2["attempts"] == [] and line2["status"] == 200


@pytest.mark.parametrize("dialect", DIALECTS)
def test_streamed_then_whole_is_one_entry(
    gw: tuple[str, Capture], fake: FakeUpstream, question: str, dialect: str
) -> None:
    """Streaming is not part of the key: a whole repeat of a streamed answer is a hit in its own shape."""
    model = f"{dialect}--tool_call"
    first, _, _ = ask(gw, fake, dialect, model, True, "tool_call")
    again, line, calls = ask(gw, fake, dialect, model, False, "tool_call")
    assert calls == 0 and line["cache"] == "hit"
    assert first.tools and first.tools == again.tools and first.stop == again.stop


def test_the_same_conversation_in_another_dialect_is_a_hit(
    gw: tuple[str, Capture], fake: FakeUpstream, question: str
) -> None:
    first, line1, _ = ask(gw, fake, "openai-chat", "twin", False)
    again, line2, calls = ask(gw, fake, "anthropic", "twin", True)
    assert line1["cache"] == "miss" and line2["cache"] == "hit" and calls == 0
    assert again.text == first.text and again.stop == "end_turn" and first.stop == "stop"


def raw_chat(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers or {}, timeout=20)


def chat_body(question: str, **more: Any) -> dict[str, Any]:
    return {"model": "openai-chat--text", "messages": [{"role": "user", "content": question}], **more}


def test_response_header_and_fresh_ids(gw: tuple[str, Capture], fake: FakeUpstream, question: str) -> None:
    url, _ = gw
    first = raw_chat(url, chat_body(question))
    again = raw_chat(url, chat_body(question))
    assert first.headers["x-gateway-cache"] == "miss" and again.headers["x-gateway-cache"] == "hit"
    a, b = first.json(), again.json()
    assert a["id"] != b["id"] and b["id"].startswith("chatcmpl")
    assert a["choices"][0]["message"] == b["choices"][0]["message"]


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.5},
        {"top_p": 0.5},
        {"max_tokens": 77},
        {"stop": ["zzz"]},
        {"reasoning_effort": "low"},
        {"response_format": {"type": "json_object"}},
        {"tools": [{"type": "function", "function": callers.WEATHER}]},
        {"messages": [{"role": "system", "content": "be brief"}]},
        {"model": "twin"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_any_setting_changed_is_a_miss(
    gw: tuple[str, Capture], fake: FakeUpstream, question: str, change: dict[str, Any]
) -> None:
    url, _ = gw
    assert raw_chat(url, chat_body(question)).headers["x-gateway-cache"] == "miss"
    assert raw_chat(url, chat_body(question)).headers["x-gateway-cache"] == "hit"
    body = chat_body(question)
    if "messages" in change:
        body["messages"] = change["messages"] + body["messages"]
    else:
        body.update(change)
    calls = len(fake.received)
    assert raw_chat(url, body).headers["x-gateway-cache"] == "miss"
    assert len(fake.received) == calls + 1


def test_no_cache_skips_the_lookup_and_still_stores(gw: tuple[str, Capture], fake: FakeUpstream, question: str) -> None:
    url, _ = gw
    raw_chat(url, chat_body(question))
    calls = len(fake.received)
    skipped = raw_chat(url, chat_body(question), {"x-gateway-cache": "no-cache"})
    assert skipped.headers["x-gateway-cache"] == "bypass" and len(fake.received) == calls + 1
    assert raw_chat(url, chat_body(question)).headers["x-gateway-cache"] == "hit"


def test_no_store_keeps_nothing(gw: tuple[str, Capture], fake: FakeUpstream, question: str) -> None:
    url, _ = gw
    assert raw_chat(url, chat_body(question), {"x-gateway-cache": "no-store"}).headers["x-gateway-cache"] == "miss"
    assert raw_chat(url, chat_body(question)).headers["x-gateway-cache"] == "miss"  # nothing was kept
    assert raw_chat(url, chat_body(question)).headers["x-gateway-cache"] == "hit"


def test_a_route_with_cache_false_is_bypassed(gw: tuple[str, Capture], fake: FakeUpstream, question: str) -> None:
    url, capture = gw
    calls = len(fake.received)
    for _ in range(2):
        seen = len(capture.lines)
        r = raw_chat(url, chat_body(question, model="uncached"))
        assert r.status_code == 200 and r.headers["x-gateway-cache"] == "bypass"
        assert log_after(capture, seen)["cache"] == "bypass"
    assert len(fake.received) == calls + 2


@pytest.mark.parametrize("scenario", ["error_mid_stream", "cut_mid_event", "no_terminator", "error_500", "reset"])
def test_errors_and_cut_streams_are_never_kept(
    gw: tuple[str, Capture], fake: FakeUpstream, question: str, scenario: str
) -> None:
    url, _ = gw
    calls = len(fake.received)
    for _ in range(2):
        with httpx.stream(
            "POST",
            url + "/v1/chat/completions",
            json=chat_body(question, model=f"openai-chat--{scenario}", stream=True),
            timeout=20,
        ) as r:
            r.read()
            assert r.headers.get("x-gateway-cache") != "hit"
    assert len(fake.received) == calls + 2


def test_an_entry_expires_with_its_ttl(fake: FakeUpstream, question: str) -> None:
    with ServerThread(create_app(Settings(**cache_config(fake, ttl_seconds=0.3)))) as server:
        assert raw_chat(server.url, chat_body(question)).headers["x-gateway-cache"] == "miss"
        assert raw_chat(server.url, chat_body(question)).headers["x-gateway-cache"] == "hit"
        time.sleep(0.4)
        assert raw_chat(server.url, chat_body(question)).headers["x-gateway-cache"] == "miss"


def test_an_answer_over_max_entry_bytes_is_not_kept(fake: FakeUpstream, question: str) -> None:
    with ServerThread(create_app(Settings(**cache_config(fake, max_entry_bytes=1024)))) as server:
        body = chat_body(question, model="openai-chat--long_500")
        assert raw_chat(server.url, body).headers["x-gateway-cache"] == "miss"
        assert raw_chat(server.url, body).headers["x-gateway-cache"] == "miss"


def test_scope_key_another_key_never_sees_an_entry(
    fake: FakeUpstream, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CACHE_KEY_A", "sk-cache-a")
    monkeypatch.setenv("CACHE_KEY_B", "sk-cache-b")
    for scope, b_sees in (("key", "miss"), ("shared", "hit")):
        config = cache_config(fake, scope=scope)
        config["keys"] = [{"name": "a", "key_env": "CACHE_KEY_A"}, {"name": "b", "key_env": "CACHE_KEY_B"}]
        with ServerThread(create_app(Settings(**config))) as server:
            a = {"authorization": "Bearer sk-cache-a"}
            b = {"authorization": "Bearer sk-cache-b"}
            assert raw_chat(server.url, chat_body(question), a).headers["x-gateway-cache"] == "miss"
            assert raw_chat(server.url, chat_body(question), a).headers["x-gateway-cache"] == "hit"
            assert raw_chat(server.url, chat_body(question), b).headers["x-gateway-cache"] == b_sees


def test_metrics_count_lookups_and_the_saving(gw: tuple[str, Capture], fake: FakeUpstream, question: str) -> None:
    url, _ = gw
    raw_chat(url, chat_body(question))
    raw_chat(url, chat_body(question))
    metrics = httpx.get(url + "/metrics", timeout=10).text
    assert 'gateway_cache_requests_total{result="hit",route="openai-chat--*"}' in metrics
    assert 'gateway_cache_requests_total{result="miss",route="openai-chat--*"}' in metrics
    saved = next(line for line in metrics.splitlines() if line.startswith("gateway_cache_saved_usd_total"))
    assert float(saved.split()[-1]) > 0


def test_off_by_default_no_header(gateway: ServerThread, question: str) -> None:
    r = raw_chat(gateway.url, chat_body(question))
    assert r.status_code == 200 and "x-gateway-cache" not in r.headers


def test_a_hit_counts_against_rpm(fake: FakeUpstream, question: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CACHE_KEY_R", "sk-cache-r")
    config = cache_config(fake)
    config["keys"] = [{"name": "r", "key_env": "CACHE_KEY_R", "rpm": 2}]
    with ServerThread(create_app(Settings(**config))) as server:
        auth = {"authorization": "Bearer sk-cache-r"}
        assert raw_chat(server.url, chat_body(question), auth).headers["x-gateway-cache"] == "miss"
        assert raw_chat(server.url, chat_body(question), auth).headers["x-gateway-cache"] == "hit"
        refused = raw_chat(server.url, chat_body(question), auth)
        assert refused.status_code == 429 and refused.json()["error"]["type"] in (
            "requests",
            "rate_limit_error",
            "rate_limit_exceeded",
        )


def test_cached_input_tokens_and_hit_rates_are_visible(fake: FakeUpstream, question: str) -> None:
    """The upstream's prompt-cache reads per route and target, and the console's input hit rate
    (openai-chat's text capture: 30 input tokens, 10 of them cached); a response-cache hit adds no tokens."""
    config = cache_config(fake)
    config["admin"] = {"key": "admin-secret-key-for-cache-tests"}
    with ServerThread(create_app(Settings(**config))) as server:
        for _ in range(2):  # a miss, then a hit
            raw_chat(server.url, chat_body(question))
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert (
            'gateway_cached_input_tokens_total{route="openai-chat--*",target="up-openai-chat:openai-chat--text"} 10.0'
            in metrics
        )
        auth = {"authorization": "Bearer admin-secret-key-for-cache-tests"}
        deadline = time.monotonic() + 5
        while True:
            overview = httpx.get(server.url + "/admin/console/overview", headers=auth, timeout=10).json()
            if overview["requests"] >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert overview["input_cache_hit_rate"] == pytest.approx(10 / 30, abs=1e-3)
        assert overview["response_cache_hits"] == 1
        row = next(r for r in overview["by_model"] if r["model"] == "openai-chat--text")
        assert (row["requests"], row["input_tokens"], row["cached_input_tokens"]) == (2, 30, 10)
        records = httpx.get(server.url + "/admin/console/requests", headers=auth, timeout=10).json()["requests"]
        assert [r["cache"] for r in records[:2]] == ["hit", "miss"]


def test_a_hit_on_a_stored_response_is_stored_again_for_follow_ups(
    gw: tuple[str, Capture], fake: FakeUpstream, question: str
) -> None:
    import openai

    client = openai.OpenAI(base_url=gw[0] + "/v1", api_key="sk-caller", max_retries=0)
    first = client.responses.create(model="openai-responses--text", input=question)
    again = client.responses.with_raw_response.create(model="openai-responses--text", input=question)
    assert again.headers["x-gateway-cache"] == "hit"
    hit = again.parse()
    assert hit.id != first.id and hit.output_text == first.output_text
    assert client.responses.retrieve(hit.id).output_text == first.output_text
    follow = client.responses.create(model="openai-responses--text", input="and tomorrow?", previous_response_id=hit.id)
    assert follow.output_text
