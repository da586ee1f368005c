"""Named keys, prices, spend, budgets and rate limits through the real gateway (SQLite file store),
with the official SDKs as callers: exact cost per caller dialect (stream and whole) with cache and
reasoning tokens, unpriced requests, refusals in each dialect with their headers and nothing
forwarded, the admin API, metrics, and spend surviving a restart."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.callers import CALLERS, anthropic_client, openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread

ADMIN = "admin-secret-1"
RATES = {"input": 1.0, "output": 10.0, "cache_read": 0.1, "cache_write": 2.0, "reasoning": 20.0}  # $/Mtok, all distinct
CALLER_DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
# upstream model -> its exact cost at RATES (canonical usage from captures/SCENARIOS.md)
EXACT = {
    "openai-chat--thinking": (30 * 1 + 15 * 10 + 25 * 20) / 1e6,  # output 40 of which reasoning 25
    "gemini--thinking": (30 * 1 + 15 * 10 + 25 * 20) / 1e6,  # candidates 15 + thoughts 25
    "anthropic--cache_write": (20 * 1 + 10 * 0.1 + 5 * 2 + 12 * 10) / 1e6,  # input 20 + read 10 + write 5
    "openai-responses--text": (20 * 1 + 10 * 0.1 + 12 * 10) / 1e6,  # input 30 includes 10 cached
}


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def keyed_config(fake_port: int, db: Path, keys: list[dict[str, Any]], **spend: Any) -> dict[str, Any]:
    config = gateway_config(f"http://127.0.0.1:{fake_port}")
    config["store"] = {"url": f"sqlite:///{db}"}
    config["admin"] = {"key": ADMIN}
    config["keys"] = keys
    config["prices"] = {glob: RATES for glob in ("*--thinking", "*--cache_write", "*--text", "*--slow_stream", "demo")}
    config["spend"] = {"reserve_output_tokens": 20, **spend}
    config["routes"] = [
        {
            "model": "falls-back",
            "provider": "up-openai-chat",
            "upstream_model": "openai-chat--error_500",
            "fallbacks": ["up-anthropic:anthropic--cache_write"],
        },
        *config["routes"],
    ]
    return config


LIMITED = [
    {"name": "team", "key_sha256": sha("sk-caller")},  # the SDK drivers' default keys
    {"name": "gem", "key_sha256": sha("caller-key")},
    *[{"name": f"rpm-{d}", "key_sha256": sha(f"rpm-{d}"), "rpm": 1} for d in CALLER_DIALECTS + ["gemini-interactions"]],
    *[{"name": f"tpm-{d}", "key_sha256": sha(f"tpm-{d}"), "tpm": 60} for d in CALLER_DIALECTS],
    *[{"name": f"budget-{d}", "key_sha256": sha(f"budget-{d}"), "budget_usd": 0.0003} for d in CALLER_DIALECTS],
    {"name": "narrow", "key_sha256": sha("narrow"), "models": ["anthropic--*"]},
    {"name": "strict", "key_sha256": sha("strict"), "refuse_unpriced": True},
    {"name": "one-at-a-time", "key_sha256": sha("one-at-a-time"), "max_parallel": 1},
]


@pytest.fixture(scope="module")
def keyed(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    db = tmp_path_factory.mktemp("keys") / "gateway.db"
    with ServerThread(create_app(Settings(**keyed_config(fake.port, db, LIMITED)))) as server:
        yield server


def admin(server: ServerThread, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, server.url + path, headers={"authorization": f"Bearer {ADMIN}"}, timeout=10, **kw)


def last_record(server: ServerThread, key: str) -> dict[str, Any]:
    records = admin(server, "GET", f"/admin/requests?key={key}&limit=1").json()["requests"]
    assert records, f"no request recorded for {key}"
    return records[0]


# ---------------------------------------------------------------- exact cost


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
@pytest.mark.parametrize("upstream_model", sorted(EXACT))
def test_exact_cost_per_caller_dialect(keyed: ServerThread, caller: str, stream: bool, upstream_model: str) -> None:
    scenario = upstream_model.split("--", 1)[1]
    CALLERS[caller](keyed.url, upstream_model, scenario if scenario != "cache_write" else "text", stream)
    record = last_record(keyed, "gem" if caller == "gemini" else "team")
    assert record["upstream_model"] == upstream_model
    assert record["cost_usd"] == pytest.approx(EXACT[upstream_model], abs=1e-12)
    assert record["unpriced"] is False
    assert record["key"] == ("gem" if caller == "gemini" else "team")


def test_a_fallback_is_priced_as_the_fallback(keyed: ServerThread) -> None:
    CALLERS["openai-chat"](keyed.url, "falls-back", "text", False)
    record = last_record(keyed, "team")
    assert [a["status"] for a in record["attempts"]] == [500, 200]
    assert record["upstream_model"] == "anthropic--cache_write" and record["provider"] == "up-anthropic"
    assert record["cost_usd"] == pytest.approx(
        EXACT["anthropic--cache_write"], abs=1e-12
    )  # the failed attempt cost nothing


def test_unpriced_is_counted_never_zero_and_a_key_may_refuse_it(keyed: ServerThread, fake: FakeUpstream) -> None:
    before = admin(keyed, "GET", "/admin/spend?group_by=model&key=team").json()
    CALLERS["openai-chat"](
        keyed.url, "openai-chat--tool_call", "tool_call", False
    )  # no [prices] entry, not in the database
    record = last_record(keyed, "team")
    assert record["cost_usd"] is None and record["unpriced"] is True
    after = admin(keyed, "GET", "/admin/spend?group_by=model&key=team").json()
    assert after["total"]["unpriced_requests"] == before["total"]["unpriced_requests"] + 1
    assert after["total"]["cost_usd"] == pytest.approx(before["total"]["cost_usd"], abs=1e-12)
    row = next(r for r in after["rows"] if r["group"] == "openai-chat--tool_call")
    assert row["input_tokens"] >= 50 and row["unpriced_requests"] >= 1
    hits = len(fake.received)
    with pytest.raises(openai.PermissionDeniedError) as err:
        openai_client(keyed.url, "strict").chat.completions.create(
            model="openai-chat--tool_call", messages=[{"role": "user", "content": "hi"}]
        )
    assert "no known price" in err.value.message
    assert len(fake.received) == hits, "nothing forwarded"
    # a priced model is fine for the same key
    openai_client(keyed.url, "strict").chat.completions.create(
        model="openai-chat--text", messages=[{"role": "user", "content": "hi"}]
    )


def test_spend_grouped_over_a_time_range(keyed: ServerThread) -> None:
    for _ in range(2):
        CALLERS["anthropic"](keyed.url, "anthropic--cache_write", "text", False)
    for group_by in ("key", "model", "provider", "route", "day"):
        body = admin(keyed, "GET", f"/admin/spend?group_by={group_by}").json()
        assert body["rows"] and set(body["rows"][0]) == {
            "group",
            "requests",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "cost_usd",
            "unpriced_requests",
        }
        assert sum(r["requests"] for r in body["rows"]) == body["total"]["requests"]
        assert sum(r["cost_usd"] for r in body["rows"]) == pytest.approx(body["total"]["cost_usd"], abs=1e-9)
    by_model = {r["group"]: r for r in admin(keyed, "GET", "/admin/spend?group_by=model&key=team").json()["rows"]}
    row = by_model["anthropic--cache_write"]
    assert row["cache_write_tokens"] == 5 * row["requests"] and row["cache_read_tokens"] == 10 * row["requests"]
    assert row["cost_usd"] == pytest.approx(EXACT["anthropic--cache_write"] * row["requests"], abs=1e-12)
    by_provider = {r["group"] for r in admin(keyed, "GET", "/admin/spend?group_by=provider").json()["rows"]}
    assert "up-anthropic" in by_provider
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert admin(keyed, "GET", "/admin/spend?group_by=day").json()["rows"][-1]["group"] == day
    empty = admin(keyed, "GET", "/admin/spend?from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00Z").json()
    assert empty["rows"] == [] and empty["total"]["requests"] == 0
    assert admin(keyed, "GET", "/admin/spend?group_by=colour").status_code == 400


# ---------------------------------------------------------------- refusals per dialect


def _raw_call(server: ServerThread, dialect: str, key: str, model: str) -> httpx.Response:
    body: dict[str, Any]
    if dialect == "anthropic":
        return httpx.post(
            server.url + "/v1/messages",
            headers={"x-api-key": key},
            json={"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
        )
    if dialect in ("openai-chat", "openai-responses"):
        path, body = (
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
            if dialect == "openai-chat"
            else ("/v1/responses", {"input": "hi"})
        )
        return httpx.post(server.url + path, headers={"authorization": f"Bearer {key}"}, json={"model": model, **body})
    if dialect == "gemini":
        return httpx.post(
            server.url + f"/v1beta/models/{model}:generateContent",
            headers={"x-goog-api-key": key},
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
    return httpx.post(
        server.url + "/v1beta/interactions",
        headers={"x-goog-api-key": key},
        json={"model": model, "input": "hi", "store": False},
    )


def _assert_dialect_429(dialect: str, response: httpx.Response, openai_type: str) -> None:
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1
    error = response.json()["error"]
    if dialect in ("openai-chat", "openai-responses"):
        assert error["type"] == openai_type
    elif dialect == "anthropic":
        assert response.json()["type"] == "error" and error["type"] == "rate_limit_error"
    elif dialect == "gemini":
        assert error["status"] == "RESOURCE_EXHAUSTED" and error["code"] == 429
    else:
        assert error["code"] == "resource_exhausted"


@pytest.mark.parametrize("dialect", CALLER_DIALECTS + ["gemini-interactions"])
def test_rpm_refusal_in_dialect_with_headers_and_nothing_forwarded(
    keyed: ServerThread, fake: FakeUpstream, dialect: str
) -> None:
    key = f"rpm-{dialect}"
    first = _raw_call(keyed, dialect, key, "openai-chat--text")
    assert first.status_code == 200, first.text
    hits = len(fake.received)
    refused = _raw_call(keyed, dialect, key, "openai-chat--text")
    _assert_dialect_429(dialect, refused, "requests")
    assert len(fake.received) == hits, "a refused request reached the upstream"
    if dialect.startswith("openai"):
        assert (
            first.headers["x-ratelimit-limit-requests"] == "1"
            and first.headers["x-ratelimit-remaining-requests"] == "0"
        )
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    if dialect == "anthropic":
        assert refused.headers["anthropic-ratelimit-requests-limit"] == "1"
        assert refused.headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert refused.headers["anthropic-ratelimit-requests-reset"].endswith("Z")


@pytest.mark.parametrize("dialect", CALLER_DIALECTS)
def test_tpm_refusal_in_dialect(keyed: ServerThread, fake: FakeUpstream, dialect: str) -> None:
    key = f"tpm-{dialect}"
    assert _raw_call(keyed, dialect, key, "openai-chat--text").status_code == 200  # 30 in + 12 out counted after
    hits = len(fake.received)
    refused = _raw_call(keyed, dialect, key, "openai-chat--text")
    _assert_dialect_429(dialect, refused, "tokens")
    assert len(fake.received) == hits
    if dialect.startswith("openai"):
        assert refused.headers["x-ratelimit-limit-tokens"] == "60"
    if dialect == "anthropic":
        assert refused.headers["anthropic-ratelimit-tokens-limit"] == "60"


@pytest.mark.parametrize("dialect", CALLER_DIALECTS)
def test_budget_refusal_in_dialect_after_real_spend(keyed: ServerThread, fake: FakeUpstream, dialect: str) -> None:
    key = f"budget-{dialect}"
    assert _raw_call(keyed, dialect, key, "openai-chat--text").status_code == 200
    hits = len(fake.received)
    refused = _raw_call(keyed, dialect, key, "openai-chat--text")
    _assert_dialect_429(dialect, refused, "insufficient_quota")
    assert refused.headers["x-should-retry"] == "false"
    assert len(fake.received) == hits
    if dialect.startswith("openai"):
        assert refused.json()["error"]["code"] == "insufficient_quota"
    view = admin(keyed, "GET", f"/admin/keys/{key}").json()
    assert view["spend"]["spent_usd"] == pytest.approx(EXACT["openai-responses--text"], abs=1e-12)
    assert view["spend"]["period"].startswith("month:") and view["spend"]["held_usd"] == 0


def test_sdk_sees_the_refusal_class_and_headers(keyed: ServerThread) -> None:
    with pytest.raises(anthropic.RateLimitError) as a_err:
        for _ in range(3):
            anthropic_client(keyed.url, "rpm-anthropic").messages.create(
                model="anthropic--text", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
    assert a_err.value.response.headers["anthropic-ratelimit-requests-limit"] == "1"
    with pytest.raises(openai.RateLimitError) as o_err:
        for _ in range(3):
            openai_client(keyed.url, "rpm-openai-chat").chat.completions.create(
                model="openai-chat--text", messages=[{"role": "user", "content": "hi"}]
            )
    assert o_err.value.response.headers["x-ratelimit-limit-requests"] == "1"


@pytest.mark.parametrize("dialect", CALLER_DIALECTS + ["gemini-interactions"])
def test_a_model_the_key_may_not_call_is_403_in_dialect(keyed: ServerThread, fake: FakeUpstream, dialect: str) -> None:
    hits = len(fake.received)
    response = _raw_call(keyed, dialect, "narrow", "openai-chat--text")
    assert response.status_code == 403, response.text
    assert "may not call model" in response.text
    assert len(fake.received) == hits
    assert _raw_call(keyed, dialect, "narrow", "anthropic--text").status_code == 200


def test_token_counting_keeps_to_the_key_models(keyed: ServerThread) -> None:
    client = anthropic_client(keyed.url, "narrow")
    assert (
        client.messages.count_tokens(model="anthropic--text", messages=[{"role": "user", "content": "hi"}]).input_tokens
        > 0
    )
    with pytest.raises(anthropic.PermissionDeniedError):
        client.messages.count_tokens(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])


def test_max_parallel_refuses_while_one_is_in_flight(keyed: ServerThread, fake: FakeUpstream) -> None:
    client = openai_client(keyed.url, "one-at-a-time")
    started = threading.Event()
    done: list[str] = []

    def slow() -> None:
        stream = client.chat.completions.create(
            model="openai-chat--slow_stream", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        for _ in stream:
            started.set()
        done.append("ok")

    t = threading.Thread(target=slow)
    t.start()
    assert started.wait(10)
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
    assert "in flight" in err.value.message
    t.join(20)
    assert done == ["ok"]
    deadline = time.time() + 5
    while True:  # the settlement of the stream lands a moment after its last byte
        try:
            client.chat.completions.create(model="openai-chat--text", messages=[{"role": "user", "content": "hi"}])
            break
        except openai.RateLimitError:
            assert time.time() < deadline
            time.sleep(0.05)


# ---------------------------------------------------------------- admin API, metrics


def test_admin_keys_lifecycle(keyed: ServerThread) -> None:
    assert httpx.get(keyed.url + "/admin/keys").status_code == 401
    assert httpx.get(keyed.url + "/admin/keys", headers={"authorization": "Bearer wrong"}).status_code == 401
    created = admin(
        keyed, "POST", "/admin/keys", json={"name": "made", "budget_usd": 5, "budget_period": "day", "rpm": 100}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    secret = body["key"]
    assert (
        body["name"] == "made" and body["rpm"] == 100 and body["budget_period"] == "day" and body["source"] == "admin"
    )
    assert admin(keyed, "POST", "/admin/keys", json={"name": "made"}).status_code == 409
    listing = admin(keyed, "GET", "/admin/keys").text
    assert secret not in listing and sha(secret) not in listing and "sha256" not in listing
    assert '"made"' in listing and '"team"' in listing
    answer = openai_client(keyed.url, secret).chat.completions.create(
        model="openai-chat--text", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content
    assert last_record(keyed, "made")["cost_usd"] == pytest.approx(EXACT["openai-responses--text"], abs=1e-12)
    patched = admin(keyed, "PATCH", "/admin/keys/made", json={"rpm": None, "models": ["anthropic--*"]})
    assert patched.status_code == 200 and patched.json()["rpm"] is None and patched.json()["models"] == ["anthropic--*"]
    assert patched.json()["spend"]["spent_usd"] == pytest.approx(EXACT["openai-responses--text"], abs=1e-12)
    with pytest.raises(openai.PermissionDeniedError):
        openai_client(keyed.url, secret).chat.completions.create(
            model="openai-chat--text", messages=[{"role": "user", "content": "hi"}]
        )
    assert admin(keyed, "PATCH", "/admin/keys/made", json={"rpm": -1}).status_code == 400
    assert admin(keyed, "PATCH", "/admin/keys/made", json={"colour": 1}).status_code == 400
    assert admin(keyed, "PATCH", "/admin/keys/nobody", json={"rpm": 1}).status_code == 404
    assert admin(keyed, "DELETE", "/admin/keys/made").json() == {"name": "made", "revoked": True}
    with pytest.raises(openai.AuthenticationError) as err:
        openai_client(keyed.url, secret).chat.completions.create(
            model="anthropic--text", messages=[{"role": "user", "content": "hi"}]
        )
    assert "revoked" in err.value.message
    assert admin(keyed, "GET", "/admin/keys/made").json()["revoked"] is True


def test_requests_listing_and_metrics(keyed: ServerThread) -> None:
    CALLERS["openai-chat"](keyed.url, "openai-chat--thinking", "thinking", True)
    records = admin(keyed, "GET", "/admin/requests?limit=3").json()["requests"]
    assert len(records) == 3 and records[0]["upstream_model"] == "openai-chat--thinking"
    assert {"request_id", "key", "cost_usd", "status", "input_tokens", "reasoning_tokens", "duration_ms", "ts"} <= set(
        records[0]
    )
    assert admin(keyed, "GET", "/admin/requests?limit=0").status_code == 400
    metrics = httpx.get(keyed.url + "/metrics").text
    assert 'gateway_cost_usd_total{key="team",model="openai-chat--thinking",provider="up-openai-chat"}' in metrics
    assert 'gateway_refusals_total{key="rpm-anthropic",reason="rpm"}' in metrics
    assert 'gateway_budget_remaining_usd{key="budget-anthropic"}' in metrics


def test_unknown_key_is_401_and_plain_keys_still_work(fake: FakeUpstream, tmp_path: Path) -> None:
    config = keyed_config(fake.port, tmp_path / "g.db", [{"name": "team", "key_sha256": sha("sk-named")}])
    config["auth"] = {"keys_env": "", "keys": ["sk-plain"]}
    with ServerThread(create_app(Settings(**config))) as server:
        for key, status in (("sk-named", 200), ("sk-plain", 200), ("sk-wrong", 401)):
            assert _raw_call(server, "openai-chat", key, "openai-chat--text").status_code == status
        assert (
            httpx.post(
                server.url + "/v1/chat/completions", json={"model": "openai-chat--text", "messages": []}
            ).status_code
            == 401
        )
        records = admin(server, "GET", "/admin/requests?limit=4").json()["requests"]
        assert [(r["key"], r["status"]) for r in records] == [
            (None, 401),
            (None, 401),
            (None, 200),
            ("team", 200),
        ]  # a plain key has no name


def test_spend_survives_a_restart(fake: FakeUpstream, tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    keys = [{"name": "team", "key_sha256": sha("sk-caller"), "budget_usd": 10.0}]
    with ServerThread(create_app(Settings(**keyed_config(fake.port, db, keys)))) as server:
        CALLERS["anthropic"](server.url, "anthropic--cache_write", "text", False)
        created = admin(server, "POST", "/admin/keys", json={"name": "later"}).json()["key"]
        admin(server, "GET", "/admin/spend")  # flushes this process's settlements
    with ServerThread(create_app(Settings(**keyed_config(fake.port, db, keys)))) as server:
        view = admin(server, "GET", "/admin/keys/team").json()
        assert view["spend"]["spent_usd"] == pytest.approx(EXACT["anthropic--cache_write"], abs=1e-12)
        assert view["spend"]["remaining_usd"] == pytest.approx(10.0 - EXACT["anthropic--cache_write"], abs=1e-12)
        assert admin(server, "GET", "/admin/spend").json()["total"]["requests"] == 1
        assert _raw_call(server, "openai-chat", created, "openai-chat--text").status_code == 200


# ---------------------------------------------------------------- stateful generations


def test_a_stored_response_is_counted_once_and_its_reads_not_at_all(keyed: ServerThread) -> None:
    client = openai_client(keyed.url)
    before = admin(keyed, "GET", "/admin/spend?key=team").json()["total"]
    response = client.responses.create(model="openai-responses--text", input="hi", store=True)
    client.responses.retrieve(response.id)
    after = admin(keyed, "GET", "/admin/spend?key=team").json()["total"]
    assert after["requests"] == before["requests"] + 1
    assert after["cost_usd"] == pytest.approx(before["cost_usd"] + EXACT["openai-responses--text"], abs=1e-12)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_stored_interaction_is_counted_once(keyed: ServerThread, stream: bool) -> None:
    from tests.relay.test_stateful import interactions

    before = admin(keyed, "GET", "/admin/spend?key=gem").json()["total"]
    client = interactions(keyed.url)
    if stream:
        events = list(client.interactions.create(model="openai-chat--text", input="hi", stream=True))
        iid = events[0].interaction.id
        list(client.interactions.get(iid, stream=True))  # a replay is not a new generation
    else:
        iid = client.interactions.create(model="openai-chat--text", input="hi").id
    client.interactions.get(iid)
    after = admin(keyed, "GET", "/admin/spend?key=gem").json()["total"]
    assert after["requests"] == before["requests"] + 1
    assert after["cost_usd"] == pytest.approx(before["cost_usd"] + EXACT["openai-responses--text"], abs=1e-12)
    assert after["unpriced_requests"] == before["unpriced_requests"]
