"""A Responses caller's custom and built-in client tools through an upstream that knows only
functions (gateway/dialects/openai_responses/client_tools.py), with the openai SDK as the caller.

Codex CLI declares ``apply_patch`` as a ``custom`` tool with a Lark grammar, and the API's
``shell`` / ``local_shell`` / ``apply_patch`` tool types. An Anthropic or Chat upstream
(tests/support/freeform_upstream.py; Gemini too) is given each as a function tool; its model's call of that
function reaches the caller as the tool type's own item (``custom_tool_call`` with the input
string, ``shell_call`` …), whole and streamed (``response.custom_tool_call_input.delta`` /
``.done``), and the caller's item and its output sent back reach the upstream as the function
call and its result. The response object echoes the caller's ``previous_response_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import ServerThread
from tests.support.freeform_upstream import LOCAL_SHELL, OPERATION, PATCH, SHELL, FreeformUpstream

GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
UPSTREAMS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "gemini": "enerateContent"}


class Gateway:
    def __init__(self, url: str, upstream: FreeformUpstream) -> None:
        self.url, self.upstream = url, upstream
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)

    def sent(self, upstream: str) -> dict[str, Any]:
        path, body = self.upstream.received[-1]
        assert UPSTREAMS[upstream] in path
        return body


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    upstream = FreeformUpstream()
    with ServerThread(upstream) as up, ServerThread(create_app(Settings(**gateway_config(up.url)))) as server:
        yield Gateway(server.url, upstream)


def _function(body: dict[str, Any], upstream: str, name: str) -> dict[str, Any]:
    """The function tool ``name`` as the upstream got it: (description, parameters)."""
    for tool in body.get("tools") or []:
        if upstream == "anthropic" and tool.get("name") == name:
            return {"description": tool.get("description"), "parameters": tool["input_schema"]}
        if upstream == "gemini":
            for fn in tool.get("functionDeclarations") or []:
                if fn["name"] == name:
                    return {
                        "description": fn.get("description"),
                        "parameters": fn.get("parameters") or fn.get("parametersJsonSchema"),
                    }
            continue
        if upstream == "openai-chat" and tool["function"]["name"] == name:
            fn = tool["function"]
            return {"description": fn.get("description"), "parameters": fn["parameters"]}
    raise AssertionError(f"no function {name!r} in {body.get('tools')}")


def _create(gw: Gateway, stream: bool, **params: Any) -> tuple[Any, list[Any]]:
    """The response (whole, or the stream's ``response.completed``) and the stream's events."""
    if not stream:
        return gw.client.responses.create(**params), []
    events = list(gw.client.responses.create(stream=True, **params))
    final = [e for e in events if e.type == "response.completed"]
    assert len(final) == 1, [e.type for e in events]
    return final[0].response, events


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_a_custom_tool_is_a_function_upstream_and_its_call_a_custom_tool_call(
    gw: Gateway, upstream: str, stream: bool
) -> None:
    model = f"{upstream}--custom"
    response, events = _create(gw, stream, model=model, input="add text.txt", tools=[APPLY_PATCH])
    fn = _function(gw.sent(upstream), upstream, "apply_patch")
    assert fn["description"] == APPLY_PATCH["description"]
    params = fn["parameters"]
    assert params["type"] == "object" and params["required"] == ["input"]
    assert params["properties"]["input"]["type"] == "string"
    assert "lark" in params["properties"]["input"]["description"]
    assert GRAMMAR in params["properties"]["input"]["description"]  # the model is told the grammar

    [call] = response.output
    assert call.type == "custom_tool_call"
    assert call.name == "apply_patch" and call.input == PATCH
    assert call.call_id in ("toolu_1", "call_1") or upstream == "gemini"  # (Gemini's calls have no id)
    assert response.status == "completed"
    assert [t.type for t in response.tools] == ["custom"]  # echoed as declared
    if stream:
        deltas = [e for e in events if e.type == "response.custom_tool_call_input.delta"]
        [done] = [e for e in events if e.type == "response.custom_tool_call_input.done"]
        assert len(deltas) > 1 or upstream == "gemini"  # the input grows as the arguments stream (Gemini's come whole)
        assert "".join(e.delta for e in deltas) == PATCH == done.input
        assert {e.item_id for e in deltas} == {done.item_id} == {call.id}
        [added] = [e for e in events if e.type == "response.output_item.added"]
        assert added.item.type == "custom_tool_call" and added.item.input == ""
        # the SDK's stream() helper accumulates the same item
        with gw.client.responses.stream(model=model, input="add text.txt", tools=[APPLY_PATCH]) as s:
            helped = s.get_final_response()
        assert helped.output[0].type == "custom_tool_call" and helped.output[0].input == PATCH


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_a_custom_tool_call_and_its_output_go_back_as_the_function_call_and_its_result(
    gw: Gateway, upstream: str, stream: bool
) -> None:
    model = f"{upstream}--custom"
    first, _ = _create(gw, stream, model=model, input="add text.txt", tools=[APPLY_PATCH], store=False)
    [call] = first.output
    history: list[Any] = [
        {"role": "user", "content": "add text.txt"},
        call.to_dict(),
        {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done! A text.txt"},
    ]
    second, _ = _create(gw, stream, model=model, input=history, tools=[APPLY_PATCH], store=False)
    assert second.output_text == "done"
    body = gw.sent(upstream)
    if upstream == "anthropic":
        assistant, result = body["messages"][1], body["messages"][2]
        [use] = assistant["content"]
        assert use == {"type": "tool_use", "id": call.call_id, "name": "apply_patch", "input": {"input": PATCH}}
        assert result["content"][0]["tool_use_id"] == call.call_id
        assert "Done! A text.txt" in str(result["content"][0]["content"])
    elif upstream == "gemini":
        [fc] = body["contents"][1]["parts"]
        assert fc["functionCall"]["name"] == "apply_patch" and fc["functionCall"]["args"] == {"input": PATCH}
        [fr] = body["contents"][2]["parts"]
        assert fr["functionResponse"]["name"] == "apply_patch"
        assert "Done! A text.txt" in str(fr["functionResponse"]["response"])
    else:
        assistant, result = body["messages"][1], body["messages"][2]
        [tc] = assistant["tool_calls"]
        assert tc["id"] == call.call_id and tc["function"]["name"] == "apply_patch"
        assert orjson.loads(tc["function"]["arguments"]) == {"input": PATCH}
        assert result == {"role": "tool", "tool_call_id": call.call_id, "content": "Done! A text.txt"}


def test_a_stored_turn_continues_with_previous_response_id_echoed(gw: Gateway) -> None:
    model = "anthropic--custom"
    first = gw.client.responses.create(model=model, input="add text.txt", tools=[APPLY_PATCH])
    assert first.previous_response_id is None
    [call] = first.output
    output = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}
    second = gw.client.responses.create(model=model, input=[output], tools=[APPLY_PATCH], previous_response_id=first.id)
    assert second.output_text == "done"
    assert second.previous_response_id == first.id
    body = gw.sent("anthropic")
    assert body["messages"][1]["content"][0]["name"] == "apply_patch"  # the stored call, as a tool_use
    events = list(
        gw.client.responses.create(
            model=model, input=[output], tools=[APPLY_PATCH], previous_response_id=first.id, stream=True
        )
    )
    starts = [e.response for e in events if e.type in ("response.created", "response.completed")]
    assert [r.previous_response_id for r in starts] == [first.id, first.id]


BUILT_IN = {
    "shell": ({"type": "shell"}, "shell_call", "action", SHELL),
    "local_shell": ({"type": "local_shell"}, "local_shell_call", "action", {**LOCAL_SHELL, "type": "exec"}),
    "apply_patch": ({"type": "apply_patch"}, "apply_patch_call", "operation", OPERATION),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("kind", list(BUILT_IN))
@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_built_in_client_tools_are_functions_upstream_and_their_calls_the_tools_items(
    gw: Gateway, upstream: str, kind: str, stream: bool
) -> None:
    tool, item_type, field, value = BUILT_IN[kind]
    response, events = _create(gw, stream, model=f"{upstream}--{kind}", input="look around", tools=[tool])
    fn = _function(gw.sent(upstream), upstream, kind)
    assert fn["parameters"]["type"] == "object" and fn["parameters"]["properties"]
    [call] = response.output
    assert call.type == item_type
    assert getattr(call, field).to_dict() == value
    assert call.call_id in ("toolu_1", "call_1") or upstream == "gemini"
    assert call.status == "completed"
    if stream:
        [added] = [e for e in events if e.type == "response.output_item.added"]
        assert added.item.type == item_type and added.item.id == call.id
    # sent back with its output: the function call and its result
    result = {"type": f"{item_type}_output", "call_id": call.call_id, "output": "text.txt"}
    if kind == "local_shell":
        result = {"type": "local_shell_call_output", "id": call.call_id, "output": "text.txt"}
    elif kind == "shell":
        result["output"] = [{"stdout": "text.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    elif kind == "apply_patch":
        result["status"] = "completed"
    history = [{"role": "user", "content": "look around"}, call.to_dict(), result]
    second, _ = _create(gw, stream, model=f"{upstream}--{kind}", input=history, tools=[tool], store=False)
    assert second.output_text == "done"
    body = gw.sent(upstream)
    if upstream == "gemini":
        assert body["contents"][1]["parts"][0]["functionCall"]["name"] == kind
        assert "text.txt" in str(body["contents"][2])
        return
    sent_call = body["messages"][1]["content"][0] if upstream == "anthropic" else body["messages"][1]["tool_calls"][0]
    assert (sent_call.get("name") or sent_call["function"]["name"]) == kind
    assert "text.txt" in str(body["messages"][2])


def test_a_tool_choice_of_the_custom_tool_names_its_function(gw: Gateway) -> None:
    gw.client.responses.create(
        model="anthropic--custom",
        input="add text.txt",
        tools=[APPLY_PATCH],
        tool_choice={"type": "custom", "name": "apply_patch"},
    )
    assert gw.sent("anthropic")["tool_choice"] == {"type": "tool", "name": "apply_patch"}


EXEC = {"type": "custom", "name": "exec", "description": "Run JavaScript.", "format": {"type": "text"}}
LITE_TOOLS = {"type": "namespace", "name": "functions", "description": "Local code mode", "tools": [EXEC]}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_codex_lite_tools_declared_in_the_input_and_in_a_namespace_reach_the_upstream(
    gw: Gateway, stream: bool
) -> None:
    """Codex's requests for current model slugs declare their tools in an ``additional_tools``
    input item (and none at the top), a custom ``exec`` inside a ``functions`` namespace."""
    lite: list[Any] = [
        {"type": "additional_tools", "role": "developer", "tools": [LITE_TOOLS]},
        {"role": "user", "content": "run it"},
    ]
    response, _ = _create(gw, stream, model="anthropic--exec", input=lite, store=False)
    body = gw.sent("anthropic")
    assert [t["name"] for t in body["tools"]] == ["functions__exec"]
    assert body["tools"][0]["input_schema"]["required"] == ["input"]
    [call] = response.output
    assert call.type == "custom_tool_call" and call.name == "exec" and call.namespace == "functions"
    assert call.input == "console.log(1)"
    # sent back, the call is the function the upstream declared
    output = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "1"}
    second, _ = _create(gw, stream, model="anthropic--exec", input=[*lite, call.to_dict(), output], store=False)
    assert second.output_text == "done"
    assert gw.sent("anthropic")["messages"][1]["content"][0]["name"] == "functions__exec"


def test_hosted_tools_another_upstream_cannot_run_are_reported_dropped(gw: Gateway) -> None:
    """Codex's ``web_search`` (run only by OpenAI) is not sent to an Anthropic upstream, and the
    answer says so; the custom tool beside it is."""
    body = {"model": "anthropic--custom", "input": "text", "tools": [{"type": "web_search"}, APPLY_PATCH]}
    reply = httpx.post(gw.url + "/v1/responses", json=body, headers={"authorization": "Bearer sk-caller"}, timeout=20)
    assert reply.status_code == 200, reply.text
    assert "tools.hosted" in reply.headers["x-gateway-dropped"]
    assert [t["name"] for t in gw.sent("anthropic")["tools"]] == ["apply_patch"]
    assert reply.json()["output"][0]["type"] == "custom_tool_call"


def test_a_stored_custom_call_continued_on_a_responses_upstream_is_a_custom_tool_call(gw: Gateway) -> None:
    """A turn an Anthropic upstream answered with the custom tool, continued on a Responses
    upstream (another route, a fallback): OpenAI gets the ``custom_tool_call`` and its output."""
    first = gw.client.responses.create(model="anthropic--custom", input="add text.txt", tools=[APPLY_PATCH])
    [call] = first.output
    output = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}
    second = gw.client.responses.create(
        model="openai-responses--custom", input=[output], tools=[APPLY_PATCH], previous_response_id=first.id
    )
    assert second.output_text == "done"
    path, body = gw.upstream.received[-1]
    assert path.endswith("/responses")
    assert body["tools"] == [APPLY_PATCH]
    assert body["input"][1:] == [
        {"type": "custom_tool_call", "call_id": call.call_id, "name": "apply_patch", "input": PATCH},
        output,
    ]
