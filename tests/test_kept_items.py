"""Output items the IR has no kind for (issue 30 item 1), through the official SDKs, whole and streamed.

The upstream (tests/support/items_upstream.py) answers the providers' documented shapes:

* a Responses answer with a message, ``web_search_call``, ``custom_tool_call`` (Codex's
  ``apply_patch``), ``shell_call``, ``local_shell_call``, ``apply_patch_call``, ``mcp_call`` and an
  item type no SDK knows yet;
* an Anthropic answer with ``server_tool_use`` (web search, bash code execution),
  ``web_search_tool_result``, ``bash_code_execution_tool_result``, ``mcp_tool_use`` /
  ``mcp_tool_result`` between two texts;
* an Interactions answer with ``google_search_call`` / ``google_search_result`` steps;
* a Gemini answer with ``executableCode``, ``codeExecutionResult`` and ``inlineData`` parts.

A caller of the upstream's own dialect gets every item back, in order, field for field (the
re-encoding path: the Responses default ``store`` and an Interactions ``store: false``, and
Anthropic with the frame fast path off). A caller of another dialect gets each client tool call
as a function call (gateway/dialects/openai_responses/items.py) and the text; server items are
left out and named in the access log's ``dropped``. The request side: the custom / shell /
apply-patch items Codex sends back reach a Responses upstream verbatim, and a Chat upstream as
tool calls and tool results; server items sent back reach their own dialect verbatim. Guardrails
redact a kept item's texts both ways.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.access_log import Capture, capture_access_log
from tests.support.callers import CALLERS, gemini_client
from tests.support.fake_upstream import ServerThread
from tests.support.items_upstream import (
    ANTHROPIC_BLOCKS,
    ANTHROPIC_SERVER,
    GEMINI_PARTS,
    GEMINI_SERVER,
    INTERACTIONS_SERVER,
    INTERACTIONS_STEPS,
    PATCH,
    RESPONSES_CALLS,
    RESPONSES_ITEMS,
    RESPONSES_SERVER,
    ItemsUpstream,
)

OTHERS = {
    "openai-responses": ["anthropic", "openai-chat", "gemini", "gemini-interactions"],
    "anthropic": ["openai-chat", "openai-responses", "gemini", "gemini-interactions"],
    "gemini-interactions": ["anthropic", "openai-chat", "openai-responses", "gemini"],
    "gemini": ["anthropic", "openai-chat", "openai-responses", "gemini-interactions"],
}


class Gateway:
    def __init__(self, url: str, plain: str, upstream: ItemsUpstream, log: Capture) -> None:
        self.url, self.plain, self.upstream, self.log = url, plain, upstream, log


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    upstream = ItemsUpstream()
    with capture_access_log() as log, ServerThread(upstream) as up:
        config = gateway_config(up.url, access_log=True)
        plain = gateway_config(up.url, access_log=True, fast_path=False)  # every stream re-encoded
        with (
            ServerThread(create_app(Settings(**config))) as server,
            ServerThread(create_app(Settings(**plain))) as other,
        ):
            yield Gateway(server.url, other.url, upstream, log)


def dropped(gw: Gateway, model: str, stream: bool, since: int) -> list[str]:
    """The ``dropped`` of the access-log line of the request to ``model`` made after ``since``
    lines were written (a line is written once the answer is out: waited for)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for text in gw.log.lines[since:]:
            entry = orjson.loads(text)
            if entry.get("model") == model and entry.get("stream") == stream:
                return list(entry.get("dropped") or [])
        time.sleep(0.02)
    raise AssertionError(f"no access-log line for {model}")


# --------------------------------------------------------------------------- Responses upstream


