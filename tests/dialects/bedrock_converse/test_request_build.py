"""ChatRequest → Converse call, feature by feature; every body checked against botocore's own
``ConverseStreamRequest`` shape (the AWS SDK's validator), so a field name or nesting the service
would refuse fails here."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.bedrock_converse import CODEC
from gateway.dialects.carry import CannotCarry, judge
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

botocore_session = pytest.importorskip("botocore.session")
botocore_validate = pytest.importorskip("botocore.validate")

MODEL = botocore_session.get_session().get_service_model("bedrock-runtime")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
LLAMA = "meta.llama3-3-70b-instruct-v1:0"
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA2 = "us.amazon.nova-2-lite-v1:0"
GPT_OSS = "openai.gpt-oss-120b-1:0"
ARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def _blobs(value: Any, key: str | None = None) -> Any:
    """The JSON wire's base64 blobs as the raw bytes botocore's validator expects."""
    if isinstance(value, dict):
        return {k: _blobs(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_blobs(v) for v in value]
    if key in ("bytes", "redactedContent") and isinstance(value, str):
        return base64.b64decode(value)
    return value


def valid(call: UpstreamCall, model: str, operation: str = "ConverseStream") -> dict[str, Any]:
    """Validate the body against botocore's input shape; the body."""
    shape = MODEL.operation_model(operation).input_shape
    botocore_validate.validate_parameters({"modelId": model, **_blobs(call.body)}, shape)  # raises ParamValidationError
    return call.body


def build(req: ChatRequest, model: str = LLAMA, stream: bool = True) -> UpstreamCall:
    return CODEC.build_request(req, model, BuildOptions(stream=stream))


def user(*parts: Any) -> Message:
    return Message("user", list(parts))


def req_of(*messages: Message, **kwargs: Any) -> ChatRequest:
    return ChatRequest(
        model="text",
        messages=list(messages) or [user(TextPart("hi"))],
        dialect=kwargs.pop("dialect", "openai-chat"),
        **kwargs,
    )


# -- the path -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "stream", "path"),
    [
        (LLAMA, True, "/model/meta.llama3-3-70b-instruct-v1%3A0/converse-stream"),
        (LLAMA, False, "/model/meta.llama3-3-70b-instruct-v1%3A0/converse"),
        ("global.amazon.nova-2-lite-v1:0", True, "/model/global.amazon.nova-2-lite-v1%3A0/converse-stream"),
        (
            ARN,
            True,
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream",
        ),
        ("text", False, "/model/text/converse"),
    ],
)
def test_model_id_is_one_percent_encoded_segment(model: str, stream: bool, path: str) -> None:
    call = build(req_of(), model, stream)
    assert call.path == path and call.method == "POST"
    valid(call, model, "ConverseStream" if stream else "Converse")


# -- bodies, feature by feature ---------------------------------------------------------------
TOOL = Tool(
    "type", "Look up the weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
)

