"""gemini-interactions: request parse (four input forms, steps, tools, config), build, and 400s."""

from __future__ import annotations

import json

import pytest

from gateway.dialects import signatures
from gateway.dialects.base import BuildOptions, RequestMeta
from gateway.dialects.gemini_interactions import CODEC
from gateway.errors import GatewayError
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    OpaquePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)

META = RequestMeta()


def parse(body):
    return CODEC.parse_request(body, META)


def test_input_string_block_and_content_list():
    r = parse({"model": "m", "input": "hello"})
    assert r.messages == [Message("user", [TextPart("hello")])] and r.store is True and r.stream is False
    r = parse({"model": "m", "input": {"type": "text", "text": "hi"}, "stream": True, "store": False})
    assert r.messages == [Message("user", [TextPart("hi")])] and r.stream and r.store is False
    r = parse(
        {
            "model": "m",
            "input": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": "AAAA", "mime_type": "image/png"},
                {"type": "document", "uri": "gs://b/x.pdf", "mime_type": "application/pdf"},
            ],
        }
    )
    assert r.messages == [
        Message(
            "user",
            [TextPart("look"), ImagePart("image/png", "AAAA"), FilePart("application/pdf", None, "gs://b/x.pdf")],
        )
    ]


def test_python_sdk_wire_form():
    r = parse(
        {"model": "m", "input": [{"type": "user_input", "content": [{"type": "text", "text": "hi"}]}], "stream": True}
    )
    assert r.messages == [Message("user", [TextPart("hi")])] and r.stream


def test_steps_history():
    sig_foreign = signatures.pack("anthropic", "abc")
    body = {
        "model": "m",
        "system_instruction": "be brief",
        "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {"type": "thought", "signature": "c2ln", "summary": [{"type": "text", "text": "need tool"}]},
            {"type": "thought", "signature": sig_foreign},
            {"type": "model_output", "content": [{"type": "text", "text": "Let me check."}]},
            {"type": "function_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"type": "function_result", "call_id": "call_1", "name": "get_weather", "result": '{"temp_c": 18}'},
            {"type": "function_result", "call_id": "call_2", "result": {"ok": True}, "is_error": True},
            {
                "type": "function_result",
                "call_id": "call_3",
                "result": [{"type": "text", "text": "a"}, {"type": "image", "uri": "https://x/y.png"}],
            },
            {"type": "function_result", "call_id": "call_4", "result": {"content": [{"type": "text", "text": "b"}]}},
            {"type": "google_search_call", "id": "s1", "arguments": {"queries": ["x"]}},
        ],
    }
    r = parse(body)
    assert r.system == [TextPart("be brief")]
    # a server tool's step is kept whole for an Interactions upstream (gateway/dialects/items.py)
    assert [m.role for m in r.messages] == ["user", "assistant", "user", "assistant"]
    assert r.messages[3].content == [OpaquePart(body["input"][-1], "gemini-interactions")]
    a = r.messages[1].content
    assert a[0] == ThinkingPart("need tool", "c2ln", "gemini-interactions")
    assert a[1] == ThinkingPart("", "abc", "anthropic")
    assert a[2] == TextPart("Let me check.")
    assert a[3] == ToolCallPart("call_1", "get_weather", '{"city":"Paris"}')
    u = r.messages[2].content
    assert u[0] == ToolResultPart("call_1", [TextPart('{"temp_c": 18}')], False, "get_weather")
    assert u[1].is_error and json.loads(u[1].content[0].text) == {"ok": True}
    assert u[2].content == [TextPart("a"), ImagePart(None, None, "https://x/y.png")]
    assert u[3].content == [TextPart("b")]