def test_a_whole_responses_answer_carries_every_item_verbatim(gw: Gateway) -> None:
    body = {"model": "openai-responses--items", "input": "text"}  # the default store: re-encoded
    reply = httpx.post(gw.url + "/v1/responses", json=body, headers={"authorization": "Bearer sk-caller"}, timeout=20)
    assert reply.status_code == 200, reply.text
    output = reply.json()["output"]
    assert [i["type"] for i in output] == [i["type"] for i in RESPONSES_ITEMS]
    assert output[1:] == RESPONSES_ITEMS[1:]  # field for field, the unknown type too
    assert output[0]["content"][0]["text"] == "On it."
    assert output[0]["content"][0]["annotations"] == RESPONSES_ITEMS[0]["content"][0]["annotations"]
    assert reply.json()["status"] == "completed"
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    response = client.responses.create(model="openai-responses--items", input="text")
    assert [i.type for i in response.output][:7] == [i["type"] for i in RESPONSES_ITEMS][:7]
    patch = response.output[2]
    assert patch.type == "custom_tool_call" and patch.input == PATCH and patch.call_id == "call_patch"


# (the SDK's helper re-serialises its snapshot; an item type it does not know yet makes pydantic warn)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
@pytest.mark.parametrize("store", [True, False], ids=["stored", "fast-path"])
def test_a_streamed_responses_answer_carries_every_item(gw: Gateway, store: bool) -> None:
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    done: list[dict[str, Any]] = []
    final = None
    for event in client.responses.create(model="openai-responses--items", input="text", stream=True, store=store):
        if event.type == "response.output_item.done":
            done.append(event.item.to_dict())
        elif event.type == "response.completed":
            final = [item.to_dict() for item in event.response.output]
    assert final is not None
    for items in (done, final):
        assert [i["type"] for i in items] == [i["type"] for i in RESPONSES_ITEMS]
        assert items[1:] == RESPONSES_ITEMS[1:]
    # the SDK's stream() helper accumulates them too (what the openai-agents SDK reads)
    with client.responses.stream(model="openai-responses--items", input="text", store=store) as s:
        helped = s.get_final_response()
    assert [i.to_dict() for i in helped.output][1:] == RESPONSES_ITEMS[1:]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", OTHERS["openai-responses"])
def test_client_tool_calls_of_every_kind_reach_other_callers_as_tool_calls(
    gw: Gateway, caller: str, stream: bool
) -> None:
    model = "openai-responses--items"
    since = len(gw.log.lines)
    out = CALLERS[caller](gw.url, model, "tool_call", stream)
    assert out.tools == RESPONSES_CALLS
    assert out.tool_ids[:4] == ["call_patch", "call_shell", "call_local", "call_apply"] or caller == "gemini"
    assert "On it." in out.text
    # (an Interactions caller's default store runs detached: reported from the generation's events)
    assert set(dropped(gw, model, stream, since)) >= {f"output_item:{t}" for t in RESPONSES_SERVER}


# --------------------------------------------------------------------------- Anthropic upstream


def _anthropic(url: str, stream: bool) -> list[dict[str, Any]]:
    client = anthropic.Anthropic(base_url=url, api_key="sk-caller", max_retries=0, timeout=20)
    kwargs: dict[str, Any] = {
        "model": "anthropic--server_tools",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "text"}],
    }
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert message.stop_reason == "end_turn"
    return [block.to_dict() for block in message.content]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_anthropic_server_tool_blocks_reach_an_anthropic_caller_verbatim(gw: Gateway, stream: bool) -> None:
    for url in (gw.url, gw.plain):  # forwarded frames, and re-encoded ones
        content = _anthropic(url, stream)
        expected = ANTHROPIC_BLOCKS
        if stream and url == gw.plain:  # a re-encoded stream has no citations_delta (docs: limits)
            content = [{k: v for k, v in b.items() if k != "citations"} for b in content]
            expected = [{k: v for k, v in b.items() if k != "citations"} for b in ANTHROPIC_BLOCKS]
        assert content == expected


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", OTHERS["anthropic"])
def test_anthropic_server_tool_blocks_are_reported_dropped_elsewhere(gw: Gateway, caller: str, stream: bool) -> None:
    model = "anthropic--server_tools"
    since = len(gw.log.lines)
    out = CALLERS[caller](gw.url, model, "text", stream)
    assert out.text.replace("\n", "") == "Searching. Done."
    assert out.tools == []
    assert set(dropped(gw, model, stream, since)) >= {f"output_item:{t}" for t in ANTHROPIC_SERVER}


