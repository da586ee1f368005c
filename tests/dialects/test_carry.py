"""Every IR field × every upstream builder: carried, refused with a 400, or dropped and reported.

For each setting a caller can make (a mutation of a plain request), each upstream dialect's
builder must either put something for it in the upstream body, or its ``fields.LIMITS`` must
refuse it (``CannotCarry``), or the call must name it in ``dropped``. A setting that changes
nothing and is named nowhere is a silent loss: the test fails. A new ``ChatRequest`` field fails
the test until it is walked here or excluded with a reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.dialects.base import BuildOptions
from gateway.dialects.carry import USES, CannotCarry, judge, refusal
from gateway.dialects.registry import codec_for
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    Thinking,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)

UPSTREAMS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
CALLERS = UPSTREAMS
PNG = "iVBORw0KGgo="


def base(caller: str) -> ChatRequest:
    return ChatRequest(model="text", messages=[Message("user", [TextPart("hi")])], dialect=caller, max_tokens=4096)


def with_tools(req: ChatRequest) -> ChatRequest:
    weather = Tool(
        "get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    req.tools = [weather, Tool("get_time", "Time", {"type": "object", "properties": {"tz": {"type": "string"}}})]
    return req


def tool_turn(req: ChatRequest, content: list) -> ChatRequest:
    req.messages += [
        Message("assistant", [ToolCallPart("call_1", "get_weather", '{"city": "Paris"}')]),
        Message("user", [ToolResultPart("call_1", content, name="get_weather")]),
    ]
    return req


def user_part(part: object) -> Callable[[ChatRequest], ChatRequest]:
    def mutate(req: ChatRequest) -> ChatRequest:
        req.messages[0].content.append(part)  # type: ignore[arg-type]
        return req

    return mutate


def _set(**values: object) -> Callable[[ChatRequest], ChatRequest]:
    def mutate(req: ChatRequest) -> ChatRequest:
        for key, value in values.items():
            setattr(req, key, value)
        return req

    return mutate


# name -> (how the baseline looks, the mutation). The baseline for a mutation is the mutation's
# own precondition (tools present, a tool turn) without the setting under test.
MUTATIONS: dict[str, tuple[Callable[[ChatRequest], ChatRequest], Callable[[ChatRequest], ChatRequest]]] = {
    "system": (lambda r: r, _set(system=[TextPart("Be brief.")])),
    "messages": (
        lambda r: r,
        lambda r: (
            r.messages.extend([Message("assistant", [TextPart("hello")]), Message("user", [TextPart("again")])]),
            r,
        )[1],
    ),
    "messages.system_turn": (
        lambda r: r,
        lambda r: (r.messages.append(Message("system", [TextPart("mid-conversation rule")])), r)[1],
    ),
    "messages.image_data": (lambda r: r, user_part(ImagePart("image/png", PNG))),
    "messages.image_url": (lambda r: r, user_part(ImagePart(url="https://example.com/cat.png"))),
    "messages.file_data": (lambda r: r, user_part(FilePart("application/pdf", "JVBERi0="))),
    "messages.file_url": (lambda r: r, user_part(FilePart("application/pdf", url="https://example.com/a.pdf"))),
    "messages.file_url_in_tool_result": (
        lambda r: tool_turn(r, [TextPart("see")]),
        lambda r: tool_turn(r, [TextPart("see"), FilePart("application/pdf", url="https://example.com/a.pdf")]),
    ),
    "messages.assistant_media": (
        lambda r: r,
        lambda r: (
            r.messages.extend(
                [Message("assistant", [ImagePart("image/png", PNG)]), Message("user", [TextPart("and?")])]
            ),
            r,
        )[1],
    ),
    "messages.tool_turn": (lambda r: r, lambda r: tool_turn(r, [TextPart("18C")])),
    "messages.tool_result_media": (
        lambda r: tool_turn(r, [TextPart("see")]),
        lambda r: tool_turn(r, [TextPart("see"), ImagePart("image/png", PNG)]),
    ),
    "tools": (lambda r: r, with_tools),
    "tools.strict": (with_tools, lambda r: (with_tools(r), setattr(r.tools[0], "strict", True), r)[2]),
    "tool_choice": (with_tools, lambda r: (with_tools(r), setattr(r, "tool_choice", ToolChoice("required")), r)[2]),
    "tool_choice.none": (with_tools, lambda r: (with_tools(r), setattr(r, "tool_choice", ToolChoice("none")), r)[2]),
    "tool_choice.tool": (
        with_tools,
        lambda r: (with_tools(r), setattr(r, "tool_choice", ToolChoice("tool", "get_weather")), r)[2],
    ),
    "tool_choice.allowed": (
        with_tools,
        lambda r: (with_tools(r), setattr(r, "tool_choice", ToolChoice("auto", allowed=["get_weather"])), r)[2],
    ),
    "tool_choice.required_one_of": (
        with_tools,
        lambda r: (with_tools(r), setattr(r, "tool_choice", ToolChoice("required", allowed=["get_time"])), r)[2],
    ),
    "parallel_tool_calls": (with_tools, lambda r: (with_tools(r), setattr(r, "parallel_tool_calls", False), r)[2]),
    "max_tokens": (lambda r: r, _set(max_tokens=777)),
    "temperature": (lambda r: r, _set(temperature=0.3)),
    "top_p": (lambda r: r, _set(top_p=0.7)),
    "temperature+top_p": (lambda r: r, _set(temperature=0.3, top_p=0.7)),
    "top_k": (lambda r: r, _set(top_k=40)),
    "stop": (lambda r: r, _set(stop=["END"])),
    "user": (lambda r: r, _set(user="user-42")),
    "metadata": (lambda r: r, _set(metadata={"team": "search"})),
    "store": (lambda r: r, _set(store=True)),
    "thinking": (lambda r: r, _set(thinking=Thinking(enabled=True, effort="low"))),
    "thinking.budget": (lambda r: r, _set(thinking=Thinking(enabled=True, budget_tokens=2048))),
    "thinking.on": (lambda r: r, _set(thinking=Thinking(enabled=True))),
    "thinking.disabled": (lambda r: r, _set(thinking=Thinking(enabled=False))),
    "thinking.include_thoughts": (
        _set(thinking=Thinking(enabled=True, effort="low", include_thoughts=False)),
        _set(thinking=Thinking(enabled=True, effort="low", include_thoughts=True)),
    ),
    "response_format": (
        lambda r: r,
        _set(
            response_format={
                "type": "json_schema",
                "name": "w",
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
            }
        ),
    ),
    "response_format.json": (lambda r: r, _set(response_format={"type": "json"})),
}

# ChatRequest fields deliberately not walked, and why.
EXCLUDED = {
    "model": "the route decides the upstream model; every builder writes it",
    "stream": "transport: the gateway decides how it talks to the upstream (BuildOptions.stream)",
    "include_usage": "transport: the gateway always asks upstreams for usage",
    "stream_framing": "transport: how the caller's stream is framed, nothing the upstream sees",
    "previous_id": "resolved into messages by the stateful layer before any builder runs",
    "background": "run by the gateway itself (detached), never asked of an upstream",
    "extras": "a dialect's own fields with no IR slot: passed to the same dialect only, the parser warns",
    "dialect": "bookkeeping: the caller's dialect",
    "headers": "provider headers (anthropic-beta): forwarded to the same dialect only",
    "session": "the caller's x-session-id: read by routing (affinity) to pick a target, never sent upstream",
    "prompt_cache_key": "OpenAI's prompt-cache routing hint: sent to OpenAI upstreams, read by affinity; "
    "the answer does not depend on it, so a dialect without the field loses nothing",
    "key_name": "bookkeeping: the named key that owns what this request stores (gateway/relay/stateful.py), never sent upstream",
    "store_here": "bookkeeping: the caller's store is the gateway's own (a stored dialect), read with store by carry.USES",
}

# Thoughts visibility is a question of what the gateway returns; Chat upstreams return no text.
NOT_WALKED_FOR = {("thinking.include_thoughts", "openai-chat"), ("thinking.include_thoughts", "anthropic")}


def test_every_chat_request_field_is_walked_or_excluded() -> None:
    names = {f.name for f in dataclasses.fields(ChatRequest)}
    walked = {m.split(".")[0].split("+")[0] for m in MUTATIONS}
    assert names - walked - set(EXCLUDED) == set(), "walk the new field in MUTATIONS or exclude it with a reason"
    assert set(USES) <= set(MUTATIONS), "every field a Limit can name is walked"


def outcome(caller: str, upstream: str, name: str) -> str:
    before, mutate = MUTATIONS[name]
    codec = codec_for(upstream)
    plain = codec.build_request(before(base(caller)), "text", BuildOptions()).body
    req = mutate(base(caller))
    try:
        dropped = judge(req, codec.limits, ())
    except CannotCarry as exc:
        assert name.startswith(exc.field), f"{name} refused as {exc.field}"
        return "refused"
    call = codec.build_request(req, "text", BuildOptions())
    dropped += call.dropped
    if call.body != plain:
        return "carried+dropped:" + ",".join(dropped) if dropped else "carried"
    assert dropped, (
        f"{name} -> {upstream} (from {caller}): the upstream body did not change and nothing says it was dropped"
    )
    return "dropped:" + ",".join(dropped)


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("name", list(MUTATIONS))
def test_field_is_carried_refused_or_reported(name: str, upstream: str) -> None:
    if (name, upstream) in NOT_WALKED_FOR:
        pytest.skip("nothing to ask of this upstream")
    for caller in CALLERS:
        if caller == upstream and name == "metadata":
            continue  # the same dialect's own metadata passes as it came
        if name == "store" and caller != "openai-chat":
            continue  # Responses/Interactions callers' store is honoured by the gateway's own store
        outcome(caller, upstream, name)


def test_the_three_settings_of_issue_24() -> None:
    chat = "openai-chat"
    assert outcome(chat, "openai-responses", "stop") == "refused"
    assert outcome("gemini", "anthropic", "tool_choice.required_one_of") == "carried"
    assert outcome(chat, "anthropic", "response_format") == "carried"
    assert (
        outcome("gemini", "anthropic", "temperature+top_p") == "carried"
    )  # "text" is not a model that refuses the pair


def test_refusal_names_the_callers_own_parameter() -> None:
    exc = CannotCarry("stop", "the Responses API has no stop sequences")
    expected = {
        "anthropic": "stop_sequences",
        "openai-chat": "stop",
        "gemini": "generationConfig.stopSequences",
        "gemini-interactions": "generation_config.stop_sequences",
    }
    for caller, param in expected.items():
        err = refusal(exc, codec_for(caller).params, "up", "openai-responses")
        assert err.status == 400 and err.param == param and err.message.startswith(param + ":")
        assert "drop_unsupported" in err.message


def test_configured_drop_is_reported_not_refused() -> None:
    req = base("openai-chat")
    req.stop = ["END"]
    assert judge(req, codec_for("openai-responses").limits, ["stop"]) == ["stop"]


def test_docs_list_every_limit() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "dialects.md").read_text()
    table = page.split("## What each upstream cannot carry", 1)[1].split("\n## ", 1)[0]
    for dialect in UPSTREAMS:
        for limit in codec_for(dialect).limits:
            row = next((line for line in table.splitlines() if line.startswith(f"| `{limit.field}`")), None)
            assert row is not None, f"docs/dialects.md table has no row for {limit.field}"


def test_drop_unsupported_names_are_checked_at_config_load() -> None:
    from pydantic import ValidationError

    from gateway.settings import ProviderSettings

    assert ProviderSettings(
        name="p", dialect="openai-responses", base_url="http://x", drop_unsupported=["stop", "top_k"]
    ).drop_unsupported == ["stop", "top_k"]
    with pytest.raises(ValidationError, match=r"unknown field.*stop_sequences"):
        ProviderSettings(name="p", dialect="openai-responses", base_url="http://x", drop_unsupported=["stop_sequences"])