CASES: list[tuple[str, ChatRequest, str, dict[str, Any]]] = [
    ("plain text", req_of(), LLAMA, {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
    (
        "system and a system turn fold into system",
        req_of(
            user(TextPart("q")),
            Message("system", [TextPart("be brief")]),
            Message("user", [TextPart("again")]),
            system=[TextPart("You are text.")],
        ),
        LLAMA,
        {
            "system": [{"text": "You are text."}, {"text": "be brief"}],
            "messages": [{"role": "user", "content": [{"text": "q"}, {"text": "again"}]}],
        },
    ),
    (
        "inference config",
        req_of(max_tokens=300, temperature=0.2, top_p=0.9, stop=["END", ""]),
        LLAMA,
        {"inferenceConfig": {"maxTokens": 300, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]}},
    ),
    ("temperature above 1 is clamped", req_of(temperature=1.7), LLAMA, {"inferenceConfig": {"temperature": 1.0}}),
    (
        "tools with auto choice",
        req_of(tools=[TOOL], tool_choice=ToolChoice("auto")),
        LLAMA,
        {
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": "type",
                            "inputSchema": {"json": TOOL.parameters},
                            "description": "Look up the weather",
                        }
                    }
                ],
                "toolChoice": {"auto": {}},
            }
        },
    ),
    (
        "required is any",
        req_of(tools=[TOOL], tool_choice=ToolChoice("required")),
        LLAMA,
        {"toolConfig.toolChoice": {"any": {}}},
    ),
    (
        "a named tool",
        req_of(tools=[TOOL], tool_choice=ToolChoice("tool", name="type")),
        LLAMA,
        {"toolConfig.toolChoice": {"tool": {"name": "type"}}},
    ),
    (
        "required among one allowed",
        req_of(tools=[TOOL], tool_choice=ToolChoice("required", allowed=["type"])),
        LLAMA,
        {"toolConfig.toolChoice": {"tool": {"name": "type"}}},
    ),
    (
        "none without tool history sends no tools",
        req_of(tools=[TOOL], tool_choice=ToolChoice("none")),
        LLAMA,
        {"toolConfig": None},
    ),
    (
        "strict tools and a schema without type",
        req_of(tools=[Tool("text", None, {"properties": {}}, strict=True)]),
        LLAMA,
        {
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": "text",
                            "inputSchema": {"json": {"type": "object", "properties": {}}},
                            "strict": True,
                        }
                    }
                ]
            }
        },
    ),
    (
        "a tool loop: toolUse then toolResult first in the user turn",
        req_of(
            user(TextPart("weather?")),
            Message("assistant", [TextPart("Checking."), ToolCallPart("tooluse_1", "type", '{"city":"Paris"}')]),
            Message(
                "user",
                [
                    TextPart("and hurry"),
                    ToolResultPart("tooluse_1", [TextPart("18C")]),
                    ToolResultPart("tooluse_2", [], is_error=True),
                ],
            ),
            tools=[TOOL],
        ),
        LLAMA,
        {
            "messages": [
                {"role": "user", "content": [{"text": "weather?"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"text": "Checking."},
                        {"toolUse": {"toolUseId": "tooluse_1", "name": "type", "input": {"city": "Paris"}}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18C"}]}},
                        {"toolResult": {"toolUseId": "tooluse_2", "content": [], "status": "error"}},
                        {"text": "and hurry"},
                    ],
                },
            ]
        },
    ),
    (
        "tool history without declared tools gets minimal declarations",
        req_of(
            user(TextPart("q")),
            Message("assistant", [ToolCallPart("t1", "text", "")]),
            user(ToolResultPart("t1", [TextPart("ok")])),
        ),
        LLAMA,
        {
            "toolConfig": {
                "tools": [{"toolSpec": {"name": "text", "inputSchema": {"json": {"type": "object", "properties": {}}}}}]
            }
        },
    ),
    (
        "images: base64, data URL, s3",
        req_of(
            user(
                ImagePart("image/png", PNG),
                ImagePart(url=f"data:image/jpg;base64,{PNG}"),
                ImagePart("image/webp", url="s3://bucket/cat.webp"),
                TextPart("what?"),
            )
        ),
        LLAMA,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"image": {"format": "png", "source": {"bytes": PNG}}},
                        {"image": {"format": "jpeg", "source": {"bytes": PNG}}},
                        {"image": {"format": "webp", "source": {"s3Location": {"uri": "s3://bucket/cat.webp"}}}},
                        {"text": "what?"},
                    ],
                }
            ]
        },
    ),
    (
        "documents get a format and a valid unique name; audio",
        req_of(
            user(
                FilePart("application/pdf", PDF, filename="Q3 report (final).v2.pdf"),
                FilePart("text/plain", PDF, filename="Q3 report (final).v2.txt"),
                FilePart("audio/mpeg", PDF),
            )
        ),
        LLAMA,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"document": {"format": "pdf", "name": "Q3 report (final)-v2", "source": {"bytes": PDF}}},
                        {"document": {"format": "txt", "name": "Q3 report (final)-v2 (2)", "source": {"bytes": PDF}}},
                        {"audio": {"format": "mp3", "source": {"bytes": PDF}}},
                    ],
                }
            ]
        },
    ),
    (
        "JSON schema output",
        req_of(
            response_format={
                "type": "json_schema",
                "name": "answer",
                "schema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        ),
        LLAMA,
        {
            "outputConfig": {
                "textFormat": {
                    "type": "json_schema",
                    "structure": {
                        "jsonSchema": {
                            "schema": '{"type":"object","properties":{"text":{"type":"string"}}}',
                            "name": "answer",
                        }
                    },
                }
            }
        },
    ),
    (
        "Claude: thinking budget in additionalModelRequestFields, maxTokens always sent, top_k",
        req_of(thinking=Thinking(enabled=True, budget_tokens=4000), max_tokens=16000),
        CLAUDE,
        {
            "inferenceConfig": {"maxTokens": 16000},
            "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 4000}},
        },
    ),
    (
        "Claude: an effort becomes a budget clamped under maxTokens; temperature and low top_p dropped",
        req_of(thinking=Thinking(enabled=True, effort="high"), max_tokens=5000, temperature=0.5, top_p=0.5, top_k=5),
        CLAUDE,
        {
            "inferenceConfig": {"maxTokens": 5000},
            "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 4999}},
            "dropped": ["top_k", "temperature", "top_p"],
        },
    ),
    (
        "Claude: default maxTokens and top_k",
        req_of(top_k=40),
        CLAUDE,
        {"inferenceConfig": {"maxTokens": 8192}, "additionalModelRequestFields": {"top_k": 40}},
    ),
    (
        "Claude by ARN; cache points after cache_control blocks; stop_sequence asked back",
        req_of(
            user(TextPart("long doc", cache_control={"type": "ephemeral", "ttl": "1h"})),
            system=[TextPart("sys", cache_control={"type": "ephemeral"})],
            stop=["END"],
        ),
        ARN,
        {
            "system": [{"text": "sys"}, {"cachePoint": {"type": "default"}}],
            "messages": [
                {"role": "user", "content": [{"text": "long doc"}, {"cachePoint": {"type": "default", "ttl": "1h"}}]}
            ],
            "additionalModelResponseFieldPaths": ["/stop_sequence"],
        },
    ),
    (
        "no cache points for models that do not cache",
        req_of(user(TextPart("doc", cache_control={"type": "ephemeral"}))),
        LLAMA,
        {"messages": [{"role": "user", "content": [{"text": "doc"}]}]},
    ),
    (
        "Claude: forced tool use switches thinking off",
        req_of(thinking=Thinking(enabled=True, effort="low"), tools=[TOOL], tool_choice=ToolChoice("required")),
        CLAUDE,
        {"additionalModelRequestFields": None, "dropped": ["thinking"]},
    ),
    (
        "Claude 4.6+: adaptive thinking with the effort in output_config",
        req_of(thinking=Thinking(enabled=True, budget_tokens=30000)),
        "global.anthropic.claude-opus-4-6-v1",
        {"additionalModelRequestFields": {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}},
    ),
    (
        "Claude 4.7 adaptive without an effort",
        req_of(thinking=Thinking(enabled=True)),
        "us.anthropic.claude-opus-4-7",
        {"additionalModelRequestFields": {"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}},
    ),
    (
        "Claude 4.5 refuses temperature with top_p: temperature kept",
        req_of(temperature=0.3, top_p=0.8),
        CLAUDE,
        {"inferenceConfig": {"maxTokens": 8192, "temperature": 0.3}, "dropped": ["top_p"]},
    ),
    (
        "Claude 3.x takes both",
        req_of(temperature=0.3, top_p=0.8),
        "anthropic.claude-3-5-haiku-20241022-v1:0",
        {"inferenceConfig": {"maxTokens": 8192, "temperature": 0.3, "topP": 0.8}, "dropped": []},
    ),
    (
        "Nova 2 reasoning effort",
        req_of(thinking=Thinking(enabled=True, effort="xhigh"), top_k=20),
        NOVA2,
        {
            "additionalModelRequestFields": {
                "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"},
                "inferenceConfig": {"topK": 20},
            }
        },
    ),
    (
        "gpt-oss reasoning effort",
        req_of(thinking=Thinking(enabled=True, budget_tokens=2000)),
        GPT_OSS,
        {"additionalModelRequestFields": {"reasoning_effort": "low"}},
    ),
    (
        "other models: reasoning and top_k recorded as dropped",
        req_of(thinking=Thinking(enabled=True, effort="medium"), top_k=3),
        LLAMA,
        {"additionalModelRequestFields": None, "dropped": ["thinking", "top_k"]},
    ),
    (
        "thinking off asks nothing",
        req_of(thinking=Thinking(enabled=False)),
        CLAUDE,
        {"additionalModelRequestFields": None, "dropped": []},
    ),
]


def _at(body: dict[str, Any], dotted: str) -> Any:
    value: Any = body
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


@pytest.mark.parametrize(("label", "req", "model", "want"), CASES, ids=[c[0] for c in CASES])
def test_body(label: str, req: ChatRequest, model: str, want: dict[str, Any]) -> None:
    call = build(req, model)
    body = valid(call, model)
    for key, value in want.items():
        if key == "dropped":
            assert call.dropped == value
        else:
            assert _at(body, key) == value, key
    assert "modelId" not in body and "stream" not in body


def test_reasoning_replayed_only_when_converse_signed_it() -> None:
    assistant = Message(
        "assistant",
        [
            ThinkingPart("mine", signature="sig-converse", origin="bedrock-converse"),
            ThinkingPart("", redacted_data=base64.b64encode(b"opaque").decode(), origin="bedrock-converse"),
            ThinkingPart("anthropic's", signature="sig-anthropic", origin="anthropic"),
            ThinkingPart("unsigned", origin="bedrock-converse"),
            ToolCallPart("t1", "type", "{}"),
        ],
    )
    req = req_of(
        user(TextPart("q")),
        assistant,
        user(ToolResultPart("t1", [TextPart("ok")])),
        tools=[TOOL],
        thinking=Thinking(enabled=True, budget_tokens=2048),
    )
    call = build(req, CLAUDE)
    body = valid(call, CLAUDE)
    assert body["messages"][1]["content"][:2] == [
        {"reasoningContent": {"reasoningText": {"text": "mine", "signature": "sig-converse"}}},
        {"reasoningContent": {"redactedContent": base64.b64encode(b"opaque").decode()}},
    ]
    assert len(body["messages"][1]["content"]) == 3
    assert (
        body["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 2048
    )  # the loop is signed: thinking stays


def test_claude_thinking_dropped_when_the_tool_loop_is_unsigned() -> None:
    req = req_of(
        user(TextPart("q")),
        Message("assistant", [ToolCallPart("t1", "type", "{}")]),
        user(ToolResultPart("t1", [TextPart("ok")])),
        tools=[TOOL],
        thinking=Thinking(enabled=True, effort="low"),
    )
    call = build(req, CLAUDE)
    valid(call, CLAUDE)
    assert "additionalModelRequestFields" not in call.body and call.dropped == ["thinking"]


def test_tool_choice_none_with_tool_history_keeps_tools_and_says_so() -> None:
    req = req_of(
        user(TextPart("q")),
        Message("assistant", [ToolCallPart("t1", "type", "{}")]),
        user(ToolResultPart("t1", [TextPart("ok")])),
        tools=[TOOL],
        tool_choice=ToolChoice("none"),
    )
    call = build(req)
    valid(call, LLAMA)
    assert "toolChoice" not in call.body["toolConfig"] and call.dropped == ["tool_choice"]


def test_unknown_media_types_are_left_out_and_recorded() -> None:
    call = build(req_of(user(TextPart("see"), ImagePart("image/tiff", PNG), FilePart("application/zip", PDF))))
    valid(call, LLAMA)
    assert call.body["messages"][0]["content"] == [{"text": "see"}]
    assert call.dropped == ["messages.image", "messages.file"]


# -- what cannot be carried (fields.py, judged before anything is sent) ----------------------------
@pytest.mark.parametrize(
    ("field", "req"),
    [
        ("parallel_tool_calls", req_of(tools=[TOOL], parallel_tool_calls=False)),
        (
            "tool_choice.allowed",
            req_of(tools=[TOOL, Tool("text")], tool_choice=ToolChoice("required", allowed=["type", "text"])),
        ),
        ("response_format.json", req_of(response_format={"type": "json"})),
        ("messages.file_url", req_of(user(ImagePart(url="https://example.test/cat.png")))),
        ("messages.file_url", req_of(user(FilePart("application/pdf", url="gs://bucket/a.pdf")))),
        ("messages.file_url", req_of(user(ToolResultPart("t", [ImagePart(url="http://example.test/x.png")])))),
        ("messages.assistant_media", req_of(user(TextPart("q")), Message("assistant", [ImagePart("image/png", PNG)]))),
    ],
)
def test_refused(field: str, req: ChatRequest) -> None:
    with pytest.raises(CannotCarry) as info:
        judge(req, CODEC.limits, ())
    assert info.value.field == field


def test_advisory_fields_are_dropped_and_a_dropped_url_image_is_left_out() -> None:
    req = req_of(user(TextPart("q"), ImagePart(url="https://example.test/cat.png")), user="u-1", metadata={"k": "v"})
    assert judge(req, CODEC.limits, ("messages.file_url",)) == ["messages.file_url", "user", "metadata"]
    call = build(req)
    valid(call, LLAMA)
    assert call.body["messages"] == [{"role": "user", "content": [{"text": "q"}]}]


def test_carried_choices_are_not_refused() -> None:
    assert (
        judge(
            req_of(tools=[TOOL], tool_choice=ToolChoice("required", allowed=["type"]), top_k=3, stop=["x"]),
            CODEC.limits,
            (),
        )
        == []
    )


def test_reasoning_leads_the_assistant_turn() -> None:
    """A Chat caller's history has the reasoning after the text; Claude wants it first."""
    assistant = Message(
        "assistant",
        [
            TextPart("Checking."),
            ThinkingPart("", signature="sig", origin="bedrock-converse"),
            ToolCallPart("t1", "type", "{}"),
        ],
    )
    call = build(
        req_of(user(TextPart("q")), assistant, user(ToolResultPart("t1", [TextPart("ok")])), tools=[TOOL]), CLAUDE
    )
    body = valid(call, CLAUDE)
    assert [next(iter(b)) for b in body["messages"][1]["content"]] == ["reasoningContent", "text", "toolUse"]


def test_tool_ids_outside_the_pattern_become_one_stable_digest() -> None:
    odd = "call/" + "x" * 80
    req = req_of(
        user(TextPart("q")),
        Message("assistant", [ToolCallPart(odd, "type", "{}"), ToolCallPart("call_ok.1:2", "text", "{}")]),
        user(ToolResultPart(odd, [TextPart("a")]), ToolResultPart("call_ok.1:2", [TextPart("b")])),
        tools=[TOOL],
    )
    body = valid(build(req), LLAMA)
    use_ids = [b["toolUse"]["toolUseId"] for b in body["messages"][1]["content"]]
    result_ids = [b["toolResult"]["toolUseId"] for b in body["messages"][2]["content"]]
    assert (
        use_ids == result_ids and use_ids[1] == "call_ok.1:2" and use_ids[0].startswith("gw_") and len(use_ids[0]) <= 64
    )
