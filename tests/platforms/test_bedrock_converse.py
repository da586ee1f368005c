"""The bedrock-converse dialect on the Bedrock platform, end to end, with the official SDKs as callers.

The codec's own tests (tests/dialects/bedrock_converse/) feed it SSE-framed events; here the
same fixtures come as Bedrock sends them — eventstream messages from the loopback double
(``ConverseReplay``), or for ``/converse`` the one JSON reply the same frames add up to — and the
double verifies every SigV4 signature, so codec, framer and signer are checked together. Each
caller dialect × {text, tool call, thinking, cache usage, a mid-stream exception, throttling
before the first byte} × {stream, whole}: what the application reads through its own SDK.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
from google.genai import _interactions_errors as interactions_errors

pytest.importorskip("botocore")

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.support.bedrock_double import ACCESS_KEY, API_KEY, SECRET_KEY, SESSION_TOKEN, BedrockDouble, ConverseReplay
from tests.support.callers import (
    CALLERS,
    ERRORS,
    USER,
    InteractionStreamError,
    Outcome,
    anthropic_client,
    error_status,
    gemini_client,
    openai_client,
)
from tests.support.fake_upstream import ServerThread
from tests.test_matrix import STOPS, check_usage

FIXTURES = Path(__file__).resolve().parents[1] / "dialects" / "bedrock_converse" / "fixtures"
CALLER_DIALECTS = list(CALLERS)
MODES = {"stream": True, "whole": False}
SECRETS = [SECRET_KEY, SESSION_TOKEN, API_KEY]
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5"
THOUGHT = "The user asks for 925 / 5. 5 * 185 = 925."
SIGNATURE = "EqoBCkgIBxABGAIiQLqU5ddj0uDGmWwYrMnq8e9mM3A6bkJ1xq0gm5dH0Rr1"

# fixture -> what every caller must read from it. ``ask``: the callers' scenario (their request:
# tools for a tool call, reasoning asked for thinking); ``usage``: the canonical usage
# (input counts the cache reads and writes, as gateway/dialects/bedrock_converse/usage.py says).
ANSWERS: dict[str, dict[str, Any]] = {
    "text": {
        "upstream": "meta.llama3-3-70b-instruct-v1:0",
        "ask": "text",
        "text": "Hello! 你好 — text",
        "stop": "stop",
        "usage": {"input": 14, "output": 9, "read": None, "write": None},
    },
    "tool_call": {
        "upstream": "mistral.mistral-large-2407-v1:0",
        "ask": "tool_call",
        "text": "Let me check the weather.",
        "stop": "tool_use",
        "tools": [("type", {"city": "Paris", "unit": "celsius"}), ("text", {})],
        "usage": {"input": 412, "output": 61, "read": None, "write": None},
    },
    "reasoning": {
        "upstream": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "ask": "thinking",
        "text": "925 ÷ 5 = 185",
        "stop": "stop",
        "thinking": THOUGHT,
        "usage": {"input": 48, "output": 96, "read": 0, "write": 0},
    },
    "cache_usage": {
        "upstream": "global.anthropic.claude-haiku-4-5-20251001-v1:0",
        "ask": "text",
        "text": "Cached",
        "stop": "stop",
        "anthropic_stop": "stop_sequence",
        "usage": {"input": 19842, "output": 2, "read": 1200, "write": 18639},
    },
}
FAILED = {"exception_mid_stream": "deepseek.r1-v1:0", "throttled": "amazon.nova-pro-v1:0"}
# the SDK's own error types (not the shared ERRORS' catch-all ``Exception`` for Interactions): a
# driver that broke on a half answer must not pass as "the caller saw an error"
SDK_ERRORS: dict[str, tuple[type[BaseException], ...]] = {
    **ERRORS,
    "gemini-interactions": (InteractionStreamError, interactions_errors.APIStatusError),
}


def route_model(scenario: str) -> str:
    return f"converse--{scenario}"


def upstream_model(scenario: str) -> str:
    return f"{ANSWERS[scenario]['upstream'] if scenario in ANSWERS else FAILED[scenario]}--{scenario}"


def wire_path(model: str, stream: bool) -> str:
    return f"/model/{quote(model, safe='')}/{'converse-stream' if stream else 'converse'}"


def streamed(caller: str, mode: str) -> bool:
    """Whether the gateway asks ConverseStream: a stored Interactions run is generated as a stream
    even for a whole caller."""
    return MODES[mode] or caller == "gemini-interactions"


def want_usage(caller: str, usage: dict[str, Any]) -> dict[str, Any]:
    inp, out, read, write = usage["input"], usage["output"], usage["read"], usage["write"]
    if caller == "anthropic":  # Anthropic's input_tokens leaves both cache counts out
        return {
            "input_tokens": inp - (read or 0) - (write or 0),
            "output_tokens": out,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }
    if caller == "openai-chat":
        return {"prompt_tokens": inp, "completion_tokens": out, "cached_tokens": read}
    if caller == "openai-responses":
        return {"input_tokens": inp, "output_tokens": out, "cached_tokens": read}
    if caller == "gemini":
        return {"prompt_token_count": inp, "candidates_token_count": out, "cached_content_token_count": read}
    return {"total_input_tokens": inp, "total_output_tokens": out, "total_cached_tokens": read}


def check_answer(caller: str, scenario: str, out: Outcome) -> None:
    want = ANSWERS[scenario]
    assert out.text == want["text"]
    assert out.tools == want.get("tools", [])
    assert out.thinking == want.get("thinking", "")
    stop = want.get(f"{caller}_stop") or STOPS[caller][want["stop"]]
    assert out.stop == stop
    assert out.model == route_model(scenario)
    check_usage(caller, out.usage, want_usage(caller, want["usage"]))
    assert all(out.tool_ids), "every tool call has an id"


def provider(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "dialect": "bedrock-converse",
        "platform": "bedrock",
        "region": "us-east-1",
        "endpoint_url": url,
        "max_retries": 1,
        "retry_backoff": 0.01,
        "first_byte_timeout": 5.0,
        "idle_timeout": 3.0,
        "connect_timeout": 2.0,
        **extra,
    }


@pytest.fixture(scope="module")
def replay() -> ConverseReplay:
    if not FIXTURES.exists():
        pytest.skip("the bedrock-converse fixtures are not in this checkout")
    return ConverseReplay(FIXTURES)


@pytest.fixture(scope="module")
def double(aws_env: None, replay: ConverseReplay) -> Iterator[BedrockDouble]:
    upstream = BedrockDouble(converse_handler=replay)
    with ServerThread(upstream) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture(scope="module")
def gateway(double: BedrockDouble) -> Iterator[ServerThread]:
    routes = [
        {"model": route_model(s), "provider": "converse", "upstream_model": upstream_model(s)}
        for s in [*ANSWERS, *FAILED]
    ]
    for caller in CALLER_DIALECTS:
        for mode in MODES:
            for once in ("throttle_once", "frame_throttle_once"):
                routes.append(
                    {
                        "model": f"{once}-{caller}-{mode}",
                        "provider": "converse",
                        "upstream_model": f"meta.llama3-3-70b-instruct-v1:0--{caller}-{mode}--{once}",
                    }
                )
    routes += [
        {"model": "converse-arn", "provider": "converse", "upstream_model": f"{ARN}--text"},
        {
            "model": "converse-whole-reply",
            "provider": "converse",
            "upstream_model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0--whole.tool_call",
        },
    ]
    config: dict[str, Any] = {
        "server": {"keepalive_seconds": 0.5},
        "auth": {"keys_env": ""},
        "store": {"url": "sqlite://:memory:"},
        "providers": [provider("converse", double.url)],  # type: ignore[attr-defined]
        "routes": routes,
    }
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
        yield server


@pytest.fixture(autouse=True)
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log line of the gateway (and botocore) at DEBUG: no secret may be in any."""
    caplog.set_level(logging.DEBUG)
    yield caplog
    for secret in SECRETS:
        assert secret not in caplog.text