# --------------------------------------------------------------------------- Interactions upstream


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_google_search_steps_reach_an_interactions_caller(gw: Gateway, stream: bool) -> None:
    kwargs: dict[str, Any] = {"model": "gemini-interactions--search", "input": "text", "store": False}
    for url in (gw.url, gw.plain):  # forwarded frames, and re-encoded ones
        client = gemini_client(url)
        if not stream:
            interaction = client.interactions.create(**kwargs)
            assert [s.model_dump(mode="json", exclude_none=True) for s in interaction.steps or []] == INTERACTIONS_STEPS
            continue
        steps: dict[int, dict[str, Any]] = {}
        text = ""
        for event in client.interactions.create(stream=True, **kwargs):
            if event.event_type == "step.start":
                steps[event.index] = event.step.model_dump(mode="json", exclude_none=True, exclude_unset=True)
            elif event.event_type == "step.delta" and event.delta.type == "text":
                text += event.delta.text
            elif event.event_type == "step.delta":  # a server step's content, as a client reads it
                delta = event.delta.model_dump(mode="json", exclude_none=True, exclude_unset=True)
                steps[event.index].update((k, v) for k, v in delta.items() if k != "type")
        got = [steps[i] for i in sorted(steps)]
        assert got[:2] == INTERACTIONS_STEPS[:2], url
        assert [s["type"] for s in got] == [s["type"] for s in INTERACTIONS_STEPS]
        assert text == "Searched: text."


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", OTHERS["gemini-interactions"])
def test_google_search_steps_are_reported_dropped_elsewhere(gw: Gateway, caller: str, stream: bool) -> None:
    model = "gemini-interactions--search"
    since = len(gw.log.lines)
    out = CALLERS[caller](gw.url, model, "text", stream)
    assert out.text == "Searched: text."
    assert set(dropped(gw, model, stream, since)) >= {f"output_item:{t}" for t in INTERACTIONS_SERVER}


# --------------------------------------------------------------------------- Gemini upstream


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_code_execution_and_image_parts_reach_a_gemini_caller(gw: Gateway, stream: bool) -> None:
    for url in (gw.url, gw.plain):  # forwarded frames, and re-encoded ones
        client = gemini_client(url)
        if stream:
            chunks = client.models.generate_content_stream(model="gemini--code", contents="text")
            parts = [p for c in chunks for cand in c.candidates or [] for p in (cand.content.parts or [])]
        else:
            answer = client.models.generate_content(model="gemini--code", contents="text")
            parts = list(answer.candidates[0].content.parts or [])  # type: ignore[index, union-attr]
        got = [p.model_dump(mode="json", exclude_none=True, by_alias=True) for p in parts]
        assert [p for p in got if p != {"text": ""}] == GEMINI_PARTS, url  # (a stream's end chunk: no text)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("caller", OTHERS["gemini"])
def test_code_execution_and_image_parts_are_reported_dropped_elsewhere(gw: Gateway, caller: str, stream: bool) -> None:
    model = "gemini--code"
    since = len(gw.log.lines)
    out = CALLERS[caller](gw.url, model, "text", stream)
    assert out.text.replace("\n", "") == "Running code.Ran it."
    assert set(dropped(gw, model, stream, since)) >= {f"output_item:{t}" for t in GEMINI_SERVER}


