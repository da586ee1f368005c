"""``auto_cache = true`` on an Anthropic provider: breakpoints in the body the upstream received.

An OpenAI or Gemini caller's long agent conversation gets ``cache_control`` on the end of its
system prompt, its last turn and the user turn before it, when each prefix is long enough for the
model; a short one gets none; a caller's own breakpoints are left exactly as sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import FakeUpstream, ServerThread

LONG = "You are a careful coding agent working in a large repository. " * 120  # ~7 400 characters
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream) -> Iterator[str]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    for provider in config["providers"]:
        if provider["dialect"] == "anthropic":
            provider["auto_cache"] = True
    config["routes"].insert(
        0, {"model": "haiku", "provider": "up-anthropic", "upstream_model": "claude-haiku-4-5--text"}
    )
    with ServerThread(create_app(Settings(**config))) as server:
        yield server.url


def agent_turns(tool_output: str = "def main(): ...") -> list[dict[str, Any]]:
    """An OpenAI-chat agent conversation: system, a task, a tool call and its result."""
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    return [
        {"role": "system", "content": LONG},
        {"role": "user", "content": "Fix the failing test in a.py"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_output},
    ]


READ_FILE = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}}}


def sent(fake: FakeUpstream) -> dict[str, Any]:
    return fake.last("anthropic").body


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where the body has cache_control: "system", "tools", "messages[i]"."""
    found = []
    found += ["tools" for t in body.get("tools", []) if "cache_control" in t]
    if isinstance(body.get("system"), list):
        found += ["system" for b in body["system"] if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            found += [f"messages[{i}]" for b in m["content"] if "cache_control" in b]
    return found


def chat(url: str, messages: list[dict[str, Any]], model: str = "anthropic--text") -> None:
    body = {"model": model, "messages": messages, "tools": [READ_FILE]}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 200, r.text


def test_an_openai_agent_conversation_gets_breakpoints(gw: str, fake: FakeUpstream) -> None:
    chat(gw, agent_turns())
    body = sent(fake)
    assert body["system"][-1]["cache_control"] == EPHEMERAL
    # the prefix, the previous turn's end (the task: what the last request wrote), this turn's last block
    assert breakpoints(body) == ["system", "messages[0]", "messages[2]"]
    assert body["messages"][2]["content"][-1]["type"] == "tool_result"


def test_the_previous_user_turn_is_marked_too(gw: str, fake: FakeUpstream) -> None:
    turns = agent_turns()
    turns += [
        {"role": "assistant", "content": "Done; anything else?"},
        {"role": "user", "content": "Now run the linter"},
    ]
    chat(gw, turns)
    body = sent(fake)
    assert breakpoints(body) == ["system", "messages[2]", "messages[4]"]
    assert len(breakpoints(body)) <= 4


def test_a_short_prompt_gets_none(gw: str, fake: FakeUpstream) -> None:
    chat(gw, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    assert breakpoints(sent(fake)) == []


def test_the_models_own_minimum_holds(gw: str, fake: FakeUpstream) -> None:
    """Claude Haiku 4.5 caches from 4096 tokens: ~1 850 tokens of prefix get no breakpoint."""
    chat(gw, agent_turns(), model="haiku")
    assert breakpoints(sent(fake)) == []
    chat(gw, agent_turns("x = 1\n" * 2000), model="haiku")  # the tool output makes the conversation long enough
    assert breakpoints(sent(fake)) == ["messages[2]"]


def test_a_callers_own_cache_control_is_never_moved(gw: str, fake: FakeUpstream) -> None:
    body = {
        "model": "anthropic--text",
        "max_tokens": 100,
        "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [
            {"role": "user", "content": "first " * 900},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second"},
        ],
    }
    r = httpx.post(gw + "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=10)
    assert r.status_code == 200, r.text
    got = sent(fake)
    assert breakpoints(got) == ["system"]
    assert got["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_a_gemini_caller_is_cached_too(gw: str, fake: FakeUpstream) -> None:
    body = {
        "systemInstruction": {"parts": [{"text": LONG}]},
        "contents": [{"role": "user", "parts": [{"text": "Summarise the repository"}]}],
    }
    r = httpx.post(
        gw + "/v1beta/models/anthropic--text:generateContent", json=body, headers={"x-goog-api-key": "k"}, timeout=10
    )
    assert r.status_code == 200, r.text
    assert breakpoints(sent(fake)) == ["system", "messages[0]"]


def test_without_auto_cache_nothing_is_added(gateway: ServerThread, fake: FakeUpstream) -> None:
    chat(gateway.url, agent_turns())
    assert breakpoints(sent(fake)) == []
