"""Anthropic request parsing (caller JSON → IR) and building (IR → upstream call)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.dialects.anthropic import CODEC
from gateway.dialects.base import BuildOptions, RequestMeta
from gateway.errors import GatewayError
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)


def parse(body: dict[str, Any], headers: dict[str, str] | None = None) -> ChatRequest:
    return CODEC.parse_request(body, RequestMeta(headers=headers or {}))


def build(req: ChatRequest, **options: Any) -> Any:
    return CODEC.build_request(req, "claude-up", BuildOptions(**options))


FULL = {
    "model": "smart",
    "max_tokens": 1000,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "system", "content": "Mid-conversation system note."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"},
                    "title": "a.pdf",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sigA"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "18C"}],
                    "is_error": False,
                },
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "failed", "is_error": True},
            ],
        },
    ],
    "tools": [
        {
            "name": "get_weather",
            "description": "Weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "temperature": 0.5,
    "top_p": 0.9,
    "top_k": 40,
    "stop_sequences": ["###"],
    "stream": True,
    "metadata": {"user_id": "u-42"},
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
    "service_tier": "auto",
}


def test_parse_full_request() -> None:
    req = parse(
        FULL,
        {
            "anthropic-beta": "context-management-2025-06-27,fine-grained-tool-streaming-2025-05-14",
            "anthropic-version": "2023-06-01",
        },
    )
    assert req.model == "smart" and req.max_tokens == 1000 and req.stream is True
    assert req.system == [TextPart("Be brief.", {"type": "ephemeral"})]
    assert req.messages[0] == Message("system", [TextPart("Mid-conversation system note.")])
    user = req.messages[1].content
    assert user[1] == ImagePart("image/png", "iVBOR") and user[2] == ImagePart(url="https://x.test/a.png")
    assert user[3] == FilePart("application/pdf", "JVBER", filename="a.pdf")
    assistant = req.messages[2].content
    assert assistant[0] == ThinkingPart("hmm", "sigA", "anthropic")
    assert assistant[1] == ThinkingPart(redacted_data="opaque", origin="anthropic")
    assert assistant[2] == ToolCallPart("toolu_1", "get_weather", '{"city":"Paris"}')
    results = req.messages[3].content
    assert results[0] == ToolResultPart("toolu_1", [TextPart("18C")], False)
    assert results[1] == ToolResultPart("toolu_2", [TextPart("failed")], True)
    assert req.tools == [Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})]
    assert req.tool_choice == ToolChoice("required") and req.parallel_tool_calls is False
    assert (req.temperature, req.top_p, req.top_k, req.stop) == (0.5, 0.9, 40, ["###"])
    assert req.user == "u-42" and req.metadata == {"user_id": "u-42"}
    assert req.thinking == Thinking(enabled=True, budget_tokens=2048, include_thoughts=True)
    assert req.extras["anthropic"] == {
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "service_tier": "auto",
    }
    assert req.headers == {"anthropic-beta": "context-management-2025-06-27,fine-grained-tool-streaming-2025-05-14"}
    assert req.dialect == "anthropic"


def test_same_dialect_round_trip_keeps_everything() -> None:
    req = parse(FULL, {"anthropic-beta": "context-management-2025-06-27,dropme"})
    call = build(req, dropped_betas=("dropme",))
    body = call.body
    assert call.path == "/v1/messages" and call.headers == {"anthropic-beta": "context-management-2025-06-27"}
    assert body["model"] == "claude-up" and body["stream"] is True and body["max_tokens"] == 1000
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Mid-conversation system note."},
    ]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sigA"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "failed", "is_error": True},
    ]
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
    }
    assert body["messages"][0]["content"][2] == {
        "type": "image",
        "source": {"type": "url", "url": "https://x.test/a.png"},
    }
    assert body["messages"][0]["content"][3]["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": "JVBER",
    }
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["tools"] == FULL["tools"]
    assert body["context_management"] == FULL["context_management"] and body["service_tier"] == "auto"
    assert body["metadata"] == {"user_id": "u-42"} and body["stop_sequences"] == ["###"]
    # forced tool use is incompatible with thinking: thinking dropped
    assert "thinking" not in body


def test_tool_extras_and_adaptive_thinking_pass_through() -> None:
    tools = [
        {
            "name": "f",
            "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"},
            "defer_loading": True,
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    req = parse(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": tools,
            "thinking": {"type": "adaptive"},
            "output_config": {"effort": "high"},
        }
    )
    assert [t.name for t in req.tools] == ["f"]
    assert req.thinking == Thinking(enabled=True, effort="high", include_thoughts=True)
    body = build(req).body
    assert body["tools"] == tools
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "high"}
    assert body["max_tokens"] == 8192  # missing max_tokens: provider default


def test_system_turns_merging_and_results_first() -> None:
    req = ChatRequest(
        model="m",
        dialect="openai-chat",
        system=[TextPart("sys")],
        messages=[
            Message("user", [TextPart("a")]),
            Message("user", [TextPart("b")]),
            Message("system", [TextPart("late sys")]),
            Message("assistant", [TextPart(""), ToolCallPart("c1", "f", ""), ToolCallPart("c2", "g", '{"x":1}')]),
            Message("user", [TextPart("also this")]),
            Message("user", [ToolResultPart("c1", [TextPart("r1")]), ToolResultPart("c2", [])]),
        ],
        tools=[Tool("f", parameters={"properties": {}})],
        tool_choice=ToolChoice("tool", "f"),
        parallel_tool_calls=False,
        user="someone",
        metadata={"k": "v"},
    )
    body = build(req).body
    assert body["system"] == [{"type": "text", "text": "sys"}, {"type": "text", "text": "late sys"}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
                {"type": "tool_use", "id": "c2", "name": "g", "input": {"x": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
                {"type": "tool_result", "tool_use_id": "c2"},
                {"type": "text", "text": "also this"},
            ],
        },
    ]
    assert body["tools"] == [{"name": "f", "input_schema": {"type": "object", "properties": {}}}]
    assert body["tool_choice"] == {"type": "tool", "name": "f", "disable_parallel_tool_use": True}
    assert body["metadata"] == {"user_id": "someone"}


@pytest.mark.parametrize(
    "mode,want",
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("tool", {"type": "tool", "name": "f"}),
    ],
)
def test_tool_choice_mapping(mode: str, want: dict) -> None:
    req = ChatRequest(
        model="m",
        messages=[Message("user", [TextPart("x")])],
        tools=[Tool("f")],
        tool_choice=ToolChoice(mode, "f" if mode == "tool" else None),
    )  # type: ignore[arg-type]
    assert build(req).body["tool_choice"] == want


def test_thinking_budget_rules() -> None:
    def thinking_of(**kw: Any) -> Any:
        max_tokens = kw.pop("max_tokens", None)
        req = ChatRequest(
            model="m",
            dialect="openai-chat",
            messages=[Message("user", [TextPart("x")])],
            thinking=Thinking(**kw),
            max_tokens=max_tokens,
            temperature=0.2,
        )
        return build(req).body

    assert thinking_of(effort="low", max_tokens=4096)["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    body = thinking_of(effort="high", max_tokens=4096)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4095}  # budget < max_tokens
    assert "temperature" not in body  # Anthropic rejects temperature with thinking
    assert thinking_of(enabled=True, budget_tokens=100, max_tokens=4096)["thinking"]["budget_tokens"] == 1024
    assert "thinking" not in thinking_of(enabled=True, budget_tokens=2000, max_tokens=16)
    assert thinking_of(enabled=False)["thinking"] == {"type": "disabled"}
    assert "thinking" not in thinking_of(effort="none")
    assert thinking_of(enabled=True)["thinking"] == {"type": "enabled", "budget_tokens": 8191}


def test_thinking_dropped_when_tool_turn_lacks_anthropic_signature() -> None:
    history = [
        Message("user", [TextPart("weather?")]),
        Message("assistant", [ThinkingPart("t", "gemsig", "gemini"), ToolCallPart("c1", "f", "{}")]),
        Message("user", [ToolResultPart("c1", [TextPart("ok")])]),
    ]
    req = ChatRequest(
        model="m",
        dialect="gemini",
        messages=history,
        thinking=Thinking(enabled=True, budget_tokens=2048),
        max_tokens=4096,
    )
    body = build(req).body
    assert "thinking" not in body
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "f", "input": {}}
    ]  # foreign thought dropped
    history[1].content[0] = ThinkingPart("t", "antsig", "anthropic")
    body = build(req).body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["messages"][1]["content"][0] == {"type": "thinking", "thinking": "t", "signature": "antsig"}
    # an older tool loop (before a real user turn) does not matter
    req.messages = [
        Message("user", [TextPart("q")]),
        Message("assistant", [ToolCallPart("c0", "f", "{}")]),
        Message("user", [ToolResultPart("c0", [TextPart("r")])]),
        Message("assistant", [TextPart("done")]),
        Message("user", [TextPart("next")]),
    ]
    assert "thinking" in build(req).body


def test_packed_signature_from_caller_round_trips() -> None:
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "gw~gemini~Q2lR"},
                    {"type": "text", "text": "yo"},
                ],
            },
            {"role": "user", "content": "more"},
        ],
    }
    req = parse(body)
    assert req.messages[1].content[0] == ThinkingPart("t", "Q2lR", "gemini")
    built = build(req).body
    assert built["messages"][1]["content"] == [
        {"type": "text", "text": "yo"}
    ]  # Anthropic cannot verify Gemini's signature


def test_images_and_files_from_other_dialects() -> None:
    req = ChatRequest(
        model="m",
        messages=[
            Message(
                "user",
                [
                    ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
                    ImagePart(url="http://x/y.png"),
                    FilePart("text/plain", "aGk=", filename="n.txt"),
                    FilePart(url="https://x/d.pdf"),
                ],
            )
        ],
    )
    content = build(req).body["messages"][0]["content"]
    assert content[0]["source"] == {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}
    assert content[1]["source"] == {"type": "url", "url": "http://x/y.png"}
    assert content[2] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "text/plain", "data": "aGk="},
        "title": "n.txt",
    }
    assert content[3]["source"] == {"type": "url", "url": "https://x/d.pdf"}


def test_beta_header_only_from_anthropic_callers() -> None:
    req = ChatRequest(
        model="m", messages=[Message("user", [TextPart("x")])], dialect="openai-chat", headers={"anthropic-beta": "x"}
    )
    assert build(req).headers == {}


def test_unknown_top_level_field_kept_in_extras() -> None:
    req = parse({"model": "m", "messages": [], "max_tokens": 5, "brand_new_knob": {"a": 1}})
    assert req.extras["anthropic"] == {"brand_new_knob": {"a": 1}}
    assert build(req).body["brand_new_knob"] == {"a": 1}


def test_minimal_request_without_max_tokens() -> None:
    req = parse({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert req.max_tokens is None and req.stream is False
    body = build(req, default_max_tokens=1234).body
    assert body == {
        "model": "claude-up",
        "max_tokens": 1234,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


BAD = [
    ({"messages": []}, "model"),
    ({"model": 3, "messages": []}, "model"),
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": "hi"}, "messages"),
    ({"model": "m", "messages": ["hi"]}, "messages[0]"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "user"}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
    (
        {
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]}],
        },
        "messages[0].content[0].source.media_type",
    ),
    (
        {
            "model": "m",
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": "{}"}]}
            ],
        },
        "messages[0].content[0].input",
    ),
    (
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
        "messages[0].content[0].tool_use_id",
    ),
    ({"model": "m", "messages": [], "max_tokens": "10"}, "max_tokens"),
    ({"model": "m", "messages": [], "max_tokens": 0}, "max_tokens"),
    ({"model": "m", "messages": [], "temperature": "hot"}, "temperature"),
    ({"model": "m", "messages": [], "system": 5}, "system"),
    ({"model": "m", "messages": [], "system": [{"type": "image"}]}, "system[0].type"),
    ({"model": "m", "messages": [], "tools": [{"name": "f"}]}, "tools[0].input_schema"),
    ({"model": "m", "messages": [], "tools": [{"input_schema": {}}]}, "tools[0].name"),
    ({"model": "m", "messages": [], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"model": "m", "messages": [], "tool_choice": {"type": "tool"}}, "tool_choice.name"),
    ({"model": "m", "messages": [], "thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
    ({"model": "m", "messages": [], "thinking": {"type": "maybe"}}, "thinking.type"),
    ({"model": "m", "messages": [], "stop_sequences": [1]}, "stop_sequences"),
    ({"model": "m", "messages": [], "stream": "yes"}, "stream"),
    ({"model": "m", "messages": [], "metadata": {"user_id": 5}}, "metadata.user_id"),
]


@pytest.mark.parametrize("body,param", BAD, ids=[p for _, p in BAD])
def test_bad_input_is_400_naming_the_field(body: dict, param: str) -> None:
    with pytest.raises(GatewayError) as info:
        parse(body)
    err = info.value
    assert err.kind == "invalid_request" and err.status == 400
    assert param in err.message
    status, rendered = CODEC.render_error(err)
    assert status == 400
    assert rendered["type"] == "error" and rendered["error"]["type"] == "invalid_request_error"
    assert orjson.dumps(rendered)
