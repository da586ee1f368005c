"""Usage in every stream (issue 23): ``stream_usage = "always"`` for OpenAI chat callers, server-wide
and per route, on the same-dialect fast path and across dialects; and the other four dialects'
streams carry usage for every upstream, with the numbers the access log records.

The official ``openai`` SDK reads the chat streams: plain iteration of ``create(stream=True)``
without ``stream_options`` (as a client that cannot be changed sends it), and
``chat.completions.stream()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import UPSTREAM_DIALECTS, gateway_config
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread

MESSAGES = [{"role": "user", "content": "hi"}]
CHAT_UPSTREAMS = UPSTREAM_DIALECTS  # openai-chat: the fast path; the others translated


def _config(fake: FakeUpstream, server_usage: str, route_prefix: str, route_usage: str) -> dict[str, Any]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}", access_log=True, stream_usage=server_usage)
    # routes named "<prefix>-<dialect>--<scenario>" carry their own stream_usage
    config["routes"] = [
        {"model": f"{route_prefix}-{d}--*", "provider": f"up-{d}", "stream_usage": route_usage}
        for d in UPSTREAM_DIALECTS
    ] + config["routes"]
    return config


@pytest.fixture(scope="module")
def gateways(fake: FakeUpstream) -> Iterator[tuple[dict[str, ServerThread], Capture]]:
    """ "asked": the server default (with "always-…" routes); "always": server-wide (with "asked-…" routes)."""
    with capture_access_log() as capture:
        asked = create_app(Settings(**_config(fake, "asked", "always", "always")))
        always = create_app(Settings(**_config(fake, "always", "asked", "asked")))
        with ServerThread(asked) as a, ServerThread(always) as b:
            yield {"asked": a, "always": b}, capture


# (which gateway, model prefix, whether the stream must end with usage)
MODES = {
    "off": ("asked", "", False),
    "server": ("always", "", True),
    "route": ("asked", "always-", True),
    "route_off_on_server_on": ("always", "asked-", False),
}


def _log_usage(line: dict[str, Any]) -> dict[str, Any]:
    prompt, completion = line["input_tokens"], line["output_tokens"]
    assert prompt and completion, f"the access log recorded no usage: {line}"
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cached_tokens": line["cache_read_tokens"] or 0,
        "reasoning_tokens": line["reasoning_tokens"] or 0,
    }


def _chunk_usage(usage: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.prompt_tokens_details.cached_tokens,
        "reasoning_tokens": usage.completion_tokens_details.reasoning_tokens,
    }


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("upstream", CHAT_UPSTREAMS)
def test_chat_stream_without_include_usage(gateways: Any, upstream: str, mode: str) -> None:
    servers, capture = gateways
    which, prefix, ends_with_usage = MODES[mode]
    rid = "req_test_" + uuid.uuid4().hex
    client = openai_client(servers[which].url)
    chunks = list(
        client.chat.completions.create(
            model=f"{prefix}{upstream}--text", messages=MESSAGES, stream=True, extra_headers={"x-request-id": rid}
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from the gateway. 你好 — ok!"
    line = capture.line(rid)
    if not ends_with_usage:
        assert all(c.choices and c.usage is None for c in chunks), "usage was not asked for"
        assert chunks[-1].choices[0].finish_reason == "stop"
        return
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None, "the stream ends with the usage chunk"
    assert sum(1 for c in chunks if not c.choices) == 1, "exactly one usage chunk"
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert _chunk_usage(last.usage) == _log_usage(line), "the same numbers as the access log"


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("upstream", CHAT_UPSTREAMS)
def test_chat_stream_helper(gateways: Any, upstream: str, mode: str) -> None:
    servers, capture = gateways
    which, prefix, ends_with_usage = MODES[mode]
    rid = "req_test_" + uuid.uuid4().hex
    client = openai_client(servers[which].url)
    with client.chat.completions.stream(
        model=f"{prefix}{upstream}--text", messages=MESSAGES, extra_headers={"x-request-id": rid}
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "content.done" in kinds
    assert final.choices[0].message.content == "Hello from the gateway. 你好 — ok!"
    line = capture.line(rid)
    if ends_with_usage:
        assert final.usage is not None
        assert _chunk_usage(final.usage) == _log_usage(line)
    else:
        assert final.usage is None


def test_include_usage_still_works_with_the_option_off(gateways: Any) -> None:
    servers, _ = gateways
    client = openai_client(servers["asked"].url)
    chunks = list(
        client.chat.completions.create(
            model="anthropic--text", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_route_setting_is_validated() -> None:
    with pytest.raises(ValueError):
        Settings(**{"server": {"stream_usage": "sometimes"}})
    with pytest.raises(ValueError):
        Settings(
            **{
                "providers": [{"name": "demo", "dialect": "demo"}],
                "routes": [{"model": "m", "provider": "demo", "stream_usage": "never"}],
            }
        )


# ----------------------------------------------------------------- the other four dialects


def _sse(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    events: list[tuple[str | None, dict[str, Any]]] = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data = None, []
        for raw in block.split(b"\n"):
            if raw.startswith(b"event:"):
                name = raw[6:].strip().decode()
            elif raw.startswith(b"data:"):
                data.append(raw[5:].strip())
        if data and data != [b"[DONE]"]:
            events.append((name, orjson.loads(b"\n".join(data))))
    return events


def _anthropic(url: str, model: str, rid: str) -> tuple[int, int]:
    body = {"model": model, "max_tokens": 100, "stream": True, "messages": MESSAGES}
    r = httpx.post(url + "/v1/messages", json=body, headers={"x-request-id": rid}, timeout=20)
    events = _sse(r.content)
    types = [e["type"] for _, e in events]
    assert types[-1] == "message_stop"
    start = events[0][1]["message"]["usage"]
    delta = [e for _, e in events if e["type"] == "message_delta"]
    assert len(delta) == 1, "one message_delta, with the cumulative usage"
    usage = {**start, **{k: v for k, v in delta[0]["usage"].items() if v is not None}}
    inp = (
        usage["input_tokens"]
        + (usage.get("cache_read_input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
    )
    return inp, delta[0]["usage"]["output_tokens"]


def _responses(url: str, model: str, rid: str) -> tuple[int, int]:
    r = httpx.post(
        url + "/v1/responses",
        json={"model": model, "input": "hi", "stream": True},
        headers={"x-request-id": rid},
        timeout=20,
    )
    events = _sse(r.content)
    assert events[-1][1]["type"] == "response.completed"
    usage = events[-1][1]["response"]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    return usage["input_tokens"], usage["output_tokens"]


def _gemini(url: str, model: str, rid: str) -> tuple[int, int]:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    r = httpx.post(
        url + f"/v1beta/models/{model}:streamGenerateContent?alt=sse",
        json=body,
        headers={"x-request-id": rid},
        timeout=20,
    )
    events = _sse(r.content)
    last = events[-1][1]
    assert last["candidates"][0]["finishReason"]
    meta = last["usageMetadata"]  # the last chunk's usageMetadata is the whole answer's
    return meta["promptTokenCount"], meta["candidatesTokenCount"] + meta.get("thoughtsTokenCount", 0)


def _interactions(url: str, model: str, rid: str) -> tuple[int, int]:
    body = {"model": model, "input": "hi", "stream": True, "store": False}
    r = httpx.post(url + "/v1beta/interactions", json=body, headers={"x-request-id": rid}, timeout=20)
    events = _sse(r.content)
    completed = [e for _, e in events if e.get("event_type") == "interaction.completed"]
    assert len(completed) == 1
    usage = completed[0]["interaction"]["usage"]
    return usage["total_input_tokens"], usage["total_output_tokens"] + usage["total_thought_tokens"]


READERS = {
    "anthropic": _anthropic,
    "openai-responses": _responses,
    "gemini": _gemini,
    "gemini-interactions": _interactions,
}


@pytest.mark.parametrize("upstream", UPSTREAM_DIALECTS)
@pytest.mark.parametrize("caller", list(READERS))
def test_every_other_dialect_streams_its_usage(gateways: Any, caller: str, upstream: str) -> None:
    """Unasked: Anthropic message_delta (cumulative), Responses response.completed, Gemini
    usageMetadata on the last chunk, Interactions interaction.completed — the access log's numbers."""
    servers, capture = gateways
    rid = "req_test_" + uuid.uuid4().hex
    input_tokens, output_tokens = READERS[caller](servers["asked"].url, f"{upstream}--text", rid)
    line = capture.line(rid)
    assert line["input_tokens"] and line["output_tokens"]
    assert (input_tokens, output_tokens) == (line["input_tokens"], line["output_tokens"])
    assert line["usage_missing"] is False
