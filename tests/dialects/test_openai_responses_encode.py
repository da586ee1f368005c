"""Encoded Responses streams and objects, read back by the official openai SDK."""

from __future__ import annotations

import json

import httpx
import openai
import orjson
import pytest

from gateway.dialects.base import EncodeContext
from gateway.dialects.openai_responses import CODEC
from gateway.dialects.signatures import pack
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    MessageStart,
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)
from gateway.framing.sse import SSEDecoder
from gateway.ir import ChatRequest, Tool
from gateway.reply import fold

from .test_openai_responses_decode import OWN, decode_bytes

SCENARIOS = [
    "text",
    "tool_call",
    "parallel_tool_calls",
    "tool_result_turn",
    "thinking",
    "max_tokens",
    "long_500",
    "error_mid_stream",
    "cut_mid_event",
    "no_terminator",
]
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def ctx(upstream: str = "openai-responses", **kw) -> EncodeContext:
    req = ChatRequest(model="caller-model", **kw)
    return EncodeContext(model="caller-model", upstream_dialect=upstream, request=req)


def encode(events: list, c: EncodeContext | None = None) -> bytes:
    enc = CODEC.stream_encoder(c or ctx())
    return b"".join(enc.encode(e) for e in events)


def frames(data: bytes) -> list[tuple[str, dict]]:
    return [(f.event, orjson.loads(f.data)) for f in SSEDecoder().feed(data)]


def client_for(body: bytes, content_type: str = "text/event-stream", status: int = 200) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": content_type})

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://gw.test/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def scenario_events(name: str) -> list:
    return decode_bytes((OWN / f"{name}.sse").read_bytes())[0]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_stream_is_well_formed(name: str) -> None:
    data = encode(scenario_events(name))
    fs = frames(data)
    assert [p["sequence_number"] for _, p in fs] == list(range(len(fs)))
    assert all(ev == p["type"] for ev, p in fs)
    assert fs[0][0] == "response.created" and fs[1][0] == "response.in_progress"
    terminals = [ev for ev, _ in fs if ev in TERMINAL]
    assert len(terminals) == 1 and fs[-1][0] == terminals[0]
    ids = {p["response"]["id"] for _, p in fs if "response" in p}
    assert len(ids) == 1
    assert all(p["response"]["model"] == "caller-model" for _, p in fs if "response" in p)
    # every item event names the item opened at that output_index
    opened: dict[int, str] = {}
    for ev, p in fs:
        if ev == "response.output_item.added":
            assert p["output_index"] not in opened
            opened[p["output_index"]] = p["item"].get("id")
        elif "item_id" in p:
            assert opened[p["output_index"]] == p["item_id"]


def sdk_stream(data: bytes):
    client = client_for(data)
    kinds = []
    final = None
    for event in client.responses.create(model="caller-model", input="hi", stream=True):
        kinds.append(event.type)
        if event.type in TERMINAL:
            final = event.response
    return kinds, final


def sdk_helper(data: bytes):
    client = client_for(data)
    with client.responses.stream(model="caller-model", input="hi") as s:
        for _ in s:
            pass
        return s.get_final_response()


def test_sdk_text() -> None:
    data = encode(scenario_events("text"))
    kinds, final = sdk_stream(data)
    assert kinds.count("response.completed") == 1 and final.output_text == "Hello from the gateway. 你好 — ok!"
    resp = sdk_helper(data)
    assert resp.output_text == "Hello from the gateway. 你好 — ok!" and resp.status == "completed"
    u = resp.usage
    assert (
        u.input_tokens,
        u.input_tokens_details.cached_tokens,
        u.output_tokens,
        u.output_tokens_details.reasoning_tokens,
        u.total_tokens,
    ) == (30, 10, 12, 0, 42)
    assert resp.model == "caller-model"