def test_tools_config_and_extras():
    body = {
        "model": "m",
        "input": "x",
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "d",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            {"type": "google_search"},
        ],
        "generation_config": {
            "max_output_tokens": 321,
            "temperature": 0.25,
            "top_p": 0.9,
            "seed": 7,
            "stop_sequences": ["END"],
            "thinking_level": "low",
            "thinking_summaries": "auto",
            "tool_choice": {"allowed_tools": {"mode": "any", "tools": ["get_weather"]}},
        },
        "previous_interaction_id": "v1_prev",
        "background": False,
        "response_format": {"type": "text", "mime_type": "application/json", "schema": {"type": "object"}},
        "service_tier": "flex",
        "brand_new_field": 1,
    }
    r = parse(body)
    assert [t.name for t in r.tools] == ["get_weather"] and r.tools[0].description == "d"
    assert (r.max_tokens, r.temperature, r.top_p, r.stop) == (321, 0.25, 0.9, ["END"])
    assert r.thinking.effort == "low" and r.thinking.include_thoughts is True
    assert r.tool_choice == ToolChoice("tool", "get_weather")
    assert r.response_format == {"type": "json_schema", "schema": {"type": "object"}}
    ex = r.extras["gemini-interactions"]
    assert ex["previous_interaction_id"] == "v1_prev" and ex["background"] is False
    assert ex["tools"] == [{"type": "google_search"}] and ex["generation_config"] == {"seed": 7}
    assert ex["service_tier"] == "flex" and ex["brand_new_field"] == 1
    # the older schema-as-response_format form and mime-only JSON
    assert (
        parse(
            {
                "model": "m",
                "input": "x",
                "response_format": {"type": "object", "properties": {}},
                "response_mime_type": "application/json",
            }
        ).response_format["type"]
        == "json_schema"
    )
    assert parse({"model": "m", "input": "x", "response_mime_type": "application/json"}).response_format == {
        "type": "json"
    }
    assert parse({"model": "m", "input": "x", "generation_config": {"tool_choice": "any"}}).tool_choice == ToolChoice(
        "required"
    )


def test_previous_interaction_without_input_and_agent():
    r = parse({"model": "m", "previous_interaction_id": "v1_p"})
    assert r.messages == [] and r.extras["gemini-interactions"]["previous_interaction_id"] == "v1_p"
    r = parse({"agent": "deep-research-pro", "input": "x"})
    assert r.model == "deep-research-pro" and r.extras["gemini-interactions"]["agent"] == "deep-research-pro"