# --------------------------------------------------------------------------- answers


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", ANSWERS)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_answers(gateway: ServerThread, double: BedrockDouble, caller: str, scenario: str, mode: str) -> None:
    out = CALLERS[caller](gateway.url, route_model(scenario), ANSWERS[scenario]["ask"], MODES[mode])
    check_answer(caller, scenario, out)
    seen = double.seen[-1]
    assert seen.auth == "sigv4"
    assert seen.path == wire_path(upstream_model(scenario), streamed(caller, mode))
    assert seen.model == upstream_model(scenario)
    assert "model" not in seen.body and "stream" not in seen.body
    assert seen.body["messages"][0] == {"role": "user", "content": [{"text": USER}]}
    signed = seen.headers["authorization"].split("SignedHeaders=", 1)[1].split(",", 1)[0]
    assert signed == "content-type;host;x-amz-date;x-amz-security-token"
    if scenario == "tool_call":
        assert [t["toolSpec"]["name"] for t in seen.body["toolConfig"]["tools"]] == ["get_weather"]
    if scenario == "reasoning":  # Claude behind Converse: its thinking field
        assert seen.body["additionalModelRequestFields"]["thinking"]["type"] in ("enabled", "adaptive")


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_an_exception_mid_stream_is_the_callers_error_never_an_ending(
    gateway: ServerThread, double: BedrockDouble, caller: str, mode: str
) -> None:
    with pytest.raises(SDK_ERRORS[caller]) as info:
        CALLERS[caller](gateway.url, route_model("exception_mid_stream"), "text", MODES[mode])
    assert double.seen[-1].path == wire_path(upstream_model("exception_mid_stream"), streamed(caller, mode))
    assert "Model stream error: the model returned an invalid response." in str(info.value)
    if not MODES[mode]:  # a whole answer: Bedrock's 424 ModelErrorException, the gateway's 502
        assert error_status(info.value) == 502


