"""Multi-turn tool loops through every caller × upstream pair, and thinking signatures round trips.

Turn 1: the caller offers a tool and the upstream calls it. Turn 2: the caller sends the history
back the way an application does with its SDK's own objects (assistant turn as received, plus the
tool result) and the upstream answers. The test checks the final answer and what the upstream got
on turn 2: the call and its result linked by id (Gemini: by name), and — for the thinking variant —
the upstream's own signature restored where its API requires it (Gemini ``thoughtSignature`` on
the functionCall part, an Anthropic signed thinking block before ``tool_use``, a Responses
``reasoning`` item with its ``encrypted_content``), whatever dialect the caller speaks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.genai import types as gtypes

from tests.conftest import UPSTREAM_DIALECTS
from tests.support.callers import SYSTEM, TOOL_RESULT, USER, WEATHER, anthropic_client, gemini_client, openai_client
from tests.support.fake_upstream import FakeUpstream

CALLER_DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
FINAL = "It is 18°C in Paris."
SIGNATURES = {
    "gemini-interactions": "aW50ZXJhY3Rpb25zLXNpZy0x",
    "gemini": "Z2VtaW5pLXNpZy0x",
    "anthropic": "YW50aHJvcGljLXNpZy0x",
    "openai-responses": "gAAAAABresponses-sig-1",
}


def loop_anthropic(url: str, first: str, second: str) -> str:
    client = anthropic_client(url)
    tools = [{"name": WEATHER["name"], "description": WEATHER["description"], "input_schema": WEATHER["parameters"]}]
    messages: list[Any] = [{"role": "user", "content": USER}]
    with client.messages.stream(model=first, max_tokens=4096, system=SYSTEM, messages=messages, tools=tools) as s:
        reply = s.get_final_message()
    call = next(b for b in reply.content if b.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": TOOL_RESULT}]},
    ]
    final = client.messages.create(model=second, max_tokens=4096, system=SYSTEM, messages=messages, tools=tools)
    return "".join(b.text for b in final.content if b.type == "text")


def loop_chat(url: str, first: str, second: str) -> str:
    client = openai_client(url)
    tools = [{"type": "function", "function": WEATHER}]
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    with client.chat.completions.stream(model=first, messages=messages, tools=tools) as s:
        completion = s.get_final_completion()
    message = completion.choices[0].message
    assert message.tool_calls, "turn 1 must call the tool"
    messages.append(
        {"role": "assistant", "content": message.content, "tool_calls": [c.model_dump() for c in message.tool_calls]}
    )
    messages.append({"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": TOOL_RESULT})
    final = client.chat.completions.create(model=second, messages=messages, tools=tools)
    return final.choices[0].message.content or ""


def loop_responses(url: str, first: str, second: str) -> str:
    client = openai_client(url)
    tools = [{"type": "function", **WEATHER}]
    items: list[Any] = [{"role": "user", "content": USER}]
    with client.responses.stream(model=first, instructions=SYSTEM, input=items, tools=tools) as s:
        response = s.get_final_response()
    call = next(i for i in response.output if i.type == "function_call")
    items += [i.model_dump(exclude_none=True) for i in response.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": TOOL_RESULT})
    final = client.responses.create(model=second, instructions=SYSTEM, input=items, tools=tools)
    return final.output_text


def loop_gemini(url: str, first: str, second: str) -> str:
    client = gemini_client(url)
    decl = gtypes.FunctionDeclaration(
        name=WEATHER["name"], description=WEATHER["description"], parameters_json_schema=WEATHER["parameters"]
    )
    config = gtypes.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=[gtypes.Tool(function_declarations=[decl])],
        automatic_function_calling=gtypes.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: list[Any] = [gtypes.Content(role="user", parts=[gtypes.Part(text=USER)])]
    chunks = list(client.models.generate_content_stream(model=first, contents=contents, config=config))
    parts = [
        p for c in chunks for cand in c.candidates or [] for p in (cand.content.parts if cand.content else None) or []
    ]
    parts = [p for p in parts if p.text or p.function_call or p.thought_signature]
    call = next(p.function_call for p in parts if p.function_call)
    contents.append(gtypes.Content(role="model", parts=parts))
    contents.append(
        gtypes.Content(
            role="user",
            parts=[
                gtypes.Part(
                    function_response=gtypes.FunctionResponse(
                        id=call.id, name=call.name, response=json.loads(TOOL_RESULT)
                    )
                )
            ],
        )
    )
    final = client.models.generate_content(model=second, contents=contents, config=config)
    return final.text or ""


def loop_interactions(url: str, first: str, second: str) -> str:
    """Stateful: turn 2 names turn 1 by ``previous_interaction_id`` and sends only the result."""
    client = gemini_client(url)
    tools = [{"type": "function", **WEATHER}]
    events = list(
        client.interactions.create(model=first, input=USER, system_instruction=SYSTEM, tools=tools, stream=True)
    )
    iid = events[0].interaction.id
    call = next(e.step for e in events if e.event_type == "step.start" and e.step.type == "function_call")
    result = [{"type": "function_result", "call_id": call.id, "name": call.name, "result": TOOL_RESULT}]
    final = client.interactions.create(
        model=second, previous_interaction_id=iid, input=result, tools=tools, system_instruction=SYSTEM
    )
    return "".join(
        c.text
        for step in final.steps or []
        if step.type == "model_output"
        for c in step.content or []
        if c.type == "text"
    )


LOOPS = {
    "gemini-interactions": loop_interactions,
    "anthropic": loop_anthropic,
    "openai-chat": loop_chat,
    "openai-responses": loop_responses,
    "gemini": loop_gemini,
}


def turn_two_call_and_result(received: Any) -> tuple[Any, Any, dict[str, Any]]:
    """(call key, result key, extra facts) from the upstream's turn-2 request, read raw."""
    b = received.body
    if received.dialect == "anthropic":
        assistant = next(m for m in b["messages"] if m["role"] == "assistant")
        blocks = assistant["content"]
        call = next(x for x in blocks if x["type"] == "tool_use")
        thinking = [x for x in blocks if x["type"] == "thinking"]
        result = next(
            x
            for m in b["messages"]
            if m["role"] == "user" and isinstance(m["content"], list)
            for x in m["content"]
            if x["type"] == "tool_result"
        )
        facts = {
            "signature": thinking[0]["signature"] if thinking else None,
            "thinking_first": blocks[0]["type"] == "thinking",
            "thinking_text": thinking[0]["thinking"] if thinking else None,
        }
        return call["id"], result["tool_use_id"], facts
    if received.dialect == "openai-chat":
        assistant = next(m for m in b["messages"] if m["role"] == "assistant")
        tool = next(m for m in b["messages"] if m["role"] == "tool")
        return assistant["tool_calls"][0]["id"], tool["tool_call_id"], {}
    if received.dialect == "openai-responses":
        call = next(i for i in b["input"] if i.get("type") == "function_call")
        result = next(i for i in b["input"] if i.get("type") == "function_call_output")
        reasoning = [i for i in b["input"] if i.get("type") == "reasoning"]
        return (
            call["call_id"],
            result["call_id"],
            {"signature": reasoning[0].get("encrypted_content") if reasoning else None},
        )
    if received.dialect == "gemini-interactions":
        steps = b["input"]
        call = next(x for x in steps if x.get("type") == "function_call")
        result = next(x for x in steps if x.get("type") == "function_result")
        thought = [x for x in steps if x.get("type") == "thought"]
        return call["id"], result["call_id"], {"signature": thought[0].get("signature") if thought else None}
    parts = [p for c in b["contents"] for p in c["parts"]]
    call_part = next(p for p in parts if "functionCall" in p)
    result = next(p["functionResponse"] for p in parts if "functionResponse" in p)
    assert result["name"] == "get_weather"
    assert result["response"] == json.loads(TOOL_RESULT)
    return call_part["functionCall"]["name"], result["name"], {"signature": call_part.get("thoughtSignature")}


@pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
@pytest.mark.parametrize("upstream", UPSTREAM_DIALECTS)
@pytest.mark.parametrize("caller", CALLER_DIALECTS)
def test_tool_loop(gateway: Any, fake: FakeUpstream, caller: str, upstream: str, thinking: bool) -> None:
    first = f"{upstream}--{'thinking_tool_call' if thinking else 'tool_call'}"
    answer = LOOPS[caller](gateway.url, first, f"{upstream}--tool_result_turn")
    assert answer == FINAL
    call_key, result_key, facts = turn_two_call_and_result(fake.last(upstream))
    assert call_key == result_key, "the tool result must answer the call the upstream made"
    if not thinking or upstream == "openai-chat":
        return
    if upstream == "anthropic" and caller == "openai-chat":
        # Chat clients do not send reasoning text back, and Anthropic signs the text: nothing to restore.
        return
    assert facts["signature"] == SIGNATURES[upstream], f"{caller} lost the {upstream} signature"
    if upstream == "anthropic":
        assert facts["thinking_first"] and facts["thinking_text"] == "Checking the weather."
