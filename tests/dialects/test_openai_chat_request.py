"""openai-chat request parsing and building: IR mapping, round trips, and 400s naming the field."""

from __future__ import annotations

import copy

import pytest

from gateway.dialects.base import BuildOptions, RequestMeta
from gateway.dialects.openai_chat import CODEC
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

FULL = {
    "model": "gpt-4.1",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "reasoning_content": "The user wants weather.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [{"type": "text", "text": "12:"}, {"type": "text", "text": "00"}],
        },
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Thanks"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": True,
            },
        },
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
    ],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": False,
    "max_completion_tokens": 500,
    "temperature": 0.5,
    "top_p": 0.9,
    "stop": "END",
    "stream": True,
    "stream_options": {"include_usage": True},
    "user": "u-1",
    "metadata": {"k": "v"},
    "store": True,
    "reasoning_effort": "low",
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
    },
    "n": 1,
    "seed": 42,
    "logprobs": True,
}


def test_parse_full_request() -> None:
    req = CODEC.parse_request(copy.deepcopy(FULL), META)
    assert req.model == "gpt-4.1" and req.dialect == "openai-chat"
    assert req.system == [TextPart("Be brief."), TextPart("Use tools.")]
    user = req.messages[0]
    assert user.role == "user"
    assert user.content[0] == TextPart("What is this?")
    assert user.content[1] == ImagePart(media_type="image/png", data="iVBORw0KGgo=")
    assert user.content[2] == ImagePart(url="https://example.com/cat.png")
    assert user.content[3] == FilePart(media_type="audio/wav", data="UklGRg==")
    assert user.content[4] == FilePart(media_type="application/pdf", data="JVBERi0=", filename="a.pdf")
    assistant = req.messages[1]
    assert assistant.content == [
        ThinkingPart(text="The user wants weather."),
        TextPart("Let me look."),
        ToolCallPart("call_1", "get_weather", '{"city":"Paris"}'),
        ToolCallPart("call_2", "get_time", "{}"),
    ]
    results = req.messages[2]
    assert results.role == "user"
    assert results.content == [
        ToolResultPart("call_1", [TextPart("18C")], name="get_weather"),
        ToolResultPart("call_2", [TextPart("12:00")], name="get_time"),
    ]
    assert req.messages[3] == Message("system", [TextPart("Answer in French.")])
    assert req.messages[4] == Message("user", [TextPart("Thanks")])
    assert [t.name for t in req.tools] == ["get_weather", "get_time"] and req.tools[0].strict is True
    assert req.tool_choice.mode == "tool" and req.tool_choice.name == "get_weather"
    assert req.parallel_tool_calls is False and req.max_tokens == 500
    assert (req.temperature, req.top_p, req.stop) == (0.5, 0.9, ["END"])
    assert req.stream and req.include_usage and req.user == "u-1" and req.metadata == {"k": "v"} and req.store
    assert req.thinking == Thinking(enabled=True, effort="low")
    assert req.response_format == {
        "type": "json_schema",
        "schema": {"type": "object"},
        "name": "answer",
        "strict": True,
    }
    assert req.extras == {"openai-chat": {"seed": 42, "logprobs": True}}


