"""Caller-side validation (issue 18, item 1): a request the caller's own API would refuse gets that
API's 400, in the caller's error shape and naming the parameter, whatever the upstream, and the
upstream receives nothing. One row per rule of each dialect's table (``dialects/*/validate.py``),
each sent through the real server to an upstream of *another* dialect (where many of these values
would be valid), plus bodies the coding agents really send, which must keep working.
"""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.server.test_bad_input import assert_shape

DROP = object()  # a patch value that removes the field

BASE: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": (
        "/v1/messages",
        {"model": "openai-chat--text", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "openai-chat": (
        "/v1/chat/completions",
        {"model": "anthropic--text", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "openai-responses": ("/v1/responses", {"model": "gemini--text", "input": "hi", "store": False}),
    "gemini": (
        "/v1beta/models/openai-chat--text:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
    "gemini-interactions": ("/v1beta/interactions", {"model": "anthropic--text", "input": "hi", "store": False}),
}

TOOL_A = {"name": "get_weather", "description": "w", "input_schema": {"type": "object", "properties": {}}}
FN_A = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
RFN_A = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
GFN_A = [{"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}]}]
USER = [{"role": "user", "content": "hi"}]

# (dialect, patch of the base body, the parameter the error must name)
CASES: list[tuple[str, dict[str, Any], str]] = [
    # anthropic: required fields
    ("anthropic", {"max_tokens": DROP}, "max_tokens"),
    ("anthropic", {"messages": []}, "messages"),
    ("anthropic", {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("anthropic", {"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
    ("anthropic", {"messages": [{"content": "hi"}]}, "messages[0].role"),
    # anthropic: ranges (valid at OpenAI, refused by Anthropic)
    ("anthropic", {"temperature": 1.5}, "temperature"),
    ("anthropic", {"temperature": -0.1}, "temperature"),
    ("anthropic", {"temperature": 1e300}, "temperature"),
    ("anthropic", {"top_p": 1.5}, "top_p"),
    ("anthropic", {"top_k": -1}, "top_k"),
    ("anthropic", {"max_tokens": 0}, "max_tokens"),
    ("anthropic", {"max_tokens": -5}, "max_tokens"),
    (
        "anthropic",
        {"thinking": {"type": "enabled", "budget_tokens": 100}, "max_tokens": 4096},
        "thinking.budget_tokens",
    ),
    (
        "anthropic",
        {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 1024},
        "thinking.budget_tokens",
    ),
    # anthropic: roles, tools
    ("anthropic", {"messages": [{"role": "developer", "content": "hi"}]}, "messages[0].role"),
    ("anthropic", {"messages": [{"role": "tool", "content": "hi"}]}, "messages[0].role"),
    (
        "anthropic",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        "messages[0].content[0].type",
    ),
    (
        "anthropic",
        {"messages": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]},
        "messages[0].content[0].type",
    ),
    ("anthropic", {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}, "messages[0].content[0].type"),
    ("anthropic", {"tools": [{**TOOL_A, "name": ""}]}, "tools[0].name"),
    ("anthropic", {"tools": [TOOL_A], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ("anthropic", {"tool_choice": {"type": "tool", "name": "get_weather"}}, "tool_choice"),
    ("anthropic", {"tool_choice": {"type": "any"}}, "tool_choice"),
    ("anthropic", {"system": [{"type": "text", "text": ""}]}, "system[0].text"),
    # openai-chat
    ("openai-chat", {"messages": []}, "messages"),
    ("openai-chat", {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("openai-chat", {"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
    ("openai-chat", {"messages": [{"role": "system", "content": None}, *USER]}, "messages[0].content"),
    ("openai-chat", {"messages": [*USER, {"role": "assistant", "content": None}, *USER]}, "messages[1].content"),
    ("openai-chat", {"messages": [{"content": "hi"}]}, "messages[0].role"),
    ("openai-chat", {"temperature": 2.5}, "temperature"),
    ("openai-chat", {"temperature": -1}, "temperature"),
    ("openai-chat", {"top_p": 1.5}, "top_p"),
    ("openai-chat", {"presence_penalty": 3}, "presence_penalty"),
    ("openai-chat", {"frequency_penalty": -2.5}, "frequency_penalty"),
    ("openai-chat", {"max_tokens": 0}, "max_tokens"),
    ("openai-chat", {"max_completion_tokens": -1}, "max_completion_tokens"),
    ("openai-chat", {"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
    ("openai-chat", {"tools": [{"type": "function", "function": {"name": ""}}]}, "tools[0].function.name"),
    (
        "openai-chat",
        {"tools": [FN_A], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        "tool_choice.function.name",
    ),
    ("openai-chat", {"tool_choice": "required"}, "tool_choice"),
    ("openai-chat", {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "tool_choice"),
    # openai-responses
    ("openai-responses", {"input": []}, "input"),
    ("openai-responses", {"input": [{"role": "user"}]}, "input[0].content"),
    ("openai-responses", {"input": [{"type": "message", "content": "hi"}]}, "input[0].role"),
    ("openai-responses", {"temperature": 2.5}, "temperature"),
    ("openai-responses", {"top_p": -0.5}, "top_p"),
    ("openai-responses", {"max_output_tokens": 0}, "max_output_tokens"),
    ("openai-responses", {"tools": [{**RFN_A, "name": ""}]}, "tools[0].name"),
    ("openai-responses", {"tools": [RFN_A], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
    ("openai-responses", {"tool_choice": "required"}, "tool_choice"),
    # gemini
    ("gemini", {"contents": []}, "contents"),
    ("gemini", {"contents": [{"role": "user", "parts": []}]}, "contents[0].parts"),
    ("gemini", {"contents": [{"role": "user"}]}, "contents[0].parts"),
    ("gemini", {"contents": [{"role": "", "parts": [{"text": "hi"}]}]}, "contents[0].role"),
    ("gemini", {"contents": [{"role": "user", "parts": [{}]}]}, "contents[0].parts[0]"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"thought": True}]}]}, "contents[0].parts[0]"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"text": None}]}]}, "contents[0].parts[0]"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"text": "hi"}, {"text": None}]}]}, "contents[0].parts[1]"),
    ("gemini", {"systemInstruction": "Be brief."}, "systemInstruction"),
    ("gemini", {"system_instruction": "Be brief."}, "system_instruction"),
    ("gemini", {"systemInstruction": {"parts": [{"text": None}]}}, "systemInstruction.parts[0]"),
    ("gemini", {"systemInstruction": {}}, "systemInstruction.parts"),
    ("gemini", {"systemInstruction": {"parts": [{}]}}, "systemInstruction.parts[0]"),
    ("gemini", {"system_instruction": {"role": "system"}}, "system_instruction.parts"),
    ("gemini", {"generationConfig": {"topP": 1.5}}, "generationConfig.topP"),
    ("gemini", {"generation_config": {"top_p": 1.5}}, "generation_config.top_p"),
    ("gemini", {"generationConfig": {"temperature": 2.5}}, "generationConfig.temperature"),
    ("gemini", {"generationConfig": {"temperature": -1}}, "generationConfig.temperature"),
    ("gemini", {"generationConfig": {"topK": -3}}, "generationConfig.topK"),
    ("gemini", {"generationConfig": {"maxOutputTokens": 0}}, "generationConfig.maxOutputTokens"),
    ("gemini", {"generationConfig": {"candidateCount": 0}}, "generationConfig.candidateCount"),
    (
        "gemini",
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": -7}}},
        "generationConfig.thinkingConfig.thinkingBudget",
    ),
    ("gemini", {"tools": [{"functionDeclarations": [{"name": ""}]}]}, "tools[0].functionDeclarations[0].name"),
    (
        "gemini",
        {"tools": GFN_A, "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["nope"]}}},
        "allowedFunctionNames",
    ),
    (
        "gemini",
        {"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}},
        "allowedFunctionNames",
    ),
    # gemini-interactions
    ("gemini-interactions", {"generation_config": {"temperature": 3}}, "generation_config.temperature"),
    ("gemini-interactions", {"generation_config": {"top_p": 2}}, "generation_config.top_p"),
    ("gemini-interactions", {"generation_config": {"max_output_tokens": 0}}, "generation_config.max_output_tokens"),
    ("gemini-interactions", {"tools": [{"type": "function", "name": ""}]}, "tools[0].name"),
]


def patched(dialect: str, patch: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(BASE[dialect][1])
    for key, value in patch.items():
        if value is DROP:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def send(gateway: Any, dialect: str, body: dict[str, Any], path: str | None = None) -> httpx.Response:
    return httpx.post(gateway.url + (path or BASE[dialect][0]), json=body, timeout=10)


def check_shape(dialect: str, status: int, response: httpx.Response) -> dict[str, Any]:
    """``assert_shape`` of test_bad_input, plus the Interactions shape ``{"error": {code, message}}``."""
    if dialect != "gemini-interactions":
        return assert_shape(dialect, status, response)
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"]["code"], str) and body["error"]["message"]
    return body


@pytest.mark.parametrize("dialect,patch,param", CASES, ids=[f"{d}-{p}-{i}" for i, (d, _, p) in enumerate(CASES)])
def test_refused_in_the_callers_terms_before_any_upstream_call(
    gateway: Any, fake: Any, dialect: str, patch: dict[str, Any], param: str
) -> None:
    before = len(fake.received)
    response = send(gateway, dialect, patched(dialect, patch))
    body = check_shape(dialect, 400, response)
    assert param in body["error"]["message"], body
    if dialect.startswith("openai"):
        assert body["error"]["param"] == param or param in (body["error"]["param"] or ""), body
    assert len(fake.received) == before, "a refused request reached the upstream"


@pytest.mark.parametrize("dialect", list(BASE))
def test_the_base_request_passes_and_reaches_the_upstream(gateway: Any, fake: Any, dialect: str) -> None:
    before = len(fake.received)
    response = send(gateway, dialect, patched(dialect, {}))
    assert response.status_code == 200, response.text
    assert len(fake.received) == before + 1


CLAUDE_CODE = {
    "model": "openai-chat--text",
    "max_tokens": 32000,
    "stream": True,
    "system": [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=1"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {"role": "system", "content": "<env>linux</env>"},
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
    ],
    "tools": [
        {
            "name": "Read",
            "description": "read",
            "input_schema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
                "additionalProperties": False,
            },
        },
        {
            "name": "DeferredToolPlaceholder",
            "description": "d",
            "input_schema": {"type": "object"},
            "defer_loading": True,
        },
    ],
    "metadata": {"user_id": '{"device_id":"' + "d" * 64 + '","account_uuid":"","session_id":"' + "s" * 36 + '"}'},
    "thinking": {"type": "adaptive", "display": "omitted"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"},
}
CLAUDE_CODE_KNOWN = {
    **CLAUDE_CODE,
    "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "omitted"},
    "messages": CLAUDE_CODE["messages"][1:],
}
CODEX = {
    "model": "anthropic--text",
    "stream": True,
    "store": False,
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "be codex"}],
            "id": "msg_1",
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}], "id": "msg_2"},
    ],
    "tools": [
        {
            "type": "function",
            "name": "exec_command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            "strict": False,
        },
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "agents",
            "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object", "properties": {}}}],
        },
        {"type": "web_search", "external_web_access": False},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"summary": "auto"},
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "k",
}
GEMINI_CLI = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "systemInstruction": {"role": "user", "parts": [{"text": "You are Gemini CLI."}]},
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "read_file",
                    "description": "r",
                    "parametersJsonSchema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
                }
            ]
        }
    ],
    "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64, "thinkingConfig": {"includeThoughts": True}},
}