def test_the_mid_stream_exception_reaches_an_anthropic_caller_as_an_error_event(gateway: ServerThread) -> None:
    body = {
        "model": route_model("exception_mid_stream"),
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.stream("POST", gateway.url + "/v1/messages", json=body, headers={"x-api-key": "k"}, timeout=20) as r:
        text = r.read().decode()
    assert r.status_code == 200
    assert "event: error" in text and "Model stream error: the model returned an invalid response." in text
    assert "message_stop" not in text and "message_delta" not in text


def test_the_mid_stream_exception_reaches_a_chat_caller_without_a_finish_reason(gateway: ServerThread) -> None:
    body = {
        "model": route_model("exception_mid_stream"),
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.stream(
        "POST", gateway.url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}, timeout=20
    ) as r:
        text = r.read().decode()
    assert "The answer" in text and '"code":"bad_gateway"' in text
    assert '"finish_reason":"' not in text and "[DONE]" not in text  # nothing a client reads as an ending


def test_the_mid_stream_exception_reaches_a_responses_caller_as_a_failed_response(gateway: ServerThread) -> None:
    body = {"model": route_model("exception_mid_stream"), "stream": True, "input": "hi"}
    with httpx.stream(
        "POST", gateway.url + "/v1/responses", json=body, headers={"authorization": "Bearer k"}, timeout=20
    ) as r:
        text = r.read().decode()
    assert "event: response.failed" in text and "Model stream error: the model returned an invalid response." in text
    assert "response.completed" not in text and "response.incomplete" not in text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_throttled_before_the_first_byte_is_retried_once(
    gateway: ServerThread, replay: ConverseReplay, caller: str, mode: str
) -> None:
    # an HTTP 429; on a stream also a throttlingException message after the 200, before any content
    for once in ("throttle_once", "frame_throttle_once") if streamed(caller, mode) else ("throttle_once",):
        out = CALLERS[caller](gateway.url, f"{once}-{caller}-{mode}", "text", MODES[mode])
        want = {**ANSWERS["text"], "usage": ANSWERS["text"]["usage"]}
        assert out.text == want["text"] and out.stop == STOPS[caller]["stop"] and out.model == f"{once}-{caller}-{mode}"
        check_usage(caller, out.usage, want_usage(caller, want["usage"]))
        assert replay.hits[f"meta.llama3-3-70b-instruct-v1:0--{caller}-{mode}--{once}"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_always_throttled_is_a_429_in_the_callers_dialect(
    gateway: ServerThread, replay: ConverseReplay, caller: str, mode: str
) -> None:
    model = upstream_model("throttled")
    before = replay.hits.get(model, 0)
    with pytest.raises(SDK_ERRORS[caller]) as info:
        CALLERS[caller](gateway.url, route_model("throttled"), "text", MODES[mode])
    assert error_status(info.value) == 429  # an HTTP 429, before any byte of a stream
    assert "Too many requests, please wait before trying again." in str(info.value)
    assert replay.hits[model] - before == 2  # max_retries = 1: tried twice, then the caller's 429


GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
RAW_CALLS: dict[
    str, tuple[str, dict[str, Any], dict[str, str], tuple[str, str]]
] = {  # path, body, headers, the error's dialect-own marker
    "anthropic-stream": (
        "/v1/messages",
        {"stream": True, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": "k"},
        ("type", "rate_limit_error"),
    ),
    "anthropic-whole": (
        "/v1/messages",
        {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": "k"},
        ("type", "rate_limit_error"),
    ),
    "openai-chat-stream": (
        "/v1/chat/completions",
        {"stream": True, "messages": [{"role": "user", "content": "hi"}]},
        {"authorization": "Bearer k"},
        ("code", "rate_limit_exceeded"),
    ),
    "openai-chat-whole": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}]},
        {"authorization": "Bearer k"},
        ("code", "rate_limit_exceeded"),
    ),
    "openai-responses-stream": (
        "/v1/responses",
        {"stream": True, "input": "hi"},
        {"authorization": "Bearer k"},
        ("code", "rate_limit_exceeded"),
    ),
    "openai-responses-whole": (
        "/v1/responses",
        {"input": "hi"},
        {"authorization": "Bearer k"},
        ("code", "rate_limit_exceeded"),
    ),
    "gemini-stream": (
        "/v1beta/models/converse--throttled:streamGenerateContent?alt=sse",
        GEMINI_BODY,
        {"x-goog-api-key": "k"},
        ("status", "RESOURCE_EXHAUSTED"),
    ),
    "gemini-whole": (
        "/v1beta/models/converse--throttled:generateContent",
        GEMINI_BODY,
        {"x-goog-api-key": "k"},
        ("status", "RESOURCE_EXHAUSTED"),
    ),
}


