"""A cancelled response, a cut stream and a refused request keep their usage (issue 14 item 7).

A scripted loopback upstream sends a few frames that already state usage (Gemini's per-chunk
``usageMetadata``, Anthropic's ``message_start``, an OpenAI chat usage chunk, a Responses
``response.failed`` with usage) and then fails: the TCP connection is reset, it goes silent past
the idle timeout, it sends an in-stream error before any content, or the caller hangs up. The
access-log line and the token metrics must still hold what the upstream reported; an upstream that
reports nothing is marked ``usage_missing`` with a warning naming the provider.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import anthropic_client, openai_client
from tests.support.fake_upstream import ServerThread, read_request


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + (data if isinstance(data, bytes) else orjson.dumps(data)) + b"\n\n"


def _gemini(text: str, prompt: int, candidates: int, finish: str | None = None) -> bytes:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": candidates, "totalTokenCount": prompt + candidates}
    return _sse(
        None, {"candidates": [cand], "usageMetadata": meta, "modelVersion": "gemini-2.5-flash", "responseId": "r1"}
    )


def _chat(
    delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, Any] | None = None, choices: bool = True
) -> bytes:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764558000,
        "model": "gpt-4.1",
    }
    chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        chunk["usage"] = usage
    return _sse(None, chunk)


ANTHROPIC_START = _sse(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {
                "input_tokens": 25,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    },
)
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1764560000,
    "model": "gpt-4.1",
    "output": [],
    "usage": None,
}

# scenario -> (frames, how the body ends: "cut" | "stall" | "slow" | "end")
SCRIPTS: dict[str, tuple[list[bytes], str]] = {
    "gemini_cut": ([_gemini("Hello ", 21, 2), _gemini("there ", 21, 5)], "cut"),
    "gemini_stall": ([_gemini("Hello ", 21, 2), _gemini("there ", 21, 5)], "stall"),
    "gemini_slow": ([_gemini(f"w{i} ", 21, i + 1) for i in range(200)] + [_gemini("", 21, 201, "STOP")], "slow"),
    "chat_cut_before_done": (
        [
            _chat({"role": "assistant", "content": "Hi"}),
            _chat({}, "stop"),
            _chat(None, usage={"prompt_tokens": 17, "completion_tokens": 4, "total_tokens": 21}, choices=False),
        ],
        "cut",
    ),
    "chat_no_usage": ([_chat({"role": "assistant", "content": "Hi"}), _chat({}, "stop"), b"data: [DONE]\n\n"], "end"),
    "chat_usage_on_finish": (
        [
            _chat({"role": "assistant", "content": "Hi"}),
            _chat({}, "stop", usage={"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}),
            b"data: [DONE]\n\n",
        ],
        "end",
    ),
    "anthropic_start_stall": ([ANTHROPIC_START], "stall"),
    "anthropic_refused": (
        [
            ANTHROPIC_START,
            _sse("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ],
        "end",
    ),
    "responses_failed": (
        [
            _sse(
                "response.created",
                {"type": "response.created", "response": {**RESPONSE, "status": "in_progress"}, "sequence_number": 0},
            ),
            _sse(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "m1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "Hi",
                    "sequence_number": 1,
                },
            ),
            _sse(
                "response.failed",
                {
                    "type": "response.failed",
                    "sequence_number": 2,
                    "response": {
                        **RESPONSE,
                        "status": "failed",
                        "error": {"code": "server_error", "message": "boom"},
                        "usage": {"input_tokens": 13, "output_tokens": 6, "total_tokens": 19},
                    },
                },
            ),
        ],
        "end",
    ),
}


class ScriptedUpstream:
    """Answers every dialect's endpoint with the script named by the model's ``--`` suffix."""

    def __init__(self) -> None:
        self.disconnected: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_request(scope, receive, send)
        if body is None:
            return
        path = scope["path"]
        model = (
            path.split("/models/", 1)[1].rsplit(":", 1)[0]
            if "/models/" in path
            else str(orjson.loads(body).get("model", ""))
        )
        frames, ending = SCRIPTS[model.split("--", 1)[1]]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        if ending == "slow":
            try:
                for frame in frames:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                    await asyncio.sleep(0.01)
            except (OSError, asyncio.CancelledError):
                self.disconnected.append(model)
                raise
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({"type": "http.response.body", "body": b"".join(frames), "more_body": ending != "end"})
        if ending == "stall":
            await asyncio.sleep(3)
        elif ending == "cut":
            await asyncio.sleep(0.05)
            raise ConnectionResetError("cut by the scripted upstream")


PROVIDERS = {"anthropic": "", "openai-chat": "/v1", "openai-responses": "/v1", "gemini": ""}


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[ServerThread, ScriptedUpstream, Capture]]:
    upstream = ScriptedUpstream()
    with capture_access_log() as capture, ServerThread(upstream) as up:
        providers = [
            {
                "name": f"scripted-{d}",
                "dialect": d,
                "base_url": up.url + suffix,
                "api_key": "sk-up",
                "max_retries": 0,
                "first_byte_timeout": 5.0,
                "idle_timeout": 1.0,
            }
            for d, suffix in PROVIDERS.items()
        ]
        config = {
            "server": {"keepalive_seconds": 0.5, "access_log": True},
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": providers,
            "routes": [{"model": f"{d}--*", "provider": f"scripted-{d}"} for d in PROVIDERS]
            + [{"model": "always--*", "provider": "scripted-openai-chat", "stream_usage": "always"}],
        }
        with ServerThread(create_app(Settings(**config))) as gateway:
            yield gateway, upstream, capture


def _rid() -> str:
    return "req_test_" + uuid.uuid4().hex


def _tokens(url: str, provider: str, kind: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    m = re.search(rf'^gateway_tokens_total\{{kind="{kind}",provider="{provider}"\}} (\S+)$', text, re.M)
    if m is None:
        m = re.search(rf'^gateway_tokens_total\{{provider="{provider}",kind="{kind}"\}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def _chat_stream(url: str, model: str, rid: str, **kwargs: Any) -> tuple[list[Any], BaseException | None]:
    chunks: list[Any] = []
    try:
        for chunk in openai_client(url).chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_headers={"x-request-id": rid},
            **kwargs,
        ):
            chunks.append(chunk)
    except openai.APIError as exc:
        return chunks, exc
    return chunks, None


@pytest.mark.parametrize("caller", ["openai-chat", "gemini"])  # translated, and the Gemini fast path
@pytest.mark.parametrize("fault,kind", [("gemini_cut", None), ("gemini_stall", "timeout")])
def test_gemini_usage_survives_a_cut_or_an_idle_timeout(env: Any, caller: str, fault: str, kind: str | None) -> None:
    gateway, _, capture = env
    rid = _rid()
    before = _tokens(gateway.url, "scripted-gemini", "input")
    if caller == "openai-chat":
        _chunks, error = _chat_stream(gateway.url, f"gemini--{fault}", rid)
        assert error is not None, "a cut stream is an error, never a finished answer"
    else:
        r = httpx.post(
            gateway.url + f"/v1beta/models/gemini--{fault}:streamGenerateContent?alt=sse",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            headers={"x-request-id": rid},
            timeout=20,
        )
        assert b'"error"' in r.content
    line = capture.line(rid)
    assert line["error_kind"] is not None and (kind is None or line["error_kind"] == kind)
    assert (line["input_tokens"], line["output_tokens"]) == (21, 5), line
    assert line["usage_missing"] is False
    assert _tokens(gateway.url, "scripted-gemini", "input") == before + 21, "the token metrics count it too"


def test_caller_hanging_up_keeps_the_usage_so_far(env: Any) -> None:
    gateway, _upstream, capture = env
    rid = _rid()
    stream = openai_client(gateway.url).chat.completions.create(
        model="gemini--gemini_slow",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        extra_headers={"x-request-id": rid},
    )
    seen = 0
    for chunk in stream:
        seen += bool(chunk.choices and chunk.choices[0].delta.content)
        if seen == 5:
            break
    stream.close()  # the caller hangs up
    line = capture.line(rid)
    assert line["status"] == 499
    assert line["input_tokens"] == 21 and line["output_tokens"] and 5 <= line["output_tokens"] < 201, line


def test_caller_hanging_up_before_the_first_token_keeps_the_input(env: Any) -> None:
    """message_start came, then silence: the caller gives up while the gateway waits for content."""
    gateway, _, capture = env
    rid = _rid()
    body = {
        "model": "anthropic--anthropic_start_stall",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with (
        pytest.raises(httpx.ReadTimeout),
        httpx.stream(
            "POST",
            gateway.url + "/v1/messages",
            json=body,
            headers={"x-request-id": rid},
            timeout=httpx.Timeout(5, read=0.5),
        ) as r,
    ):
        r.read()
    line = capture.line(rid)
    assert line["status"] == 499 and line["error_kind"] == "client_gone"
    assert (line["input_tokens"], line["provider"]) == (25, "scripted-anthropic")


def test_chat_usage_chunk_before_a_cut_is_kept(env: Any) -> None:
    gateway, _, capture = env
    rid = _rid()
    chunks, error = _chat_stream(
        gateway.url, "openai-chat--chat_cut_before_done", rid, stream_options={"include_usage": True}
    )
    assert error is not None
    assert all(c.choices == [] or c.choices[0].finish_reason is None for c in chunks), "no stop reason before a cut"
    line = capture.line(rid)
    assert (line["input_tokens"], line["output_tokens"]) == (17, 4)


def test_refused_in_stream_after_message_start_keeps_its_input(env: Any) -> None:
    gateway, _, capture = env
    rid = _rid()
    client = anthropic_client(gateway.url)
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(
            model="anthropic--anthropic_refused",
            max_tokens=50,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_headers={"x-request-id": rid},
        )
    assert info.value.status_code == 529
    line = capture.line(rid)
    assert line["error_kind"] == "overloaded"
    assert (line["input_tokens"], line["output_tokens"]) == (25, 1)
    assert line["provider"] == "scripted-anthropic" and line["upstream_dialect"] == "anthropic"
    assert line["attempts"][0]["usage"]["input_tokens"] == 25


def test_failed_response_keeps_the_usage_it_states(env: Any) -> None:
    gateway, _, capture = env
    rid = _rid()
    r = httpx.post(
        gateway.url + "/v1/responses",
        json={"model": "openai-responses--responses_failed", "input": "hi", "stream": True},
        headers={"x-request-id": rid},
        timeout=20,
    )
    assert b"response.failed" in r.content
    line = capture.line(rid)
    assert (line["input_tokens"], line["output_tokens"]) == (13, 6)


def test_an_upstream_without_usage_is_said_so(env: Any) -> None:
    gateway, _, capture = env
    rid = _rid()
    chunks, error = _chat_stream(gateway.url, "openai-chat--chat_no_usage", rid, stream_options={"include_usage": True})
    assert error is None and "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hi"
    assert all(c.usage is None for c in chunks), "no usage chunk of zeros"
    line = capture.line(rid)
    assert line["usage_missing"] is True and line["input_tokens"] is None and line["output_tokens"] is None
    assert any("scripted-openai-chat" in w and rid in w and "usage" in w for w in capture.warnings), capture.warnings[
        -3:
    ]
    # an Anthropic caller of the same upstream: the same mark in the log
    rid2 = _rid()
    with anthropic_client(gateway.url).messages.stream(
        model="openai-chat--chat_no_usage",
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-request-id": rid2},
    ) as s:
        assert s.get_final_text() == "Hi"
    assert capture.line(rid2)["usage_missing"] is True


def test_a_successful_stream_is_not_marked(env: Any) -> None:
    gateway, _, capture = env
    rid = _rid()
    _chunks, error = _chat_stream(gateway.url, "gemini--gemini_slow", rid)
    assert error is None
    line = capture.line(rid)
    assert line["usage_missing"] is False and (line["input_tokens"], line["output_tokens"]) == (21, 201)


def test_usage_on_the_finish_chunk_still_ends_with_a_usage_chunk(env: Any) -> None:
    """stream_usage = "always" on the fast path, from an upstream that puts usage on its finish chunk."""
    gateway, _, capture = env
    rid = _rid()
    chunks, error = _chat_stream(gateway.url, "always--chat_usage_on_finish", rid)
    assert error is None
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.model == "always--chat_usage_on_finish"
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (9, 3, 12)
    line = capture.line(rid)
    assert (line["input_tokens"], line["output_tokens"]) == (9, 3)


def test_the_warning_is_not_a_flood(caplog: pytest.LogCaptureFixture) -> None:
    """One warning per provider a minute, then the count of the requests it stood for."""
    from gateway.telemetry import observe

    observer = observe.Observer(enabled=False)
    with caplog.at_level(logging.WARNING, logger="gateway.observe"):
        for i in range(5):
            record = observe.AccessRecord(f"req_{i}", "openai-chat", "/v1/chat/completions", provider="compat")
            observer.finish(record)
            assert record.usage_missing is True
        observer._usage_warned["compat"] = (time.monotonic() - observe.USAGE_WARNING_SECONDS, 4)
        observer.finish(observe.AccessRecord("req_5", "openai-chat", "/v1/chat/completions", provider="compat"))
        observer.finish(observe.AccessRecord("req_6", "openai-chat", "/v1/chat/completions", provider="other"))
    warnings = [r.getMessage() for r in caplog.records if r.name == "gateway.observe"]
    assert len(warnings) == 3
    assert "compat" in warnings[0] and "req_0" in warnings[0]
    assert "req_5" in warnings[1] and "4 more without usage" in warnings[1]
    assert "other" in warnings[2]
    ok = observe.AccessRecord("req_7", "openai-chat", "/v1/chat/completions", provider="compat", input_tokens=3)
    observer.finish(ok)
    assert ok.usage_missing is False