@pytest.mark.parametrize(
    "dialect,path,body",
    [
        ("anthropic", "/v1/messages?beta=true", CLAUDE_CODE),
        ("anthropic", "/v1/messages?beta=true", CLAUDE_CODE_KNOWN),
        ("openai-responses", "/v1/responses", CODEX),
        ("gemini", "/v1beta/models/anthropic--text:streamGenerateContent?alt=sse", GEMINI_CLI),
    ],
    ids=["claude-code", "claude-code-known-model", "codex", "gemini-cli"],
)
def test_what_the_coding_agents_send_is_not_refused(
    gateway: Any, dialect: str, path: str, body: dict[str, Any]
) -> None:
    response = send(gateway, dialect, body, path)
    assert response.status_code == 200, response.text


CONTROL = ["a\rb", "a\nb", "a\x00b", "a\x1bb", "a\x7fb", "up-anthropic/claude\n-x"]


@pytest.mark.parametrize("model", CONTROL, ids=[repr(m) for m in CONTROL])
@pytest.mark.parametrize("dialect", ["anthropic", "openai-chat", "openai-responses", "gemini-interactions"])
def test_a_model_name_with_a_control_character_is_refused(gateway: Any, fake: Any, dialect: str, model: str) -> None:
    before = len(fake.received)
    body = check_shape(dialect, 400, send(gateway, dialect, {**BASE[dialect][1], "model": model}))
    assert "control character" in body["error"]["message"]
    assert len(fake.received) == before


@pytest.mark.parametrize("encoded", ["a%0Db", "a%0Ab", "a%00b", "a%1Bb", "up-openai-chat/gpt%0A"])
@pytest.mark.parametrize("action", ["generateContent", "streamGenerateContent?alt=sse", "countTokens"])
def test_a_gemini_path_model_with_a_control_character_is_refused(
    gateway: Any, fake: Any, encoded: str, action: str
) -> None:
    before = len(fake.received)
    response = httpx.post(f"{gateway.url}/v1beta/models/{encoded}:{action}", json=BASE["gemini"][1], timeout=10)
    body = assert_shape("gemini", 400, response)
    assert "control character" in body["error"]["message"]
    assert len(fake.received) == before
