"""The demo provider is an openai-chat provider over ``DemoTransport``: whatever a caller sends,
the Chat stream the stand-in answers decodes to exactly the events ``demo_events`` makes for the
caller's own request (so every caller sees the demo's answers unchanged), and the stand-in is
configured from ``dialect = "demo"`` as before."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from gateway.dialects.base import BuildOptions, RequestMeta
from gateway.dialects.registry import codec_for
from gateway.events import End, Event, MessageStart
from gateway.framing.sse import SSEDecoder
from gateway.http import demo
from gateway.settings import ProviderSettings

TOOLS = [
    {
        "name": "type",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "integer"}, "b": {"enum": ["z"]}},
            "required": ["text", "b"],
        },
    }
]
CASES: list[tuple[str, dict[str, Any]]] = [
    ("anthropic", {"model": "text", "max_tokens": 10, "messages": [{"role": "user", "content": "hi there you"}]}),
    (
        "anthropic",
        {
            "model": "text",
            "max_tokens": 3,
            "top_k": 2,
            "messages": [{"role": "user", "content": "one two three four five"}],
        },
    ),
    (
        "anthropic",
        {"model": "text", "max_tokens": 100, "tools": TOOLS, "messages": [{"role": "user", "content": "call it"}]},
    ),
    (
        "anthropic",
        {
            "model": "text",
            "max_tokens": 100,
            "tool_choice": {"type": "none"},
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "x"}],
        },
    ),
    (
        "anthropic",
        {
            "model": "text",
            "max_tokens": 100,
            "tools": TOOLS,
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Calling type."},
                        {"type": "tool_use", "id": "c1", "name": "type", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "42"},
                        {"type": "text", "text": "and more"},
                    ],
                },
            ],
        },
    ),
    (
        "openai-chat",
        {
            "model": "text",
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": [{"type": "text", "text": "a b"}, {"type": "text", "text": "c"}]},
            ],
        },
    ),
    (
        "gemini",
        {
            "contents": [{"role": "user", "parts": [{"text": "hi"}, {"text": "there"}]}],
            "generationConfig": {"topK": 4, "maxOutputTokens": 3},
        },
    ),
    (
        "openai-responses",
        {
            "model": "text",
            "input": [
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "res"},
            ],
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        },
    ),
]


def _comparable(events: list[Event]) -> list[Event]:
    """Events without what only the wire adds: a Chat id (``chatcmpl-…``, what a Chat caller sees)
    and the raw stop reason."""
    out: list[Event] = []
    for e in events:
        if isinstance(e, MessageStart):
            e = MessageStart("", e.model)
        elif isinstance(e, End):
            e = End(e.reason, None, e.stop_sequence)
        out.append(e)
    return out


@pytest.mark.parametrize(("dialect", "body"), CASES)
def test_the_stand_in_answers_the_demo_events_of_the_callers_request(dialect: str, body: dict[str, Any]) -> None:
    req = codec_for(dialect).parse_request(body, RequestMeta(path_model="text"))
    want = demo.demo_events(req, "up")
    call = codec_for(demo.DIALECT).build_request(req, "up", BuildOptions())

    async def answer() -> httpx.Response:
        request = httpx.Request("POST", demo.BASE_URL + call.path, content=orjson.dumps(call.body))
        response = await demo.DemoTransport().handle_async_request(request)
        await response.aread()
        return response

    response = asyncio.run(answer())
    assert response.headers["content-type"] == "text/event-stream"
    decoder = codec_for(demo.DIALECT).stream_decoder()
    got = [e for frame in SSEDecoder().feed(response.content) for e in decoder.feed(frame)] + decoder.close()
    assert _comparable(got) == _comparable(want)


def test_dialect_demo_is_the_demo_transport() -> None:
    s = ProviderSettings(name="demo", dialect="demo")
    assert (s.dialect, s.transport) == (demo.DIALECT, demo.KIND)
    assert s.base_url  # never resolved: the transport answers


def test_an_unknown_dialect_is_refused_naming_the_known_ones() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"unknown dialect 'nope'.*openai-chat.*demo"):
        ProviderSettings(name="p", dialect="nope")