def test_sdk_tool_calls() -> None:
    resp = sdk_helper(encode(scenario_events("tool_call")))
    assert resp.output_text == "Let me check."
    calls = [o for o in resp.output if o.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"})
    ]
    resp = sdk_helper(encode(scenario_events("parallel_tool_calls")))
    assert [(o.call_id, o.name) for o in resp.output] == [("call_p1", "get_weather"), ("call_p2", "get_time")]


def test_sdk_interleaved_parallel_calls() -> None:
    """An OpenAI chat upstream may stream two calls side by side: indexes stay consistent."""
    events = [
        MessageStart("chatcmpl-1", "gpt"),
        BlockStart(0, "tool_call", "call_a", "get_weather"),
        BlockStart(1, "tool_call", "call_b", "get_time"),
        ToolArgsDelta(0, '{"city":'),
        ToolArgsDelta(1, '{"timezone":'),
        ToolArgsDelta(0, '"Paris"}'),
        ToolArgsDelta(1, '"UTC"}'),
        BlockStop(1),
        BlockStop(0),
        Usage(5, 3),
        End("tool_use", "tool_calls"),
    ]
    data = encode(events, ctx("openai-chat"))
    resp = sdk_helper(data)
    assert [(o.call_id, json.loads(o.arguments)) for o in resp.output] == [
        ("call_a", {"city": "Paris"}),
        ("call_b", {"timezone": "UTC"}),
    ]
    # and our own decoder reads the encoded stream back to the same answer
    r = fold(decode_bytes(data)[0])
    assert [(b.id, b.name, b.text) for b in r.blocks] == [
        ("call_a", "get_weather", '{"city":"Paris"}'),
        ("call_b", "get_time", '{"timezone":"UTC"}'),
    ]


def test_sdk_thinking_signatures() -> None:
    events = scenario_events("thinking")
    resp = sdk_helper(encode(events))
    rs = resp.output[0]
    assert rs.type == "reasoning" and rs.summary[0].text == "The user wants a greeting. I will say hi."
    assert rs.encrypted_content == "c2lnLWFiYzEyMw=="  # same dialect: raw
    assert resp.output_text == "Hi there!" and resp.usage.output_tokens_details.reasoning_tokens == 25
    # a signature from another dialect is packed for the caller
    resp = sdk_helper(encode(events, ctx("anthropic")))
    assert resp.output[0].encrypted_content == pack("anthropic", "c2lnLWFiYzEyMw==")


def test_sdk_incomplete() -> None:
    kinds, final = sdk_stream(encode(scenario_events("max_tokens")))
    assert kinds[-1] == "response.incomplete" and final.status == "incomplete"
    assert final.incomplete_details.reason == "max_output_tokens" and final.output_text == "The answer is cut"
    events = [
        MessageStart("m", "x"),
        BlockStart(0, "text"),
        TextDelta(0, "bad"),
        BlockStop(0),
        End("content_filter", "SAFETY"),
    ]
    kinds, final = sdk_stream(encode(events, ctx("gemini")))
    assert final.incomplete_details.reason == "content_filter"


@pytest.mark.parametrize("name", ["error_mid_stream", "cut_mid_event", "no_terminator"])
def test_sdk_raises_on_errors(name: str) -> None:
    data = encode(scenario_events(name))
    with pytest.raises(openai.APIError) as info:
        sdk_stream(data)
    if name == "error_mid_stream":
        assert "The server had an error" in info.value.message
        assert info.value.body["code"] == "server_error"
    with pytest.raises(openai.APIError):
        sdk_helper(data)
    fs = frames(data)
    assert [ev for ev, _ in fs][-2:] == ["error", "response.failed"]
    assert fs[-1][1]["response"]["status"] == "failed" and fs[-1][1]["response"]["error"]["code"]


def test_error_codes_for_other_dialects() -> None:
    events = [MessageStart("m", "x"), StreamError("overloaded", "Overloaded", 529, "overloaded_error")]
    fs = frames(encode(events, ctx("anthropic")))
    assert fs[-2][1]["error"]["code"] == "overloaded" and fs[-1][1]["response"]["error"]["message"] == "Overloaded"
    events = [MessageStart("m", "x"), StreamError("rate_limit", "slow down", 429, "insufficient_quota")]
    fs = frames(encode(events))
    assert fs[-2][1]["error"]["code"] == "insufficient_quota"