# --------------------------------------------------------------------------- the request side

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "text"},
    RESPONSES_ITEMS[1],  # web_search_call: a server item
    RESPONSES_ITEMS[2],
    {"type": "custom_tool_call_output", "call_id": "call_patch", "output": "Done!"},
    RESPONSES_ITEMS[3],
    {
        "type": "shell_call_output",
        "call_id": "call_shell",
        "output": [{"stdout": "text\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    RESPONSES_ITEMS[4],
    {"type": "local_shell_call_output", "id": "call_local", "output": "total 0"},
    RESPONSES_ITEMS[5],
    {"type": "apply_patch_call_output", "call_id": "call_apply", "status": "completed", "output": "patched"},
]


def test_codex_items_sent_back_reach_a_responses_upstream_verbatim(gw: Gateway) -> None:
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    client.responses.create(model="openai-responses--items", input=HISTORY, store=False)  # type: ignore[arg-type]
    path, body = gw.upstream.received[-1]
    assert path.endswith("/responses")
    assert body["input"][1:] == HISTORY[1:]


def test_codex_items_sent_back_reach_a_chat_upstream_as_tool_calls_and_results(gw: Gateway) -> None:
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    since = len(gw.log.lines)
    client.responses.create(model="openai-chat--items", input=HISTORY, store=False)  # type: ignore[arg-type]
    path, body = gw.upstream.received[-1]
    assert path.endswith("/chat/completions")
    calls = [c for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("call_patch", "apply_patch"),
        ("call_shell", "shell"),
        ("call_local", "local_shell"),
        ("call_apply", "apply_patch"),
    ]
    results = {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    assert (
        results["call_patch"] == "Done!" and results["call_local"] == "total 0" and results["call_apply"] == "patched"
    )
    assert '"exit_code":0' in results["call_shell"]
    assert "input_item:web_search_call" in dropped(gw, "openai-chat--items", False, since)


def test_a_stored_turn_sends_its_kept_items_back_with_the_next_turn(gw: Gateway) -> None:
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    first = client.responses.create(model="openai-responses--items", input="text")  # stored: the default
    result = {"type": "custom_tool_call_output", "call_id": "call_patch", "output": "Done!"}
    client.responses.create(model="openai-responses--items", previous_response_id=first.id, input=[result])  # type: ignore[list-item]
    _, body = gw.upstream.received[-1]
    sent = body["input"]
    for item in RESPONSES_ITEMS[1:]:  # the previous answer's items, as the upstream gave them
        assert item in sent, item["type"]
    assert sent[-1] == result


ANTHROPIC_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "text"},
    {"role": "assistant", "content": ANTHROPIC_BLOCKS[:3]},
    {"role": "user", "content": "more"},
]


def test_server_tool_blocks_sent_back_reach_an_anthropic_upstream_verbatim(gw: Gateway) -> None:
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-caller", max_retries=0, timeout=20)
    client.messages.create(model="anthropic--server_tools", max_tokens=100, messages=ANTHROPIC_HISTORY)  # type: ignore[arg-type]
    _, body = gw.upstream.received[-1]
    assert body["messages"][1]["content"] == ANTHROPIC_BLOCKS[:3]


def test_server_tool_blocks_sent_back_are_left_out_and_reported_for_another_upstream(gw: Gateway) -> None:
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-caller", max_retries=0, timeout=20)
    since = len(gw.log.lines)
    client.messages.create(model="openai-chat--history", max_tokens=100, messages=ANTHROPIC_HISTORY)  # type: ignore[arg-type]
    path, body = gw.upstream.received[-1]
    assert path.endswith("/chat/completions")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == "Searching."
    assert set(dropped(gw, "openai-chat--history", False, since)) >= {
        "input_item:server_tool_use",
        "input_item:web_search_tool_result",
    }


# --------------------------------------------------------------------------- guardrails

MAILED = "*** Begin Patch\n*** Add File: text.txt\n+write to bob@example.com\n*** End Patch\n"


@pytest.fixture(scope="module")
def guarded() -> Iterator[Gateway]:
    upstream = ItemsUpstream(patch=MAILED)
    with capture_access_log() as log, ServerThread(upstream) as up:
        config = gateway_config(up.url)
        config["guardrails"] = [{"name": "pii", "kind": "pii"}]
        for route in config["routes"]:
            if route["model"] == "openai-responses--*":
                route["guardrails"] = ["pii"]
        with ServerThread(create_app(Settings(**config))) as server:
            yield Gateway(server.url, server.url, upstream, log)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_kept_item_is_redacted_like_any_answer(guarded: Gateway, stream: bool) -> None:
    client = openai.OpenAI(base_url=guarded.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    if stream:
        output = None
        for event in client.responses.create(model="openai-responses--items", input="text", stream=True):
            if event.type == "response.completed":
                output = event.response.output
        assert output is not None
    else:
        output = client.responses.create(model="openai-responses--items", input="text").output
    patch = output[2]
    assert patch.type == "custom_tool_call"
    assert patch.input == MAILED.replace("bob@example.com", "[REDACTED:email]")
    assert patch.call_id == "call_patch"  # ids are not texts


def test_a_kept_item_sent_back_is_redacted_like_any_request(guarded: Gateway) -> None:
    client = openai.OpenAI(base_url=guarded.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    sent_back = {**RESPONSES_ITEMS[2], "input": MAILED}
    client.responses.create(
        model="openai-responses--items",
        input=[{"role": "user", "content": "text"}, sent_back],  # type: ignore[list-item]
        store=False,
    )
    _, body = guarded.upstream.received[-1]
    assert body["input"][1]["input"] == MAILED.replace("bob@example.com", "[REDACTED:email]")


GEMINI_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "parts": [{"text": "text"}]},
    {"role": "model", "parts": GEMINI_PARTS[:3]},
    {"role": "user", "parts": [{"text": "more"}]},
]


def test_code_execution_parts_sent_back_reach_a_gemini_upstream_verbatim(gw: Gateway) -> None:
    client = gemini_client(gw.url)  # (held: a collected client closes its connection)
    client.models.generate_content(model="gemini--code", contents=GEMINI_HISTORY)  # type: ignore[arg-type]
    path, body = gw.upstream.received[-1]
    assert ":generateContent" in path
    assert body["contents"][1]["parts"] == GEMINI_PARTS[:3]


def test_google_search_steps_sent_back_reach_an_interactions_upstream_verbatim(gw: Gateway) -> None:
    steps = [{"type": "user_input", "content": [{"type": "text", "text": "text"}]}, *INTERACTIONS_STEPS]
    steps.append({"type": "user_input", "content": [{"type": "text", "text": "more"}]})
    client = gemini_client(gw.url)
    client.interactions.create(model="gemini-interactions--search", input=steps, store=False)  # type: ignore[arg-type]
    path, body = gw.upstream.received[-1]
    assert path.endswith("/interactions")
    assert body["input"][1:3] == INTERACTIONS_STEPS[:2]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("store", [True, False], ids=["stored", "unstored"])
def test_a_continued_response_echoes_its_previous_response_id(gw: Gateway, stream: bool, store: bool) -> None:
    """The gateway resolves ``previous_response_id`` itself, so the upstream never sees it: the
    answer (an unstored stream would otherwise be the upstream's own frames) still names it."""
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    first = client.responses.create(model="openai-responses--items", input="text")
    params: dict[str, Any] = {"model": "openai-responses--items", "input": "more", "store": store}
    if not stream:
        assert client.responses.create(previous_response_id=first.id, **params).previous_response_id == first.id
        return
    events = list(client.responses.create(previous_response_id=first.id, stream=True, **params))
    objects = [e.response for e in events if e.type in ("response.created", "response.completed")]
    assert [r.previous_response_id for r in objects] == [first.id, first.id]
    assert "previous_response_id" not in gw.upstream.received[-1][1]


def test_custom_and_built_in_tools_reach_a_responses_upstream_as_declared(gw: Gateway) -> None:
    """Codex's custom ``apply_patch`` (with its grammar), ``local_shell`` and a namespace holding a
    custom tool: verbatim, in their order, with the tool choice naming the custom tool."""
    patch = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files.",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    }
    space = {
        "type": "namespace",
        "name": "functions",
        "description": "code",
        "tools": [{"type": "custom", "name": "exec"}],
    }
    tools: list[Any] = [patch, {"type": "local_shell"}, {"type": "shell"}, space]
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-caller", max_retries=0, timeout=20)
    client.responses.create(
        model="openai-responses--items",
        input="text",
        tools=tools,
        tool_choice={"type": "custom", "name": "apply_patch"},
        store=False,
    )
    body = gw.upstream.received[-1][1]
    assert body["tools"] == tools
    assert body["tool_choice"] == {"type": "custom", "name": "apply_patch"}
