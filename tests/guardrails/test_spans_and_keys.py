"""Guardrails beyond the route: OTLP spans with capture_content hold no raw value; a key's
guardrails join the route's; a streamed tool call's arguments are redacted."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.server.app import create_app
from gateway.settings import Settings
from gateway.telemetry.metrics import GenAIMetrics
from gateway.telemetry.traces import Telemetry
from tests.guardrails.test_guardrails_callers import (
    ANSWER_REDACTED,
    CARD,
    EMAIL,
    PROMPT,
    ChatUpstream,
    _chat,
)
from tests.support.callers import anthropic_client, openai_client
from tests.support.fake_upstream import ServerThread

TEAM_SHA = hashlib.sha256(b"sk-team-key").hexdigest()


@pytest.fixture(scope="module")
def traced() -> Iterator[tuple[str, InMemorySpanExporter, ChatUpstream]]:
    up = ChatUpstream()
    with ServerThread(up) as upstream:
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [
                {"name": "pii", "kind": "pii", "action": "redact"},
                {"name": "emails-out", "kind": "pii", "types": ["email"], "action": "redact", "on": ["request"]},
            ],
            "routes": [{"model": "*", "provider": "up", "guardrails": ["pii"]}],
            "keys": [{"name": "team", "key_sha256": TEAM_SHA, "guardrails": ["emails-out", "pii"]}],
        }
        app = create_app(Settings(**config))
        spans = InMemorySpanExporter()
        telemetry = Telemetry(SimpleSpanProcessor(spans), GenAIMetrics())
        telemetry.capture_content = True
        app.state.gateway.telemetry = telemetry
        with ServerThread(app) as gw:
            yield gw.url, spans, up


@pytest.mark.parametrize("stream", [False, True])
def test_spans_with_capture_content_hold_no_raw_value(
    traced: tuple[str, InMemorySpanExporter, ChatUpstream], stream: bool
) -> None:
    url, spans, _ = traced
    spans.clear()
    client = anthropic_client(url, key="sk-team-key")  # (with named keys every caller has one)
    messages: Any = [{"role": "user", "content": PROMPT}]
    if stream:
        with client.messages.stream(model="span-3", max_tokens=50, messages=messages) as s:
            text = "".join(s.text_stream)
    else:
        reply = client.messages.create(model="span-3", max_tokens=50, messages=messages)
        text = "".join(b.text for b in reply.content if b.type == "text")
    assert text == ANSWER_REDACTED
    deadline = time.monotonic() + 10  # the request's span ends just after the caller has its answer
    while True:
        dumped = orjson.dumps([dict(s.attributes or {}) for s in spans.get_finished_spans()]).decode()
        if "[REDACTED:email]" in dumped or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "[REDACTED:email]" in dumped  # the content is there, redacted
    assert EMAIL not in dumped and CARD not in dumped


def test_a_key_adds_its_guardrails_to_the_route_in_a_stable_order(
    traced: tuple[str, InMemorySpanExporter, ChatUpstream],
) -> None:
    url, _, up = traced
    client = openai_client(url, key="sk-team-key")
    client.chat.completions.create(model="key-1", messages=[{"role": "user", "content": PROMPT}])
    assert EMAIL not in orjson.dumps(up.bodies[-1]).decode()
    from gateway.guardrails.engine import Guardrails  # the order: the route's first, then the key's not yet named

    names = [
        g.name
        for g in Guardrails(
            Settings(
                providers=[{"name": "up", "dialect": "openai-chat", "base_url": "http://127.0.0.1:9"}],  # type: ignore[list-item]
                guardrails=[{"name": "pii", "kind": "pii"}, {"name": "emails-out", "kind": "pii"}],  # type: ignore[list-item]
                routes=[{"model": "*", "provider": "up", "guardrails": ["pii"]}],  # type: ignore[list-item]
                keys=[{"name": "team", "key_sha256": TEAM_SHA, "guardrails": ["emails-out", "pii"]}],  # type: ignore[list-item]
            )
        )
        .for_request("*", "team")
        .guardrails  # type: ignore[union-attr]
    ]
    assert names == ["pii", "emails-out"]


class ToolUpstream(ChatUpstream):
    """Streams one tool call whose arguments carry an email, one character per chunk."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        args = orjson.dumps({"to": EMAIL, "body": "hi"}).decode()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            obj = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
            return b"data: " + orjson.dumps(obj) + b"\n\n"

        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "send_mail", "arguments": ""}}
        frames = [chunk({"role": "assistant", "tool_calls": [call]})]
        frames += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": c}}]}) for c in args]
        frames += [chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def test_streamed_tool_call_arguments_are_redacted() -> None:
    with ServerThread(ToolUpstream()) as upstream:
        config = {
            "auth": {"keys_env": ""},
            "store": {"url": "sqlite://:memory:"},
            "providers": [{"name": "up", "dialect": "openai-chat", "base_url": upstream.url + "/v1", "api_key": "k"}],
            "guardrails": [{"name": "pii", "kind": "pii"}],
            "routes": [{"model": "*", "provider": "up", "guardrails": ["pii"]}],
        }
        with ServerThread(create_app(Settings(**config))) as gw:
            args = ""
            for c in openai_client(gw.url).chat.completions.create(
                model="tools", messages=[{"role": "user", "content": "mail"}], stream=True
            ):
                for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
                    args += tc.function.arguments or "" if tc.function else ""
            assert orjson.loads(args) == {"to": "[REDACTED:email]", "body": "hi"}
            assert _chat(gw.url, "tools", "x", True) == ""