@pytest.mark.parametrize(
    "body,field",
    [
        ({"input": "x"}, "model"),
        ({"model": 3, "input": "x"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": 5}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": [{"type": "text"}]}, "input[0].text"),
        ({"model": "m", "input": [{"type": "image"}]}, "input[0]"),
        ({"model": "m", "input": [{"type": "function_call", "id": "c", "arguments": {}}]}, "input[0].name"),
        ({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].arguments"),
        ({"model": "m", "input": [{"type": "function_result", "result": "x"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"type": "function_result", "call_id": "c"}]}, "input[0].result"),
        ({"model": "m", "input": [{"type": "user_input", "content": "hi"}]}, "input[0].content"),
        ({"model": "m", "input": ["hi"]}, "input[0]"),
        ({"model": "m", "input": "x", "system_instruction": {"parts": []}}, "system_instruction"),
        ({"model": "m", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"model": "m", "input": "x", "tools": {}}, "tools"),
        (
            {"model": "m", "input": "x", "generation_config": {"max_output_tokens": "9"}},
            "generation_config.max_output_tokens",
        ),
        (
            {"model": "m", "input": "x", "generation_config": {"thinking_level": "huge"}},
            "generation_config.thinking_level",
        ),
        (
            {"model": "m", "input": "x", "generation_config": {"tool_choice": "sometimes"}},
            "generation_config.tool_choice",
        ),
        ({"model": "m", "input": "x", "stream": "yes"}, "stream"),
        ({"model": "m", "input": "x", "store": 1}, "store"),
    ],
)
def test_bad_inputs_are_400(body, field):
    with pytest.raises(GatewayError) as info:
        parse(body)
    err = info.value
    assert err.kind == "invalid_request" and err.status == 400 and field in err.message
    status, rendered = CODEC.render_error(err)
    assert status == 400 and rendered == {"error": {"code": "invalid_argument", "message": err.message}}


def test_build_request_steps_form():
    req = ChatRequest(
        model="smart",
        system=[TextPart("sys")],
        messages=[
            Message("system", [TextPart("more sys")]),
            Message("user", [TextPart("Weather?"), ImagePart(url="data:image/png;base64,AAAA")]),
            Message(
                "assistant",
                [
                    ThinkingPart("t", "c2ln", "gemini-interactions"),
                    ThinkingPart("x", "foreign", "anthropic"),
                    TextPart("Let me check."),
                    ToolCallPart("call_1", "get_weather", '{"city": "Paris"}'),
                ],
            ),
            Message("user", [ToolResultPart("call_1", [TextPart("18C")]), TextPart("thanks")]),
        ],
        max_tokens=100,
        temperature=0.5,
        stop=["X"],
        tool_choice=ToolChoice("required"),
        response_format={"type": "json_schema", "schema": {"type": "object"}},
        extras={
            "gemini-interactions": {
                "previous_interaction_id": "v1_p",
                "background": True,
                "tools": [{"type": "google_search"}],
                "generation_config": {"seed": 3},
                "service_tier": "flex",
            }
        },
    )
    from gateway.ir import Thinking, Tool

    req.tools = [Tool("get_weather", "d", {"type": "object", "properties": {}})]
    req.thinking = Thinking(budget_tokens=2000, include_thoughts=True)
    call = CODEC.build_request(req, "gemini-3-flash-preview", BuildOptions())
    b = call.body
    assert call.path == "/v1beta/interactions" and call.method == "POST"
    assert (
        b["model"] == "gemini-3-flash-preview" and b["stream"] is True and b["store"] is True
    )  # stored upstream so a dropped stream can be resumed by event id
    assert "previous_interaction_id" not in b and "background" not in b and b["service_tier"] == "flex"
    assert b["system_instruction"] == "sys\n\nmore sys"
    assert b["input"] == [
        {
            "type": "user_input",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image", "data": "AAAA", "mime_type": "image/png"},
            ],
        },
        {"type": "thought", "signature": "c2ln"},
        {"type": "model_output", "content": [{"type": "text", "text": "Let me check."}]},
        {"type": "function_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"type": "function_result", "call_id": "call_1", "name": "get_weather", "result": "18C"},
        {"type": "user_input", "content": [{"type": "text", "text": "thanks"}]},
    ]
    assert b["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "d",
            "parameters": {"type": "object", "properties": {}},
        },
        {"type": "google_search"},
    ]
    g = b["generation_config"]
    assert g == {
        "max_output_tokens": 100,
        "temperature": 0.5,
        "stop_sequences": ["X"],
        "thinking_level": "low",
        "thinking_summaries": "auto",
        "tool_choice": "any",
        "seed": 3,
    }
    assert b["response_format"] == {"type": "text", "mime_type": "application/json", "schema": {"type": "object"}}
    # the body is what the SDK's own request model accepts
    from google.genai._gaos.types.interactions.createmodelinteraction import CreateModelInteraction
    from google.genai._gaos.utils.serializers import unmarshal

    unmarshal(b, CreateModelInteraction)


def test_parse_build_round_trip():
    body = {
        "model": "m",
        "system_instruction": "s",
        "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "q"}]},
            {"type": "thought", "signature": "c2ln"},
            {"type": "function_call", "id": "c1", "name": "f", "arguments": {"a": 1}},
            {"type": "function_result", "call_id": "c1", "name": "f", "result": "r"},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "generation_config": {
            "max_output_tokens": 5,
            "thinking_level": "high",
            "thinking_summaries": "none",
            "tool_choice": "none",
        },
    }
    b = CODEC.build_request(parse(body), "m", BuildOptions()).body
    assert b["input"] == body["input"] and b["system_instruction"] == "s" and b["tools"] == body["tools"]
    assert b["generation_config"] == body["generation_config"]


def test_decode_error_shapes():
    e = CODEC.decode_error(429, b'{"error": {"code": "resource_exhausted", "message": "quota"}}')
    assert (e.kind, e.status, e.raw, e.message, e.origin) == (
        "rate_limit",
        429,
        "resource_exhausted",
        "quota",
        "gemini-interactions",
    )
    assert CODEC.render_error(e) == (429, {"error": {"code": "resource_exhausted", "message": "quota"}})
    e = CODEC.decode_error(503, b'{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}')
    assert (e.kind, e.raw) == ("overloaded", "unavailable")
    e = CODEC.decode_error(500, b"<html>oops</html>")
    assert e.kind == "api_error" and "oops" in e.message
    assert CODEC.render_error(GatewayError("overloaded", "x", 529)) == (
        503,
        {"error": {"code": "unavailable", "message": "x"}},
    )
