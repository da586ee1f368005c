"""Issue 14 item 2: every caller's way of asking for reasoning reaches every upstream in its own terms.

All 25 caller × upstream pairs through the real server, each caller's request written as that
dialect's clients write it (raw HTTP in the caller's format), the upstream's request read back
from the recording fake: "thinking asked" at the caller means thinking asked in the request the
upstream received, a caller that wants thought text gets it asked for where the upstream has a
switch for it, and a caller that asked nothing sends no reasoning setting upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.fake_upstream import FakeUpstream, ServerThread

UPSTREAMS = ["anthropic", "openai-chat", "openai-responses", "gemini", "gemini-interactions"]
EFFORTS = {"minimal", "low", "medium", "high", "xhigh"}
HI = "Think about it: what is 6 x 7?"


def anthropic_req(model: str, ask: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {
        "model": model,
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": HI}],
        **(ask or {}),
    }


def chat_req(model: str, ask: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": HI}], **(ask or {})}


def responses_req(model: str, ask: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"model": model, "input": HI, "store": False, **(ask or {})}


def gemini_req(model: str, ask: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    gen = {"maxOutputTokens": 8192, **({"thinkingConfig": ask} if ask else {})}
    return f"/v1beta/models/{model}:generateContent", {
        "contents": [{"role": "user", "parts": [{"text": HI}]}],
        "generationConfig": gen,
    }


def interactions_req(model: str, ask: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    return "/v1beta/interactions", {
        "model": model,
        "input": HI,
        "store": False,
        "generation_config": {"max_output_tokens": 8192, **(ask or {})},
    }


Builder = Callable[[str, "dict[str, Any] | None"], tuple[str, dict[str, Any]]]
# caller -> (request builder, [(name, how that caller asks for reasoning, does it want thought text)])
CALLERS: dict[str, tuple[Builder, list[tuple[str, dict[str, Any], bool]]]] = {
    "anthropic": (
        anthropic_req,
        [
            ("enabled+budget", {"thinking": {"type": "enabled", "budget_tokens": 2048}}, True),
            ("adaptive+effort", {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}, True),
            ("adaptive", {"thinking": {"type": "adaptive"}}, True),
        ],
    ),
    "openai-chat": (chat_req, [("reasoning_effort", {"reasoning_effort": "low"}, False)]),
    "openai-responses": (
        responses_req,
        [
            ("effort+summary", {"reasoning": {"effort": "low", "summary": "auto"}}, True),
            ("effort", {"reasoning": {"effort": "high"}}, False),
        ],
    ),
    "gemini": (
        gemini_req,
        [
            ("budget+thoughts", {"thinkingBudget": 2048, "includeThoughts": True}, True),
            ("level", {"thinkingLevel": "LOW", "includeThoughts": True}, True),
            ("dynamic", {"thinkingBudget": -1}, False),
        ],
    ),
    "gemini-interactions": (
        interactions_req,
        [
            ("level+summaries", {"thinking_level": "low", "thinking_summaries": "auto"}, True),
            ("level", {"thinking_level": "high"}, False),
        ],
    ),
}


def thinking_asked(upstream: str, body: dict[str, Any]) -> bool:
    """Whether the upstream's own request asks for reasoning, in that upstream's own terms."""
    if upstream == "anthropic":
        return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    if upstream == "openai-chat":
        return body.get("reasoning_effort") in EFFORTS
    if upstream == "openai-responses":
        return (body.get("reasoning") or {}).get("effort") in EFFORTS
    if upstream == "gemini":
        tc = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
        return bool(tc.get("thinkingLevel")) or tc.get("thinkingBudget") not in (None, 0)
    gen = body.get("generation_config") or {}
    return gen.get("thinking_level") in EFFORTS


def thoughts_asked(upstream: str, body: dict[str, Any]) -> bool | None:
    """Whether thought text is asked for; None where the upstream has no such switch."""
    if upstream == "anthropic":
        return (body.get("thinking") or {}).get("display") != "omitted"
    if upstream == "openai-responses":
        return (body.get("reasoning") or {}).get("summary") in ("auto", "concise", "detailed")
    if upstream == "gemini":
        return ((body.get("generationConfig") or {}).get("thinkingConfig") or {}).get("includeThoughts") is True
    if upstream == "gemini-interactions":
        return (body.get("generation_config") or {}).get("thinking_summaries") == "auto"
    return None


def any_reasoning_setting(upstream: str, body: dict[str, Any]) -> list[str]:
    found = [k for k in ("thinking", "reasoning", "reasoning_effort") if k in body]
    found += [k for k in ("thinkingConfig",) if k in (body.get("generationConfig") or {})]
    found += [k for k in ("thinking_level", "thinking_summaries") if k in (body.get("generation_config") or {})]
    if "effort" in (body.get("output_config") or {}):
        found.append("output_config.effort")
    return found


def send(
    server: ServerThread, fake: FakeUpstream, caller: str, upstream: str, ask: dict[str, Any] | None
) -> dict[str, Any]:
    build = CALLERS[caller][0]
    path, body = build(f"{upstream}--text", ask)
    before = len(fake.received)
    response = httpx.post(server.url + path, json=body, timeout=15)
    assert response.status_code == 200, response.text
    sent = [r for r in fake.received[before:] if r.dialect == upstream]
    assert len(sent) == 1
    return sent[0].body


PAIRS = [(caller, upstream) for caller in CALLERS for upstream in UPSTREAMS]


@pytest.mark.parametrize("caller,upstream", PAIRS)
def test_thinking_asked_reaches_the_upstream(
    gateway: ServerThread, fake: FakeUpstream, caller: str, upstream: str
) -> None:
    for name, ask, wants_text in CALLERS[caller][1]:
        body = send(gateway, fake, caller, upstream, ask)
        assert thinking_asked(upstream, body), f"{caller} ({name}) -> {upstream}: no reasoning asked in {body}"
        if wants_text:
            assert thoughts_asked(upstream, body) in (True, None), (
                f"{caller} ({name}) -> {upstream}: thought text not asked in {body}"
            )


@pytest.mark.parametrize("caller,upstream", PAIRS)
def test_thinking_not_asked_stays_not(gateway: ServerThread, fake: FakeUpstream, caller: str, upstream: str) -> None:
    body = send(gateway, fake, caller, upstream, None)
    assert any_reasoning_setting(upstream, body) == [], (
        f"{caller} -> {upstream}: reasoning asked though the caller did not"
    )


def test_an_anthropic_caller_asks_thoughts_of_an_interactions_upstream(
    gateway: ServerThread, fake: FakeUpstream
) -> None:
    """The reported case: enabled with budget_tokens, and adaptive with output_config.effort."""
    body = send(
        gateway, fake, "anthropic", "gemini-interactions", {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    )
    assert (
        body["generation_config"]["thinking_level"] == "low"
        and body["generation_config"]["thinking_summaries"] == "auto"
    )
    body = send(
        gateway,
        fake,
        "anthropic",
        "gemini-interactions",
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
    )
    assert (
        body["generation_config"]["thinking_level"] == "high"
        and body["generation_config"]["thinking_summaries"] == "auto"
    )


@pytest.mark.parametrize(
    "caller,ask,effort",
    [
        ("openai-chat", {"reasoning_effort": "high"}, "high"),
        ("openai-responses", {"reasoning": {"effort": "low", "summary": "auto"}}, "low"),
        ("gemini", {"thinkingLevel": "HIGH", "includeThoughts": True}, "high"),
        ("gemini-interactions", {"thinking_level": "xhigh", "thinking_summaries": "auto"}, "max"),
    ],
)
def test_current_claude_models_are_asked_adaptive_thinking_with_an_effort(
    gateway: ServerThread, fake: FakeUpstream, caller: str, ask: dict[str, Any], effort: str
) -> None:
    """Claude 4.6+ deprecates (Opus 4.7 and Claude 5 refuse) budget_tokens: adaptive + output_config.effort.
    (An Anthropic caller's own thinking object goes as it was sent.)"""
    build = CALLERS[caller][0]
    path, body = build("up-anthropic/claude-opus-4-7--text", ask)
    response = httpx.post(gateway.url + path, json=body, timeout=15)
    assert response.status_code == 200, response.text
    sent = fake.last("anthropic").body
    assert sent["thinking"] == {"type": "adaptive"} and sent["output_config"] == {"effort": effort}