def test_nothing_after_terminal_and_keepalive() -> None:
    enc = CODEC.stream_encoder(ctx())
    enc.encode(MessageStart("m", "x"))
    assert enc.encode(End("stop"))
    assert enc.encode(TextDelta(0, "late")) == b"" and enc.encode(End("stop")) == b""
    assert enc.keepalive().startswith(b":")
    # a stream without MessageStart still starts properly
    fs = frames(encode([BlockStart(0, "text"), TextDelta(0, "x"), BlockStop(0), End("stop")]))
    assert fs[0][0] == "response.created" and fs[-1][1]["response"]["output"][0]["content"][0]["text"] == "x"


def test_encode_whole_sdk() -> None:
    reply = fold(scenario_events("tool_call"))
    c = ctx(tools=[Tool("get_weather", "w", {"type": "object", "properties": {}})])
    obj = CODEC.encode_whole(reply, c)
    resp = client_for(orjson.dumps(obj), "application/json").responses.create(model="caller-model", input="hi")
    assert resp.output_text == "Let me check." and resp.status == "completed" and resp.model == "caller-model"
    assert resp.output[1].call_id == "call_weather_1" and json.loads(resp.output[1].arguments) == {
        "city": "Paris",
        "unit": "celsius",
    }
    assert resp.usage.input_tokens == 50 and resp.tools[0].name == "get_weather"
    # whole -> decode_whole round trip
    r = fold(CODEC.decode_whole(obj))
    assert [(b.kind, b.text) for b in r.blocks] == [(b.kind, b.text) for b in reply.blocks]
    reply = fold(scenario_events("max_tokens"))
    obj = CODEC.encode_whole(reply, ctx())
    assert obj["status"] == "incomplete" and obj["incomplete_details"] == {"reason": "max_output_tokens"}


def test_namespace_restored_in_stream() -> None:
    body = {
        "model": "m",
        "input": "hi",
        "tools": [
            {
                "type": "namespace",
                "name": "shell",
                "description": "d",
                "tools": [{"type": "function", "name": "exec", "parameters": {"type": "object"}}],
            }
        ],
    }
    req = CODEC.parse_request(body, None)  # type: ignore[arg-type]
    c = EncodeContext(model="m", upstream_dialect="anthropic", request=req)
    events = [
        MessageStart("m", "x"),
        BlockStart(0, "tool_call", "toolu_1", "shell__exec"),
        ToolArgsDelta(0, "{}"),
        BlockStop(0),
        End("tool_use"),
    ]
    resp = sdk_helper(encode(events, c))
    assert (resp.output[0].name, resp.output[0].namespace) == ("exec", "shell")


def test_thinking_from_chat_upstream_without_signature() -> None:
    events = [
        MessageStart("m", "x"),
        BlockStart(0, "thinking"),
        ThinkingDelta(0, "hmm"),
        BlockStop(0),
        BlockStart(1, "text"),
        TextDelta(1, "ok"),
        BlockStop(1),
        End("stop"),
    ]
    resp = sdk_helper(encode(events, ctx("openai-chat")))
    assert (
        resp.output[0].type == "reasoning"
        and resp.output[0].summary[0].text == "hmm"
        and resp.output[0].encrypted_content is None
    )
    assert resp.output_text == "ok"
    events = [MessageStart("m", "x"), BlockStart(0, "thinking"), SignatureDelta(0, "sig"), BlockStop(0), End("stop")]
    fs = frames(encode(events, ctx("gemini")))
    assert [ev for ev, _ in fs].count("response.reasoning_summary_part.added") == 0
    assert fs[-1][1]["response"]["output"][0]["encrypted_content"] == pack("gemini", "sig")
