"""Responses request parsing and building, and error bodies."""

from __future__ import annotations

import pytest

from gateway.dialects.base import BuildOptions, RequestMeta
from gateway.dialects.openai_responses import CODEC
from gateway.dialects.signatures import pack
from gateway.errors import GatewayError
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    Thinking,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

META = RequestMeta()


def parse(body: dict) -> ChatRequest:
    return CODEC.parse_request(body, META)


def build(req: ChatRequest, model: str = "up-model") -> dict:
    return CODEC.build_request(req, model, BuildOptions()).body


def test_string_input_and_instructions() -> None:
    req = parse({"model": "m", "input": "hello", "instructions": "be brief", "stream": True, "max_output_tokens": 50})
    assert req.messages == [Message("user", [TextPart("hello")])]
    assert [p.text for p in req.system] == ["be brief"] and req.stream and req.max_tokens == 50
    body = build(req)
    assert body["instructions"] == "be brief" and body["stream"] is True and body["max_output_tokens"] == 50
    assert body["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}]
    call = CODEC.build_request(req, "x", BuildOptions())
    assert call.path == "/responses" and body["model"] == "up-model"


def test_items_round_trip() -> None:
    body = {
        "model": "m",
        "input": [
            {"role": "developer", "content": "sys first"},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
                "content": None,
                "encrypted_content": "ENC",
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "calling", "annotations": []}],
            },
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "get", "arguments": '{"a":1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "result"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "r2"}, {"type": "input_image", "file_id": "file-9"}],
            },
            {"role": "system", "content": "mid system"},
            {
                "role": "user",
                "content": [
                    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}
                ],
            },
        ],
    }
    req = parse(body)
    assert [p.text for p in req.system] == ["sys first"]
    roles = [m.role for m in req.messages]
    assert roles == ["user", "assistant", "user", "system", "user"]
    user0 = req.messages[0].content
    assert user0[1] == ImagePart("image/png", "AAAA") and user0[2] == ImagePart(url="https://x/y.png")
    asst = req.messages[1].content
    assert asst[0] == ThinkingPart("a\n\nb", "ENC", "openai-responses")
    assert asst[1] == TextPart("calling") and asst[2] == ToolCallPart("c1", "get", '{"a":1}')
    results = req.messages[2].content
    assert [r.tool_call_id for r in results] == ["c1", "c2"] and results[1].content[1] == ImagePart(
        url="openai-file://file-9"
    )
    assert req.messages[4].content[0] == FilePart("application/pdf", "JVBE", filename="a.pdf")

    out = build(req)["input"]
    types = [i.get("type") for i in out]
    assert types == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "message",
    ]
    assert out[1] == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "a\n\nb"}],
        "encrypted_content": "ENC",
    }
    assert out[2] == {"type": "message", "role": "assistant", "content": "calling"}
    assert out[3] == {"type": "function_call", "call_id": "c1", "name": "get", "arguments": '{"a":1}'}
    assert out[4]["output"] == "result" and out[5]["output"][1] == {
        "type": "input_image",
        "file_id": "file-9",
        "detail": "auto",
    }
    assert out[6]["role"] == "developer"
    assert out[0]["content"][1]["image_url"] == "data:image/png;base64,AAAA"
    assert out[7]["content"][0] == {
        "type": "input_file",
        "file_data": "data:application/pdf;base64,JVBE",
        "filename": "a.pdf",
    }


def test_foreign_thinking_dropped_and_packed_signature_unpacked() -> None:
    req = parse(
        {
            "model": "m",
            "input": [
                {"type": "reasoning", "summary": [], "encrypted_content": pack("anthropic", "SIG")},
                {"role": "assistant", "content": "x"},
            ],
        }
    )
    part = req.messages[0].content[0]
    assert (part.origin, part.signature) == ("anthropic", "SIG")
    assert build(req)["input"] == [{"type": "message", "role": "assistant", "content": "x"}]


def test_tools_namespaces_hosted_choice() -> None:
    body = {
        "model": "m",
        "input": [{"type": "function_call", "call_id": "c", "name": "exec", "namespace": "shell", "arguments": "{}"}],
        "tools": [
            {
                "type": "function",
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {}},
                "strict": True,
            },
            {
                "type": "namespace",
                "name": "shell",
                "description": "shell tools",
                "tools": [{"type": "function", "name": "exec", "parameters": {"type": "object"}}],
            },
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "name": "f"},
        "parallel_tool_calls": False,
    }
    req = parse(body)
    assert [t.name for t in req.tools] == ["f", "shell__exec"] and req.tools[0].strict is True
    assert req.messages[0].content[0].name == "shell__exec"
    assert req.extras["openai-responses"]["tools_hosted"] == [{"type": "web_search"}]
    out = build(req)
    assert out["tools"][0] == {
        "type": "function",
        "name": "f",
        "parameters": {"type": "object", "properties": {}},
        "description": "d",
        "strict": True,
    }
    assert out["tools"][1] == {
        "type": "namespace",
        "name": "shell",
        "description": "shell tools",
        "tools": [{"type": "function", "name": "exec", "parameters": {"type": "object"}}],
    }
    assert out["tools"][2] == {"type": "web_search"}
    assert out["input"][0] == {
        "type": "function_call",
        "call_id": "c",
        "name": "exec",
        "namespace": "shell",
        "arguments": "{}",
    }
    assert out["tool_choice"] == {"type": "function", "name": "f"} and out["parallel_tool_calls"] is False
    for choice in ("auto", "none", "required"):
        assert build(parse({"model": "m", "input": "x", "tool_choice": choice}))["tool_choice"] == choice
    allowed = parse(
        {
            "model": "m",
            "input": "x",
            "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "f"}]},
        }
    )
    assert build(allowed)["tool_choice"] == {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "f"}],
    }