@pytest.mark.parametrize("call", RAW_CALLS)
def test_always_throttled_is_nothing_but_the_429(gateway: ServerThread, call: str) -> None:
    path, body, headers, (field, value) = RAW_CALLS[call]
    r = httpx.post(gateway.url + path, json={"model": route_model("throttled"), **body}, headers=headers, timeout=20)
    assert r.status_code == 429
    assert r.headers["content-type"].startswith("application/json")  # no event stream begun
    assert r.json()["error"][field] == value
    assert r.json()["error"]["message"].endswith("Too many requests, please wait before trying again.")


# --------------------------------------------------------------------------- reasoning round trip


def second_turn(caller: str, url: str, out: Outcome) -> None:
    """The caller's next turn, its history holding the thinking it was handed (signature included)."""
    model, later = route_model("reasoning"), "And 930 / 5?"
    signature = out.signatures[0]
    if caller == "anthropic":
        anthropic_client(url).messages.create(
            model=model,
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 2048},
            messages=[
                {"role": "user", "content": USER},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": out.thinking, "signature": signature},
                        {"type": "text", "text": out.text},
                    ],
                },
                {"role": "user", "content": later},
            ],
        )
    elif caller == "openai-responses":
        openai_client(url).responses.create(
            model=model,
            reasoning={"effort": "low"},
            max_output_tokens=4096,
            input=[
                {"role": "user", "content": USER},
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": out.thinking}],
                    "encrypted_content": signature,
                },
                {"role": "assistant", "content": out.text},
                {"role": "user", "content": later},
            ],
        )
    elif caller == "gemini":
        from google.genai import types as gtypes

        held: Any = signature  # the bytes google-genai decoded the thoughtSignature into
        thought = gtypes.Part(text=out.thinking, thought=True, thought_signature=held)
        client = gemini_client(url)  # (kept: a collected client closes its connection)
        client.models.generate_content(
            model=model,
            contents=[
                gtypes.Content(role="user", parts=[gtypes.Part(text=USER)]),
                gtypes.Content(role="model", parts=[thought, gtypes.Part(text=out.text)]),
                gtypes.Content(role="user", parts=[gtypes.Part(text=later)]),
            ],
            config=gtypes.GenerateContentConfig(
                max_output_tokens=4096,
                thinking_config=gtypes.ThinkingConfig(include_thoughts=True, thinking_budget=2048),
            ),
        )
    else:
        client = gemini_client(url)
        client.interactions.create(
            model=model,
            store=False,
            generation_config={"max_output_tokens": 4096, "thinking_level": "low"},
            input=[
                {"type": "user_input", "content": [{"type": "text", "text": USER}]},
                {"type": "thought", "signature": signature, "summary": [{"type": "text", "text": out.thinking}]},
                {"type": "model_output", "content": [{"type": "text", "text": out.text}]},
                {"type": "user_input", "content": [{"type": "text", "text": later}]},
            ],
        )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", ["anthropic", "openai-responses", "gemini", "gemini-interactions"])