def test_build_request() -> None:
    req = CODEC.parse_request(copy.deepcopy(FULL), META)
    call = CODEC.build_request(req, "gpt-4.1-2025-04-14", BuildOptions())
    assert call.path == "/chat/completions" and call.method == "POST"
    b = call.body
    assert b["model"] == "gpt-4.1-2025-04-14"
    assert b["stream"] is True and b["stream_options"] == {"include_usage": True}
    assert b["max_completion_tokens"] == 500 and "max_tokens" not in b
    assert b["messages"][0] == {"role": "system", "content": "Be brief.\n\nUse tools."}
    user = b["messages"][1]["content"]
    assert user[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assert user[2] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert user[3] == {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    assert user[4] == {
        "type": "file",
        "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
    }
    assert b["messages"][2] == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        ],
    }
    assert b["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    assert b["messages"][4] == {"role": "tool", "tool_call_id": "call_2", "content": "12:00"}
    assert b["messages"][5] == {"role": "system", "content": "Answer in French."}
    assert b["messages"][6] == {"role": "user", "content": "Thanks"}
    assert b["tools"][0]["function"]["strict"] is True and "description" not in b["tools"][1]["function"]
    assert b["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert b["parallel_tool_calls"] is False
    assert (b["temperature"], b["top_p"], b["stop"], b["user"]) == (0.5, 0.9, ["END"], "u-1")
    assert b["metadata"] == {"k": "v"} and b["store"] is True
    assert b["reasoning_effort"] == "low"
    assert b["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
    }
    assert b["seed"] == 42 and b["logprobs"] is True
    # parse(build(x)) keeps the conversation
    again = CODEC.parse_request({**b, "model": "gpt-4.1"}, META)

    def strip(messages):
        return [[p for p in m.content if not isinstance(p, ThinkingPart)] for m in messages]

    assert strip(again.messages) == strip(req.messages)
    assert again.system == [TextPart("Be brief.\n\nUse tools.")]
    assert again.extras == req.extras and again.response_format == req.response_format


def test_build_from_other_dialect_ir() -> None:
    req = ChatRequest(
        model="x",
        messages=[
            Message("user", [TextPart("hi")]),
            Message(
                "assistant",
                [ThinkingPart("secret", signature="sig", origin="anthropic"), ToolCallPart("toolu_1", "f", "")],
            ),
            Message("user", [ToolResultPart("toolu_1", [TextPart("ok")]), TextPart("and now?")]),
        ],
        thinking=Thinking(enabled=True, budget_tokens=20000),
        metadata={"a": "b"},
        response_format={"type": "json"},
    )
    b = CODEC.build_request(req, "gpt-5", BuildOptions()).body
    assert b["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"},
        {"role": "user", "content": "and now?"},
    ]
    assert b["reasoning_effort"] == "high"
    assert "metadata" not in b and "parallel_tool_calls" not in b and "tools" not in b
    assert b["response_format"] == {"type": "json_object"}


def test_legacy_max_tokens_and_effort_none() -> None:
    req = CODEC.parse_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 7,
            "reasoning_effort": "none",
            "response_format": {"type": "json_object"},
        },
        META,
    )
    assert req.max_tokens == 7 and req.thinking == Thinking(enabled=False) and req.response_format == {"type": "json"}
    assert "reasoning_effort" not in CODEC.build_request(req, "m", BuildOptions()).body


def test_system_only_leading_run_goes_to_system() -> None:
    req = CODEC.parse_request(
        {"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "developer", "content": "late"}]}, META
    )
    assert req.system == [] and req.messages[1] == Message("system", [TextPart("late")])


BAD = [
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": "hi"}, "messages"),
    ({"model": 5, "messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": "m", "messages": [{"content": "x"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "user"}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages[0].content[0].type"),
    (
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        "messages[0].content[0].image_url.url",
    ),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    (
        {
            "model": "m",
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
                }
            ],
        },
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        {
            "model": "m",
            "messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}],
        },
        "messages[0].tool_calls[0].id",
    ),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
    (
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": "9"},
        "max_completion_tokens",
    ),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": [1]}, "stop"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
    (
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": 1}},
        "stream_options.include_usage",
    ),
    (
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "custom", "custom": {}}]},
        "tools[0].type",
    ),
    (
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]},
        "tools[0].function.name",
    ),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "always"}, "tool_choice"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"}, "reasoning_effort"),
    (
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}},
        "response_format.type",
    ),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "metadata": []}, "metadata"),
]


@pytest.mark.parametrize(("body", "param"), BAD, ids=[p for _, p in BAD])
def test_bad_request_is_400_naming_the_field(body, param) -> None:
    with pytest.raises(GatewayError) as info:
        CODEC.parse_request(body, META)
    err = info.value
    assert err.kind == "invalid_request" and err.status == 400
    assert err.param == param and param in err.message
    status, rendered = CODEC.render_error(err)
    assert status == 400
    assert rendered == {
        "error": {"message": err.message, "type": "invalid_request_error", "param": param, "code": None}
    }


def test_tool_result_images_follow_in_a_user_message() -> None:
    """A Chat tool message holds text only: the result's image comes right after, not lost."""
    from gateway.ir import ChatRequest, ImagePart, Message, TextPart, ToolCallPart, ToolResultPart

    req = ChatRequest(
        model="m",
        dialect="anthropic",
        messages=[
            Message("user", [TextPart("look")]),
            Message("assistant", [ToolCallPart("call_1", "screenshot", "{}")]),
            Message("user", [ToolResultPart("call_1", [TextPart("here"), ImagePart("image/png", "iVBORw0KGgo=")])]),
        ],
    )
    messages = CODEC.build_request(req, "gpt-4.1", BuildOptions()).body["messages"]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "here"}
    assert messages[3]["role"] == "user"
    assert messages[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