def test_reasoning_text_format_and_extras() -> None:
    req = parse(
        {
            "model": "m",
            "input": "x",
            "reasoning": {"effort": "high", "summary": "detailed"},
            "text": {
                "format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True},
                "verbosity": "low",
            },
            "store": True,
            "metadata": {"k": "v"},
            "user": "u1",
            "prompt_cache_key": "pk",
            "service_tier": "flex",
            "include": ["message.output_text.logprobs"],
            "temperature": 0.5,
            "top_p": 0.9,
            "brand_new": 1,
        }
    )
    assert req.thinking == Thinking(enabled=True, effort="high", include_thoughts=True)
    assert req.response_format == {"type": "json_schema", "schema": {"type": "object"}, "name": "out", "strict": True}
    body = build(req)
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert body["store"] is False and body["include"] == ["message.output_text.logprobs", "reasoning.encrypted_content"]
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True},
        "verbosity": "low",
    }
    assert body["prompt_cache_key"] == "pk" and body["service_tier"] == "flex" and body["brand_new"] == 1
    assert (
        body["metadata"] == {"k": "v"} and body["user"] == "u1" and body["temperature"] == 0.5 and body["top_p"] == 0.9
    )
    assert "tool_namespaces" not in body and "verbosity" not in body
    # reasoning from another dialect: a budget becomes an effort, include_thoughts -> summary auto
    other = ChatRequest(
        model="m",
        messages=[Message("user", [TextPart("x")])],
        thinking=Thinking(enabled=True, budget_tokens=2000, include_thoughts=True),
    )
    assert build(other)["reasoning"] == {"effort": "low", "summary": "auto"}
    assert "reasoning" not in build(ChatRequest(model="m", thinking=Thinking(enabled=False)))
    assert parse({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}}).response_format == {
        "type": "json"
    }
    assert build(ChatRequest(model="m", response_format={"type": "json"}))["text"] == {
        "format": {"type": "json_object"}
    }


def test_tool_result_from_other_dialect() -> None:
    req = ChatRequest(
        model="m",
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ThinkingPart("t", "sig", "anthropic"), ToolCallPart("id1", "f", "")]),
            Message("user", [ToolResultPart("id1", [TextPart("ok")]), TextPart("and?")]),
        ],
    )
    out = build(req)["input"]
    assert out[1] == {"type": "function_call", "call_id": "id1", "name": "f", "arguments": "{}"}
    assert out[2] == {"type": "function_call_output", "call_id": "id1", "output": "ok"}
    assert out[3] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and?"}]}


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": "x"}, "model"),
        ({"model": 3, "input": "x"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": 5}, "input"),
        ({"model": "m", "input": "x", "previous_response_id": 5}, "previous_response_id"),
        ({"model": "m", "input": "x", "background": "yes"}, "background"),
        ({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_video"}]}]}, "input[0].content[0].type"),
        ({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c"}]}, "input[0].output"),
        ({"model": "m", "input": ["x"]}, "input[0]"),
        ({"model": "m", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"model": "m", "input": "x", "tool_choice": "sometimes"}, "tool_choice"),
        ({"model": "m", "input": "x", "max_output_tokens": "many"}, "max_output_tokens"),
        ({"model": "m", "input": "x", "temperature": "hot"}, "temperature"),
        ({"model": "m", "input": "x", "reasoning": "high"}, "reasoning"),
        ({"model": "m", "input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
    ],
)
def test_bad_requests(body: dict, param: str) -> None:
    with pytest.raises(GatewayError) as info:
        parse(body)
    err = info.value
    assert err.kind == "invalid_request" and err.status == 400 and err.param == param
    status, rendered = CODEC.render_error(err)
    assert (
        status == 400 and rendered["error"]["type"] == "invalid_request_error" and rendered["error"]["param"] == param
    )
    assert set(rendered["error"]) == {"message", "type", "param", "code"}


def test_render_error_kinds() -> None:
    status, body = CODEC.render_error(
        GatewayError("overloaded", "busy", 529, raw="overloaded_error", origin="anthropic")
    )
    assert status == 503 and body["error"]["type"] == "server_error" and body["error"]["code"] == "overloaded"
    status, body = CODEC.render_error(
        GatewayError("rate_limit", "slow", 429, raw="rate_limit_exceeded", origin="openai-responses")
    )
    assert status == 429 and body["error"]["code"] == "rate_limit_exceeded"
    status, body = CODEC.render_error(GatewayError("authentication", "bad key", 401))
    assert status == 401 and body["error"]["code"] == "invalid_api_key"


def test_render_error_sdk_raises() -> None:
    import httpx
    import openai
    import orjson

    status, body = CODEC.render_error(GatewayError("rate_limit", "slow down", 429))
    transport = httpx.MockTransport(
        lambda r: httpx.Response(status, content=orjson.dumps(body), headers={"content-type": "application/json"})
    )
    client = openai.OpenAI(
        api_key="k", base_url="http://gw.test/v1", max_retries=0, http_client=httpx.Client(transport=transport)
    )
    with pytest.raises(openai.RateLimitError) as info:
        client.responses.create(model="m", input="x")
    assert info.value.message.endswith("slow down") or "slow down" in str(info.value)