def test_the_reasoning_signature_round_trips_on_the_next_turn(
    gateway: ServerThread, double: BedrockDouble, caller: str, mode: str
) -> None:
    out = CALLERS[caller](gateway.url, route_model("reasoning"), "thinking", MODES[mode])
    assert out.thinking == THOUGHT and out.signatures, "the caller holds a signature"
    second_turn(caller, gateway.url, out)
    seen = double.seen[-1]
    assert seen.auth == "sigv4"
    assistant = seen.body["messages"][1]
    assert assistant["role"] == "assistant"
    reasoning = assistant["content"][0]["reasoningContent"]["reasoningText"]  # reasoning leads the turn
    assert reasoning["signature"] == SIGNATURE
    assert reasoning["text"] in (THOUGHT, "")
    assert {"text": "925 ÷ 5 = 185"} in assistant["content"]
    assert seen.body["additionalModelRequestFields"]["thinking"]["type"] in ("enabled", "adaptive")


def test_a_chat_callers_signature_rides_on_its_tool_call_id_back_to_converse(
    gateway: ServerThread, double: BedrockDouble
) -> None:
    """Chat has no field for a signature: it rides on the tool call id (whole.tool_call.json: reasoning, text, a call)."""
    client = openai_client(gateway.url)
    tools: Any = [
        {
            "type": "function",
            "function": {"name": "type", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        }
    ]
    first = client.chat.completions.create(
        model="converse-whole-reply",
        messages=[{"role": "user", "content": USER}],
        tools=tools,
        reasoning_effort="low",
        max_completion_tokens=4096,
    )
    message = first.choices[0].message
    assert message.content == "Checking." and first.choices[0].finish_reason == "tool_calls"
    call: Any = (message.tool_calls or [])[0]
    assert "~" in call.id  # the packed signature
    assert call.function.name == "type" and orjson.loads(call.function.arguments) == {"city": "Paris"}
    history: Any = [
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [
                {"id": call.id, "type": "function", "function": {"name": "type", "arguments": call.function.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    client.chat.completions.create(
        model="converse-whole-reply", tools=tools, reasoning_effort="low", max_completion_tokens=4096, messages=history
    )
    assistant = double.seen[-1].body["messages"][1]
    assert assistant["content"][0]["reasoningContent"]["reasoningText"]["signature"] == "EqoBCkgIBxABGAIiQFx"
    assert assistant["content"][-1]["toolUse"]["toolUseId"] == "tooluse_2Hk3"
    assert double.seen[-1].body["messages"][2]["content"][0]["toolResult"]["toolUseId"] == "tooluse_2Hk3"


# --------------------------------------------------------------------------- the model id in the path, and SigV4 over it


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("model", "upstream"), [(route_model("text"), upstream_model("text")), ("converse-arn", f"{ARN}--text")]
)
def test_a_model_id_with_colons_or_an_arn_is_one_encoded_segment_and_signs(
    gateway: ServerThread, double: BedrockDouble, model: str, upstream: str, stream: bool
) -> None:
    out = CALLERS["openai-chat"](gateway.url, model, "text", stream)
    assert out.text == "Hello! 你好 — text"
    seen = double.seen[-1]
    segment = seen.path.split("/")[2]
    assert ":" not in segment and "/" not in segment and "%3A" in segment
    if upstream.startswith("arn:"):
        assert (
            segment
            == "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4e5--text"
        )
    assert seen.model == upstream and seen.auth == "sigv4"


def _hand_signed(url: str, path: str, body: bytes, canonical_uri: str) -> dict[str, str]:
    """SigV4 headers computed by hand (not botocore) over ``canonical_uri``."""
    now = datetime.datetime.now(datetime.UTC)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = httpx.URL(url).netloc.decode()
    headers = {
        "content-type": "application/json",
        "host": host,
        "x-amz-date": amz_date,
        "x-amz-security-token": SESSION_TOKEN,
    }
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [
            "POST",
            canonical_uri,
            "",
            *(f"{k}:{headers[k]}" for k in sorted(headers)),
            "",
            signed,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{day}/us-east-1/bedrock/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRET_KEY).encode()
    for part in (day, "us-east-1", "bedrock", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    del headers["host"]
    return {
        **headers,
        "authorization": f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, SignedHeaders={signed}, Signature={signature}",
    }


@pytest.mark.parametrize("model", ["meta.llama3-3-70b-instruct-v1:0--text", f"{ARN}--text"])
def test_the_double_checks_the_canonical_uri_as_aws_does(double: BedrockDouble, model: str) -> None:
    """Real AWS (every service but S3) signs the path percent-encoded once more: ``%3A`` is ``%253A``
    in the canonical URI. The double takes exactly that and refuses the singly-encoded signature, so
    a gateway that signed the path it sends as it is would fail every test above."""
    url = double.url  # type: ignore[attr-defined]
    path = wire_path(model, False)
    body = orjson.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    assert "%3A" in path
    twice = httpx.post(
        url + path, content=body, headers=_hand_signed(url, path, body, quote(path, safe="/~")), timeout=10
    )
    assert twice.status_code == 200, twice.text
    once = httpx.post(url + path, content=body, headers=_hand_signed(url, path, body, path), timeout=10)
    assert once.status_code == 403 and once.headers["x-amzn-errortype"].startswith("InvalidSignatureException")
    assert double.seen[-1].auth.startswith("refused:")


def test_whole_reply_blocks_the_ir_cannot_carry_are_skipped(gateway: ServerThread) -> None:
    """whole.tool_call.json as it is: reasoning, text, a tool call and a citations block, cache reads in usage."""
    message = anthropic_client(gateway.url).messages.create(
        model="converse-whole-reply",
        max_tokens=4096,
        messages=[{"role": "user", "content": USER}],
        tools=[{"name": "type", "input_schema": {"type": "object"}}],
    )
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"] and message.stop_reason == "tool_use"
    assert message.content[2].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens, message.usage.output_tokens) == (
        20,
        100,
        30,
    )


def test_no_secret_in_any_answer(gateway: ServerThread) -> None:
    for model in (route_model("text"), route_model("throttled"), route_model("exception_mid_stream")):
        for stream in (True, False):
            r = httpx.post(
                gateway.url + "/v1/messages",
                json={
                    "model": model,
                    "max_tokens": 64,
                    "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}],
                },
                headers={"x-api-key": "k"},
                timeout=20,
            )
            for secret in SECRETS:
                assert secret not in r.text + str(r.headers)


def test_the_folded_whole_reply_matches_the_stream_fixture() -> None:
    """The double's ``/converse`` reply is the stream fixture folded: the same text, calls, usage."""
    from tests.support.bedrock_double import fold_converse

    status, reply, _ = fold_converse(orjson.loads((FIXTURES / "tool_call.json").read_bytes())["frames"])
    assert status == 200 and reply["stopReason"] == "tool_use" and reply["usage"]["inputTokens"] == 412
    assert reply["output"]["message"]["content"] == [
        {"text": "Let me check the weather."},
        {
            "toolUse": {
                "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                "name": "type",
                "input": {"city": "Paris", "unit": "celsius"},
            }
        },
        {"toolUse": {"toolUseId": "tooluse_Q0pv2uDkQeW3XTx8yq1hRg", "name": "text", "input": {}}},
    ]
    status, reply, error_type = fold_converse(
        orjson.loads((FIXTURES / "exception_mid_stream.json").read_bytes())["frames"]
    )
    assert (status, error_type) == (424, "ModelErrorException")
    reasoning = fold_converse(orjson.loads((FIXTURES / "reasoning.json").read_bytes())["frames"])[1]["output"][
        "message"
    ]["content"]
    assert reasoning[0] == {"reasoningContent": {"reasoningText": {"text": THOUGHT, "signature": SIGNATURE}}}
    assert base64.b64decode(reasoning[1]["reasoningContent"]["redactedContent"])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_anthropic_callers_whole_assistant_turn_goes_back_as_it_came(
    gateway: ServerThread, double: BedrockDouble, stream: bool
) -> None:
    """The SDK's usual loop — append ``message.content`` as the assistant turn — returns the signed
    thinking and the redacted block to Converse as Converse made them, in order."""
    client = anthropic_client(gateway.url)
    kwargs: Any = {
        "model": route_model("reasoning"),
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }
    if stream:
        with client.messages.stream(messages=[{"role": "user", "content": USER}], **kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(messages=[{"role": "user", "content": USER}], **kwargs)
    assert [b.type for b in message.content] == ["thinking", "redacted_thinking", "text"]
    history: Any = [
        {"role": "user", "content": USER},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
        {"role": "user", "content": "And 930 / 5?"},
    ]
    client.messages.create(messages=history, **kwargs)
    assert double.seen[-1].body["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": THOUGHT, "signature": SIGNATURE}}},
        {"reasoningContent": {"redactedContent": "RXFvQkNrZ0lCeEFCR0FJaVFMcVU1ZGRq"}},
        {"text": "925 ÷ 5 = 185"},
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_the_matched_stop_sequence_reaches_an_anthropic_caller(gateway: ServerThread, stream: bool) -> None:
    """cache_usage.json ends on ``stop_sequence`` with ``additionalModelResponseFields.stop_sequence = "END"``."""
    client = anthropic_client(gateway.url)
    kwargs: Any = {
        "model": route_model("cache_usage"),
        "max_tokens": 64,
        "stop_sequences": ["END"],
        "messages": [{"role": "user", "content": USER}],
    }
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")
